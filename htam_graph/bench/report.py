"""A bench's report: the tables (results.py), the metric tables (CSV), three plots (PNG)
and report.md, which says first of all which evaluator and which LLM produced the
numbers. Needs no GPU and no LLM: only the bench's folder."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # the object API: no pyplot, no global backend state
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullLocator
from pydantic import BaseModel

from htam_graph.bench.metrics import (
    FAST_P,
    fast_p_curve,
    finished_everywhere,
    per_family,
    per_method,
    per_seed,
    policy,
    unseen_progress,
)
from htam_graph.bench.plan import BenchManifest, Layout, streams
from htam_graph.bench.results import Results, collect, write_tables
from htam_graph.errors import BadInput
from htam_graph.files import atomic_write
from htam_graph.runner.sandbox import NO_SANDBOX_FLAG

log = logging.getLogger(__name__)

# What a report says first when its numbers were not measured by this bench on a GPU.
BANNERS = {
    "stand-in": "> **Synthetic numbers, not a benchmark.** They come from the stand-in evaluator: static checks "
    "and nvcc builds are real, but every candidate that builds is called correct and its time is derived from a "
    "hash of its source. They show what the report looks like; they say nothing about any method or kernel.",
    "replay": "> **Replayed numbers.** The replay evaluator read every verdict and time from a file of earlier GPU "
    "results; nothing was measured while this bench ran.",
}
SPEEDUP_TICKS = [0.05, 0.1, 0.2, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 7.5, 10.0, 20.0, 50.0, 100.0]
TOKENS = [
    ("input_tokens", "input"),
    ("cache_read_tokens", "cache reads"),
    ("cache_write_tokens", "cache writes"),
    ("output_tokens", "output"),
]


class Outcome(BaseModel):
    """What a report wrote, and its metrics per method (JSON-ready: NaN is None)."""

    report: Path
    tables: list[Path]
    bench: str
    llm: str
    evaluator: str
    sandbox: bool
    runs: int
    methods: list[dict[str, Any]]


def report_bench(layout: Layout) -> Outcome:
    """The tables and the report of the bench in `layout`, from the runs finished so far
    (the report says when that is not all of them)."""
    manifest = BenchManifest.read(layout)
    results = collect(layout, manifest, streams(manifest.config, manifest.tag))
    if results.runs.empty:
        raise BadInput(f"{layout.out}: no run has finished yet; nothing to report", option="--out", path=layout.out)
    tables = write_tables(layout, results)
    methods = write_report(layout, manifest, results)
    rows = [{str(k): _none_for_nan(v) for k, v in row.items()} for row in methods.to_dict(orient="records")]
    config = manifest.config
    return Outcome(
        report=layout.report,
        tables=tables,
        bench=manifest.tag,
        llm=config.llm,
        evaluator=config.evaluator,
        sandbox=config.sandbox,
        runs=len(results.runs),
        methods=rows,
    )


def _none_for_nan(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def write_report(layout: Layout, manifest: BenchManifest, results: Results) -> pd.DataFrame:
    """results/metrics.csv (per method), results/metrics_per_seed.csv,
    results/metrics_per_family.csv, plots/*.png and report.md; returns the metrics per method."""
    seeds = per_seed(results.runs)
    methods = per_method(seeds)
    families = per_family(results.runs)
    config = manifest.config
    per_task = len(config.methods) * len(config.seeds)
    common: tuple[pd.DataFrame, int] | None = None  # partial: per method over the tasks whose every run finished
    if len(results.runs) < len(config.tasks) * per_task:
        finished = finished_everywhere(results.runs, per_task)
        common = (per_method(per_seed(finished)), finished["task_id"].nunique())
    layout.results.mkdir(parents=True, exist_ok=True)
    if common is not None:
        common[0].to_csv(layout.results / "metrics_finished_tasks.csv", index=False)
    seeds.to_csv(layout.results / "metrics_per_seed.csv", index=False)
    methods.to_csv(layout.results / "metrics.csv", index=False)
    families.to_csv(layout.results / "metrics_per_family.csv", index=False)
    draws = policy(results.steps)
    draws.to_csv(layout.results / "metrics_policy.csv", index=False)
    unseen = unseen_progress(results.steps)
    unseen.to_csv(layout.results / "metrics_unseen_progress.csv", index=False)
    layout.plots.mkdir(parents=True, exist_ok=True)
    plots = {
        "fast_p": _plot_fast_p(results.runs),
        "speedup": _plot_speedups(results.runs),
        "cost": _plot_cost(seeds),
    }
    for name, figure in plots.items():
        figure.savefig(layout.plots / f"{name}.png", dpi=120)
    text = _markdown(manifest, results, seeds, methods, families, common, draws, unseen)
    atomic_write(layout.report, text)
    log.info("report written to %s", layout.report)
    return methods


# -- plots ------------------------------------------------------------------------------
def _colours(methods: list[str]) -> dict[str, str]:
    return {m: f"C{i}" for i, m in enumerate(methods)}


def _methods(runs: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(runs["method"]))


def _plot_fast_p(runs: pd.DataFrame) -> Figure:
    top = max(2.0, 1.1 * float(runs["speedup"].max(skipna=True) if runs["speedup"].notna().any() else 0.0))
    curve = fast_p_curve(runs, np.linspace(0.0, top, 241))
    figure = Figure(figsize=(7, 4.2), layout="constrained")
    ax = figure.add_subplot()
    colours = _colours(_methods(runs))
    for method, colour in colours.items():
        by_p = curve[curve["method"] == method].groupby("p")["fast_p"]
        ps = by_p.mean().index.to_numpy()
        ax.plot(ps, 100 * by_p.mean().to_numpy(), color=colour, label=method)
        ax.fill_between(ps, 100 * by_p.min().to_numpy(), 100 * by_p.max().to_numpy(), color=colour, alpha=0.15)
    ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set(xlabel="p (speedup over eager PyTorch)", ylabel="fast_p (% of tasks)", ylim=(0, 102), xlim=(0, top))
    ax.set_title("fast_p: tasks with a correct candidate faster than p x eager (band: min-max over seeds)", fontsize=9)
    ax.legend()
    return figure


def _plot_speedups(runs: pd.DataFrame) -> Figure:
    methods = _methods(runs)
    figure = Figure(figsize=(7, 4.2), layout="constrained")
    ax = figure.add_subplot()
    colours = _colours(methods)
    correct = runs[runs["correct"]]
    values = [correct.loc[correct["method"] == m, "speedup"].to_numpy(dtype=float) for m in methods]
    if any(len(v) for v in values):
        ax.boxplot(
            [v if len(v) else [np.nan] for v in values], positions=range(len(methods)), widths=0.5, showfliers=False
        )
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(FixedLocator(_speedup_ticks(np.concatenate(values))))
        ax.yaxis.set_major_formatter(FormatStrFormatter("%gx"))
        ax.yaxis.set_minor_locator(NullLocator())
    for i, (method, v) in enumerate(zip(methods, values)):
        ax.scatter(i + np.linspace(-0.15, 0.15, len(v)), v, color=colours[method], s=14, alpha=0.8, zorder=3)
    failed = [int((runs["method"] == m).sum()) - len(v) for m, v in zip(methods, values)]
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xticks(range(len(methods)), [f"{m}\n{n} failed" for m, n in zip(methods, failed)])
    ax.set(ylabel="best correct speedup over eager")
    ax.set_title(
        "Speedup per run (every task and seed); runs without a correct candidate counted as failed", fontsize=9
    )
    return figure


def _speedup_ticks(values: np.ndarray) -> list[float]:
    """Round speedups within the values' range (a log axis labels only powers of ten)."""
    lo, hi = float(np.nanmin(values)) / 1.1, float(np.nanmax(values)) * 1.1
    ticks = [t for t in SPEEDUP_TICKS if lo <= t <= hi] or [1.0]
    return ticks[:: 1 + len(ticks) // 9]


def _plot_cost(seeds: pd.DataFrame) -> Figure:
    methods = list(dict.fromkeys(seeds["method"]))
    per = seeds.groupby("method", sort=False)
    figure = Figure(figsize=(9, 3.8), layout="constrained")
    dollars, tokens = figure.subplots(1, 2)
    x = np.arange(len(methods))
    cost, spread = per["cost_usd"].mean().reindex(methods), per["cost_usd"].std().reindex(methods)
    dollars.bar(x, cost.fillna(0.0), yerr=spread.fillna(0.0), color=[f"C{i}" for i in x], capsize=3)
    for i, value in enumerate(cost):
        if math.isnan(value):
            dollars.annotate("unknown", (i, 0), xytext=(0, 4), textcoords="offset points", ha="center", fontsize=8)
    dollars.set_xticks(x, methods, rotation=20)
    dollars.set_ylim(bottom=0)
    dollars.set(ylabel="dollars per task", title="Cost per task (mean over seeds)")
    bottom = np.zeros(len(methods))
    for column, label in TOKENS:
        height = per[column].mean().reindex(methods).fillna(0.0).to_numpy() / 1000
        tokens.bar(x, height, bottom=bottom, label=label)
        bottom += height
    tokens.set_xticks(x, methods, rotation=20)
    tokens.set_ylim(bottom=0)
    tokens.set(ylabel="thousand tokens per task", title="Tokens per task")
    tokens.legend(fontsize=8)
    _small_titles(dollars, tokens)
    return figure


def _small_titles(*axes: Axes) -> None:
    for ax in axes:
        ax.title.set_fontsize(9)


# -- markdown ---------------------------------------------------------------------------
def _share(mean: float, std: float) -> str:
    if math.isnan(mean):
        return "n/a"
    return f"{100 * mean:.0f}%" + (f" ± {100 * std:.0f}" if not math.isnan(std) else "")


def _times(mean: float, std: float, missing: str = "n/a") -> str:
    if math.isnan(mean):
        return missing
    return f"{mean:.2f}x" + (f" ± {std:.2f}" if not math.isnan(std) else "")


def _fraction(value: float, digits: int = 2) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _cached_share(m: pd.Series) -> str:
    """Cache reads as a share of all input tokens (base-rate input, cache reads and writes)."""
    total = m["input_tokens"] + m["cache_read_tokens"] + m["cache_write_tokens"]
    return f"{100 * m['cache_read_tokens'] / total:.0f}%" if total > 0 else "-"


def _dollars(value: float) -> str:
    return "unknown" if math.isnan(value) else f"${value:.3f}"


def pipe_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _param(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float | int) else str(value)


def _markdown(
    manifest: BenchManifest,
    results: Results,
    seeds: pd.DataFrame,
    methods: pd.DataFrame,
    families: pd.DataFrame,
    common: tuple[pd.DataFrame, int] | None = None,
    draws: pd.DataFrame | None = None,
    unseen: pd.DataFrame | None = None,
) -> str:
    config, runs = manifest.config, results.runs
    evaluator = config.evaluator
    devices = sorted(set(runs["device"]))
    parts = [f"# htam bench: {config.suite}"]
    if evaluator in BANNERS:
        parts.append(BANNERS[evaluator])
    if config.llm.startswith("script:"):
        parts.append(f"> The LLM's answers were replayed from a script ({config.llm.removeprefix('script:')}).")
    planned = len(config.tasks) * len(config.methods) * len(config.seeds)
    if len(runs) < planned:
        parts.append(
            f"> **Partial: {len(runs)} of {planned} runs have finished.** Every value below is over the finished "
            "runs only; run the bench's command again to finish it."
        )
    if manifest.note:
        parts.append(manifest.note)
    memory = (
        f"imported into each from `{config.memory_from.path}` (sha256 {config.memory_from.sha256[:12]})"
        if config.memory_from
        else "seeded from the seed bank"
    )
    ids = [t.id for t in config.tasks]
    setup = [
        ["tasks", f"{len(ids)}: {', '.join(ids[:6])}" + (f" and {len(ids) - 6} more" if len(ids) > 6 else "")],
        ["methods", ", ".join(m.value for m in config.methods)],
        ["seeds", ", ".join(str(s) for s in config.seeds)],
        ["steps per run", f"{config.steps} (vanilla: 1)"],
        ["LLM", f"`{config.llm}`"],
        ["evaluator", f"**{evaluator}**: " + "; ".join(devices)],
        ["torch.compile reference", _compile_reference(config.evaluator, config.compile_reference, runs)],
        ["sandbox", sandbox_text(config.evaluator, config.sandbox)],
        ["memory", f"one per method and seed, {memory}"],
        ["scoring (docs/method.md)", ", ".join(f"{k} = {_param(v)}" for k, v in config.scoring.model_dump().items())],
        ["runs", f"{len(runs)} of {planned} finished ({runs['steps_done'].sum()} steps)"],
        [
            "bench",
            f"`{manifest.tag}`, htam-graph {manifest.htam_version}, started {manifest.created_at:%Y-%m-%d %H:%M} UTC",
        ],
    ]
    parts.append(pipe_table(["", ""], setup))
    parts.append("## Results")
    n_seeds = len(config.seeds)
    parts.append(
        f"Each value is over the {len(config.tasks)} tasks, then the mean over {n_seeds} seed"
        + ("s ± their standard deviation" if n_seeds > 1 else "")
        + ". A task's speedup is its run's best correct candidate's; a task without one counts 1.0 in "
        "*geomean* and is left out of *geomean, correct*. Definitions below."
    )
    header = [
        "method",
        "correct",
        "fast_1 (Fast@1)",
        *(f"fast_{p:g}" for p in FAST_P[1:]),
        "geomean",
        "geomean, correct",
        "vs torch.compile",
        "vs torch.compile, correct",
        "$ per task",
    ]
    rows = []
    for _, m in methods.iterrows():
        rows.append(
            [
                f"**{m['method']}**",
                _share(m["correct"], m["correct_std"]),
                *(_share(m[f"fast_{p:g}"], m[f"fast_{p:g}_std"]) for p in FAST_P),
                _times(m["geomean"], m["geomean_std"]),
                _times(m["geomean_correct"], m["geomean_correct_std"]),
                _times(m["geomean_compile"], m["geomean_compile_std"], "not timed"),
                _times(m["geomean_compile_correct"], m["geomean_compile_correct_std"], "not timed"),
                _dollars(m["cost_usd"]),
            ]
        )
    parts.append(pipe_table(header, rows))
    if common is not None:
        parts.append(_finished_tasks(*common, len(config.methods) * n_seeds))
    parts.append("![fast_p over p, per method](plots/fast_p.png)")
    parts.append("![speedup distribution per method](plots/speedup.png)")
    parts.append("![cost per task, per method](plots/cost.png)")
    parts.append("## Cost per task")
    cost_rows = [
        [m["method"], _dollars(m["cost_usd"]), *(f"{m[c]:,.0f}" for c, _ in TOKENS), _cached_share(m)]
        for _, m in methods.iterrows()
    ]
    header = ["method", "dollars", *(f"{label} tokens" for _, label in TOKENS), "cached share"]
    parts.append(pipe_table(header, cost_rows))
    parts.append("## Per seed")
    seed_rows = [
        [
            s["method"],
            str(s["seed"]),
            _share(s["correct"], math.nan),
            _share(s["fast_1"], math.nan),
            _times(s["geomean"], math.nan),
            _times(s["geomean_correct"], math.nan),
            _times(s["geomean_compile"], math.nan, "not timed"),
            _dollars(s["cost_usd"]),
        ]
        for _, s in seeds.iterrows()
    ]
    parts.append(
        pipe_table(
            ["method", "seed", "correct", "fast_1", "geomean", "geomean, correct", "vs torch.compile", "$ per task"],
            seed_rows,
        )
    )
    parts.append("## Per operator family")
    parts.append(
        "Tasks grouped by the operator family the strategy catalog recognises in their graph "
        "(`unsupported`: no catalog kernel for it; `supported`: every task but those), then the same metrics, "
        "the mean over seeds."
    )
    family_rows = [
        [
            f["family"],
            f["method"],
            f"{f['tasks']:.0f}",
            _share(f["correct"], math.nan),
            _share(f["fast_1"], math.nan),
            _times(f["geomean"], math.nan),
            _times(f["geomean_compile"], math.nan, "not timed"),
        ]
        for _, f in families.iterrows()
    ]
    family_header = ["family", "method", "tasks", "correct", "fast_1", "geomean", "vs torch.compile"]
    parts.append(pipe_table(family_header, family_rows))
    if draws is not None and len(draws):
        parts.append("## The policy's draws")
        parts.append(
            "How sharply each method's policy chose its global directions, over the steps where it drew one: the "
            "mean probability of the drawn direction, the mean entropy of the draw divided by its maximum (1.0: "
            "uniform over the directions it could draw) and the median spread of their scores S(g). A spread small "
            'against tau makes the draws nearly uniform (docs/method.md, "The policy").'
        )
        draw_rows = [
            [d["method"], f"{d['steps_drawn']:.0f}", f"{d['p_chosen']:.2f}", _fraction(d["draw_entropy"], 3),
             _fraction(d["score_spread"], 3)]
            for _, d in draws.iterrows()
        ]  # fmt: skip
        parts.append(pipe_table(["method", "steps drawn", "P(drawn)", "entropy / max", "score spread"], draw_rows))
    if unseen is not None and len(unseen):
        parts.append("## Progress the reward does not see")
        why = {
            "best": "A step's reward is the gain in the run's best speedup, which starts at the reference's 1.0 "
            '(reward_from = best; docs/method.md, "Reward and counters"): while no kernel beats eager, a step that '
            "makes the run's fastest correct kernel faster earns 0, as one that changes nothing does.",
            "fastest": "This bench ran with reward_from = fastest, which measures a step's gain against the run's "
            "fastest correct kernel while no kernel beats eager, so the last two columns are 0 by construction.",
            "parent": "This bench ran with reward_from = parent: a step's reward is its signed gain over the kernel it "
            "modified, 0 within the dead-band of "
            f"{config.scoring.deadband:g} in log2 (docs/method.md); a step counted in the last two columns was "
            "faster than the fastest kernel so far, yet within the dead-band of its parent.",
        }[config.scoring.reward_from]
        parts.append(
            why + " Per method: the ok steps, those rewarded, and those that made the fastest kernel so far over 2% "
            "(over 1.5x) faster with reward 0."
        )
        unseen_rows = [
            [u["method"], f"{u['steps_ok']:.0f}", f"{u['rewarded']:.0f}", f"{u['unrewarded_progress']:.0f}",
             f"{u['unrewarded_over_1_5x']:.0f}"]
            for _, u in unseen.iterrows()
        ]  # fmt: skip
        parts.append(
            pipe_table(
                ["method", "ok steps", "rewarded", "faster, reward 0", "over 1.5x faster, reward 0"], unseen_rows
            )
        )
    parts.append("## Per task")
    parts.append("Best correct speedup over eager of each seed's run (✗: no correct candidate).")
    parts.append(per_task_table(runs, [m.value for m in config.methods], "speedup"))
    if runs["speedup_compile"].notna().any():
        parts.append(
            "The same runs' best candidates over torch.compile, timed in the same judge (-: not timed; "
            "1.00 is torch.compile's speed)."
        )
        parts.append(per_task_table(runs, [m.value for m in config.methods], "speedup_compile"))
    parts.append(DEFINITIONS)
    return "\n\n".join(parts) + "\n"


def _finished_tasks(common: pd.DataFrame, tasks: int, per_task: int) -> str:
    """A partial bench's like-for-like table: `common`, the metrics per method over the
    `tasks` tasks whose every run finished."""
    title = f"### Over the {tasks} tasks whose {per_task} runs all finished"
    if common.empty:
        return f"{title}\n\nNo task has all its runs finished yet: the table above compares methods on different tasks."
    rows = [
        [
            f"**{m['method']}**",
            _share(m["correct"], m["correct_std"]),
            _share(m["fast_1"], m["fast_1_std"]),
            _times(m["geomean"], m["geomean_std"]),
            _times(m["geomean_compile"], m["geomean_compile_std"], "not timed"),
        ]
        for _, m in common.iterrows()
    ]
    note = "The table above is over each method's own finished runs; this one compares the methods on the same tasks."
    table = pipe_table(["method", "correct", "fast_1", "geomean", "vs torch.compile"], rows)
    return f"{title}\n\n{note}\n\n{table}"


def sandbox_text(evaluator: str, on: bool) -> str:
    """How the bench's generated code ran: confined (--sandbox) or not (docs/threat-model.md)."""
    if evaluator == "replay":
        return f"{'on' if on else 'off'} (none needed: the replay evaluator runs no generated code)"
    if on:
        return "on: generated code and its builds ran confined (runner/sandbox.py, docs/threat-model.md)"
    return f"**off** ({NO_SANDBOX_FLAG}): generated code ran unconfined, with this user's privileges"


def _compile_reference(evaluator: str, asked: bool, runs: pd.DataFrame) -> str:
    if runs["speedup_compile"].notna().any():
        return f"timed for {int(runs['speedup_compile'].notna().sum())} of {int(runs['correct'].sum())} correct runs"
    if evaluator != "gpu":
        return f"not timed: the {evaluator} evaluator does not time it"
    return "not timed (--no-compile-reference)" if not asked else "not timed: no correct candidate"


def per_task_table(runs: pd.DataFrame, methods: list[str], column: str) -> str:
    """Per task and method, `column` of each seed's run (✗: no correct candidate, -: not timed)."""

    def cell(correct: bool, value: float) -> str:
        return "✗" if not correct else "-" if pd.isna(value) else f"{value:.2f}"

    rows = []
    for task_id, group in runs.groupby("task_id", sort=False):
        cells = [f"`{task_id}`", str(group["family"].iloc[0])]
        for method in methods:
            mine = group[group["method"] == method].sort_values("seed")
            cells.append(" / ".join(cell(c, v) for c, v in zip(mine["correct"], mine[column], strict=True)))
        rows.append(cells)
    return pipe_table(["task", "family", *methods], rows)


DEFINITIONS = """## Definitions

As in docs/method.md ("Metrics"), KernelBench's conventions:

- *speedup*: the reference's time over the candidate's, on the same inputs in the same judge, against eager
  PyTorch and, where it was timed, torch.compile. A task's value is its run's best correct candidate (the ok
  step with the highest speedup over eager; it can be slower than eager).
- *correct*: the share of tasks whose best candidate is correct (fast_0).
- *fast_p*: the share of tasks with a correct candidate faster than p times the reference; fast_1 of one run
  per task is Fast@1.
- *geomean*: the geometric mean of the speedups over all tasks, a task without a correct candidate counting 1.0
  (the reference is kept); *geomean, correct*: over the correct tasks only. Against torch.compile, over the
  tasks where it was timed.
- *cost*: per task, the mean over runs of input tokens billed at the base rate, cache reads, cache writes,
  output tokens and dollars (unknown when the model has no price); *cached share*: cache reads over all
  input tokens (the prompt cache's use).

Files: `results/runs.parquet` (and `.csv`, one row per run), `results/steps.parquet` (and `.csv`, one row per
step), `results/metrics.csv` (per method), `results/metrics_per_seed.csv`, `runs/<run id>/` (each run's folder:
steps, candidates, `best.py`), `memory/<method>-s<seed>.json` (each memory after its runs; start another bench
from it with `--memory-from`)."""
