"""`htam optimize TASK`: run the HTAM loop (or a baseline) on one task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from htam_graph.catalog import DEMO_REPLAY
from htam_graph.cli.common import (
    best_text,
    llm_options,
    print_json,
    print_table,
    require_sandbox,
    sandbox_option,
    settings,
)
from htam_graph.config import Settings
from htam_graph.errors import BackendError, BadInput, StoreStateError
from htam_graph.llm.base import LLMError
from htam_graph.llm.settings import LLMSettings
from htam_graph.loop.clients import make_client
from htam_graph.loop.evaluators import make_evaluator
from htam_graph.loop.records import RunSummary, StepRecord
from htam_graph.loop.runs import check_run_id, open_run, task_context
from htam_graph.loop.setup import RunSetup
from htam_graph.memory import open_store
from htam_graph.memory.models import RunConfig, best_step
from htam_graph.runner.jobs import EvalConfig
from htam_graph.vocab import Method

MEMORY_METHODS = {
    Method.HTAM,
    Method.HTAM_NO_PREFIX,
    Method.HTAM_NO_LOCAL,
    Method.HTAM_NO_HIERARCHY,
    Method.HTAM_NO_FAMILY,
}
DEFAULT_OUT = Path("htam-runs")


@click.command()
@click.argument("task")
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=RunConfig().steps,
    show_default=True,
    help="Optimization steps T (vanilla always takes one).",
)
@click.option(
    "--method",
    type=click.Choice([m.value for m in Method]),
    default=Method.HTAM.value,
    show_default=True,
    help="HTAM, an ablation (htam-no-prefix, htam-no-local, htam-no-hierarchy, htam-no-family) or a baseline "
    "(vanilla, feedback, flat); docs/method.md.",
)
@llm_options("Responses to replay with --llm script (a run folder's responses.yaml, or your own).")
@click.option(
    "--evaluator",
    type=click.Choice(["auto", "gpu", "stand-in", "replay"]),
    default="auto",
    show_default=True,
    help="gpu: judge on this machine's GPU; stand-in: no GPU, real static checks and nvcc builds but "
    "synthetic ok verdicts and times (for trying the loop; every output says so); replay: results a GPU "
    "recorded (--replay FILE; every output says so); auto: gpu.",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The replay file of --evaluator replay: a table `htam catalog record` wrote (table.parquet), which "
    "serves every kernel of --llm catalog's default catalog-space-v1; default: the demo's recording (an H200), "
    "which holds only `htam demo`'s runs (--model catalog-v1, reward_from = best).",
)
@sandbox_option
@click.option(
    "--store",
    "store_kind",
    type=click.Choice(["auto", "local", "neo4j"]),
    help="Memory backend for this run [env HTAM_STORE].",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the policy's draws (with the run id).")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_OUT,
    show_default=True,
    help="Folder of run folders.",
)
@click.option("--run-id", metavar="RUN_ID", help="Name the new run (default: task-method-seed-random).")
@click.option("--resume", "resume_id", metavar="RUN_ID", help="Continue a run folder under --out after its last step.")
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    metavar="USD",
    help="End the run cleanly after the step that reaches this many dollars.",
)
@click.option(
    "--root",
    type=click.Path(exists=True, path_type=Path),
    help="A KernelBench checkout or level folder TASK is looked up in.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON (progress goes to stderr).")
def optimize(
    task: str,
    steps: int,
    method: str,
    backend: str | None,
    model: str | None,
    family: str | None,
    base_url: str | None,
    script_path: Path | None,
    evaluator: str,
    replay_path: Path | None,
    sandbox: bool,
    store_kind: str | None,
    seed: int,
    out: Path,
    run_id: str | None,
    resume_id: str | None,
    max_cost: float | None,
    root: Path | None,
    as_json: bool,
) -> None:
    """Optimize TASK (a built-in id such as level1/19_ReLU, a KernelBench-format file, or a
    task of --root) for --steps steps: each step picks a direction from the memory,
    a strategy under it, asks the LLM for the next kernel, judges it and writes the
    outcome back into the memory. The run folder (--out/RUN_ID) holds every step, the best
    kernel as best.py and the responses for exact replay."""
    from htam_graph.tasks import resolve_task

    require_sandbox(sandbox)
    cfg = settings_with(settings(), store_kind, backend, model, base_url, family)
    if run_id is not None and resume_id is not None:
        raise BadInput("--run-id names a new run and --resume continues one: give one of them", option="--resume")
    run_id = check_run_id(run_id) if run_id is not None else None
    resolved = resolve_task(task, root)
    manifest_folder = open_run(out, resume_id, resolved) if resume_id else None
    chosen = manifest_folder[0].run.method if manifest_folder else Method(method)
    client = make_client(cfg.llm, script_path)
    client.check()
    context = task_context(resolved)
    console = Console(stderr=as_json)
    with open_store(cfg) as store:
        if chosen in MEMORY_METHODS and not store.get_globals():
            raise StoreStateError(
                f"the memory at {store.describe()} is empty: run `htam memory seed` first", store=store.describe()
            )
        kind = "gpu" if evaluator == "auto" else evaluator
        config = EvalConfig(sandbox=sandbox)
        with make_evaluator(kind, config, replay=replay_path or DEMO_REPLAY) as judge:
            setup = RunSetup(store=store, client=client, judge=judge)
            if manifest_folder is None:
                manifest_folder = setup.start(
                    out, resolved, chosen, seed, steps=steps, scoring=cfg.scoring, run_id=run_id
                )
            manifest = manifest_folder[0]
            console.print(
                f"[bold]{escape(manifest.run.id)}[/]  {escape(resolved.id)}  method {chosen.value}  "
                f"llm {escape(manifest.llm)}  reward from {manifest.run.config.scoring.reward_from}  "
                f"memory {escape(store.describe())}",
                highlight=False,
            )
            if judge.label != "gpu":
                console.print(f"[yellow]{escape(judge.device)}[/]", highlight=False)
            optimizer = setup.optimizer(
                resolved,
                manifest_folder,
                max_cost=max_cost,
                observe=lambda record, summary: _live(console, record, summary),
                context=context,
            )
            try:
                summary = optimizer.run()
            except LLMError as e:
                raise BackendError(
                    f"{e}; the finished steps are saved: continue with "
                    f"`htam optimize {task} --out {out} --resume {manifest.run.id}`",
                    backend=cfg.llm.backend,
                    model=cfg.llm.model,
                ) from e
    client.close()
    if as_json:
        print_json(summary.model_dump(mode="json"))
    else:
        _final(console, summary)


def settings_with(
    base: Settings,
    store_kind: str | None,
    backend: str | None,
    model: str | None,
    base_url: str | None,
    family: str | None = None,
) -> Settings:
    """The command's flags over the global settings (flags > environment > the settings file)."""
    given = {"backend": backend, "model": model, "base_url": base_url, "family": family}
    llm_given = {k: v for k, v in given.items() if v is not None}
    update: dict[str, Any] = {"llm": LLMSettings.model_validate({**base.llm.model_dump(), **llm_given})}
    if store_kind is not None:
        update["store"] = store_kind
    return base.model_copy(update=update)


def _strategy(global_id: str | None, local_id: str | None) -> str:
    """`global/local` without repeating the global in the local's id."""
    if local_id is not None:
        return f"{global_id}/{local_id.split('.', 1)[1]}"
    return global_id or "-"


def _live(console: Console, record: StepRecord, summary: RunSummary) -> None:
    """One line per step: direction/strategy, verdict, speedup, best so far, tokens, dollars."""
    speed = f" {record.speedup:.2f}x" if record.speedup is not None else ""
    tokens = summary.usage.input_tokens + summary.usage.cache_read_tokens + summary.usage.output_tokens
    improved, failed = record.best_after > record.best_before, record.verdict.value != "ok"
    colour = "green" if improved else "red" if failed else "default"
    fallback = " (strategy by record)" if record.local_fallback else ""
    console.print(
        f"{record.index + 1}/{summary.steps_planned} {escape(_strategy(record.global_id, record.local_id))}"
        f"{fallback}: [{colour}]{record.verdict.value}[/]{speed}, best {best_text(summary.best_speedup)}, "
        f"{tokens:,} tokens, {_dollars(summary.usage.cost_usd)}",
        highlight=False,
    )


def _final(console: Console, summary: RunSummary) -> None:
    so_far = [best_step(summary.trajectory[: n + 1]) for n in range(len(summary.trajectory))]
    rows = [
        (
            t.index + 1, _strategy(t.global_id, t.local_id), t.verdict.value, t.speedup, t.reward,
            best.speedup if best is not None else None,
            t.input_tokens + t.cache_write_tokens, t.cache_read_tokens, t.output_tokens, _dollars(t.cost_usd),
        )
        for t, best in zip(summary.trajectory, so_far)
    ]  # fmt: skip
    print_table(
        f"{summary.run_id}: {summary.task_id}, {summary.method.value} ({summary.evaluator})",
        ["step", "direction/strategy", "verdict", "speedup", "reward", "best", "input", "cached", "output", "cost"],
        rows,
    )
    if summary.cached_share is not None:
        console.print(f"prompt cache: {summary.cached_share:.0%} of the input tokens read from it", highlight=False)
    if summary.events:  # fallbacks and cut-off answers: counted, never silent
        events = ", ".join(f"{kind} x{n}" for kind, n in summary.events.items())
        console.print(f"[yellow]LLM events: {escape(events)}[/]", highlight=False)
    best = "no correct candidate"
    if summary.best_speedup is not None and summary.best_step is not None:
        best = f"best {best_text(summary.best_speedup, 3)} over eager (step {summary.best_step + 1})"
    cost = summary.usage.cost_usd
    console.print(
        f"{best}; {summary.steps_done}/{summary.steps_planned} steps, {summary.stopped}; "
        f"{_dollars(cost) if cost is not None else 'cost unknown (no price for the model)'}",
        highlight=False,
    )
    written = " (best kernel: best.py)" if summary.best_step is not None else ""  # none without a correct one
    console.print(f"run folder: {escape(summary.folder)}{written}", highlight=False)


def _dollars(cost: float | None) -> str:
    return "$?" if cost is None else f"${cost:.3f}"
