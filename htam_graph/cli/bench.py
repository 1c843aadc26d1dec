"""`htam bench SUITE`: every task with every method and seed, then tables and a report."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from htam_graph.bench.events import Event, RunFinished, RunStarted, StepFinished
from htam_graph.bench.executor import BenchFailed, ProcessExecutor, Slot
from htam_graph.bench.plan import BenchConfig, Layout, MemorySource, TaskEntry, exclusive, open_manifest, streams
from htam_graph.bench.run import run_bench
from htam_graph.bench.suite import resolve_suite
from htam_graph.bench.worker import BenchJob, content_digest, memory_digest, read_snapshot
from htam_graph.cli.common import (
    best_text,
    llm_options,
    numbers,
    print_json,
    print_table,
    require_sandbox,
    sandbox_option,
    settings,
)
from htam_graph.cli.optimize import MEMORY_METHODS, settings_with
from htam_graph.errors import BadInput, ConfigError, TaskError, UserError, error_type
from htam_graph.loop.clients import make_client
from htam_graph.memory.models import RunConfig
from htam_graph.runner.build import find_nvcc
from htam_graph.vocab import Method

if TYPE_CHECKING:
    import pandas as pd

    from htam_graph.bench.report import Outcome

DEFAULT_METHODS = "htam,flat,feedback"
DEFAULT_OUT = Path("htam-bench")
EVALUATORS = ["auto", "gpu", "stand-in", "replay"]

# The methods a train/test comparison trains: htam and its ablations (the seed bank's HTG and
# their evidence), and flat, whose memory is the steps it retrieves from (docs/method.md).
LEARNS = MEMORY_METHODS | {Method.FLAT}


@click.command()
@click.argument("suite", nargs=-1)
@click.option(
    "--method",
    "methods",
    default=DEFAULT_METHODS,
    show_default=True,
    help=f"Comma-separated methods: {', '.join(m.value for m in Method)} (docs/method.md).",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=RunConfig().steps,
    show_default=True,
    help="Optimization steps T per run (vanilla always takes one).",
)
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True, help="Seeds 0..N-1 per method.")
@click.option("--level", "levels", metavar="1,2", help="Keep the tasks of these levels.")
@click.option("--filter", "pattern", metavar="GLOB", help="Keep tasks whose id or name matches ('level2/*Gemm*').")
@click.option("--gpus", metavar="0,1", help="GPUs to use [default: every visible GPU].")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Worker processes: per GPU for the gpu evaluator [1], where they take turns on the GPU, one job at a "
    "time, and one generates and builds its next candidate while another's is judged; in all for an evaluator "
    "without a GPU [1].",
)
@click.option(
    "--memory-from",
    type=click.Path(exists=True, path_type=Path),
    help="Start every method's memory from this export (`htam memory export`) instead of the seed bank; or, a "
    "folder (a bench's memory/), each method and seed from its own export there (htam-s0.json, ...).",
)
@click.option(
    "--train",
    "train_list",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='With --test, instead of SUITE: a train/test comparison of the memory (docs/method.md, "Comparing '
    'methods"). Every method runs the --test tasks from a fresh memory (OUT/fresh); each memory method runs '
    "these tasks (OUT/train), then the --test tasks again from the memory it learnt (OUT/trained, paired by "
    "seed); OUT/memory-value.md and .json compare them with CIs.",
)
@click.option(
    "--test",
    "test_list",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The held-out tasks of --train (a list file, as SUITE takes one); no task in both.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_OUT,
    show_default=True,
    help="The bench's folder; the same command with the same --out continues an interrupted bench.",
)
@llm_options("Responses for --llm script; every run replays it from the start.")
@click.option(
    "--evaluator",
    type=click.Choice(EVALUATORS),
    default="auto",
    show_default=True,
    help="gpu: judge on the GPUs; stand-in: no GPU, synthetic verdicts and times (the report says so); replay: "
    "the results of a table `htam catalog record` wrote (--replay FILE, with --llm catalog in its default "
    "catalog-space-v1), no GPU; auto: gpu.",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The table (table.parquet) or recording of --evaluator replay.",
)
@click.option(
    "--compile-reference/--no-compile-reference",
    default=True,
    show_default=True,
    help="Also time torch.compile of each reference (GPU evaluator).",
)
@sandbox_option
@click.option(
    "--rejudge",
    is_flag=True,
    help="Judge every candidate, also one whose identical code was judged for the same task earlier in this "
    "bench (by default that judgement is served again, marked `reused`).",
)
@click.option("--max-cost", type=click.FloatRange(min=0), metavar="USD", help="End a run after it spent this much.")
@click.option("--note", help="A line shown at the top of the report (what this bench is for).")
@click.option(
    "--report-only",
    is_flag=True,
    help="Only write the tables and the report of the bench in --out from its finished runs (no SUITE, no GPU, "
    "no LLM): a bench run elsewhere, or one still running.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary (progress goes to stderr).")
def bench(
    suite: tuple[str, ...],
    methods: str,
    steps: int,
    seeds: int,
    levels: str | None,
    pattern: str | None,
    gpus: str | None,
    workers: int | None,
    memory_from: Path | None,
    train_list: Path | None,
    test_list: Path | None,
    out: Path,
    backend: str | None,
    model: str | None,
    family: str | None,
    base_url: str | None,
    script_path: Path | None,
    evaluator: str,
    replay_path: Path | None,
    compile_reference: bool,
    sandbox: bool,
    rejudge: bool,
    max_cost: float | None,
    note: str | None,
    report_only: bool,
    as_json: bool,
) -> None:
    """Run every task of SUITE with every --method and seed, one worker per GPU, and write
    results/ (Parquet and CSV), plots/ and report.md under --out. SUITE is `builtin`, a
    KernelBench checkout (with --level, --filter), task files or ids, or a text file listing
    them. A killed bench continues where it stopped when run again with the same --out."""
    console = Console(stderr=as_json)
    if report_only:
        if suite:
            raise BadInput("--report-only reports the bench in --out: give no SUITE", option="--report-only")
        _summarize(console, _report(Layout(out)), as_json)
        return
    require_sandbox(sandbox)
    cfg = settings_with(settings(), None, backend, model, base_url, family)
    chosen = _methods(methods)
    kind = "gpu" if evaluator == "auto" else evaluator
    if (kind == "replay") != (replay_path is not None):
        raise BadInput(
            "--evaluator replay takes its results from --replay FILE, and --replay needs it", option="--replay"
        )
    if (train_list is None) != (test_list is None):
        raise BadInput(
            "--train and --test go together: give both lists (bench/tables/suite-train.txt, suite-test.txt)",
            option="--test" if train_list is not None else "--train",
        )
    slots = _slots(kind, gpus, workers)
    if kind in ("gpu", "stand-in"):
        find_nvcc(cfg)  # the workers build every candidate: no nvcc is said before --out is made
    with make_client(cfg.llm, script_path) as client:
        client.check()
        llm = f"{client.name}:{client.model}"

    def phase(out: Path, sources: list[str], phase_methods: list[Method], start: Path | None) -> Outcome:
        """One bench (tasks x methods x seeds) under `out`, continued where it stopped."""
        tasks = resolve_suite(sources, numbers("--level", levels), pattern)
        narrowing = [f"--level {levels}"] * bool(levels) + [f"--filter {pattern}"] * bool(pattern)
        config = BenchConfig(
            suite=" ".join([*sources, *narrowing]),
            tasks=[TaskEntry.of(t) for t in tasks],
            methods=phase_methods,
            seeds=list(range(seeds)),
            steps=steps,
            scoring=cfg.scoring,
            llm=llm,
            evaluator=kind,
            compile_reference=compile_reference,
            max_cost=max_cost,
            memory_from=None,
            sandbox=sandbox,
        )
        if start is not None:
            config = config.model_copy(update={"memory_from": _memory_source(start, config)})
        layout = Layout(out)
        fresh = not out.exists()
        with exclusive(layout.lock, f"--out {out}", wait=False):
            manifest = open_manifest(layout, config, note)
            job = BenchJob(
                out=out,
                manifest=manifest,
                tasks=tasks,
                llm=cfg.llm,
                script=script_path,
                evaluator=kind,
                replay=replay_path,
                reuse=not rejudge,
            )
            grid = [spec for stream in streams(config, manifest.tag) for spec in stream.runs]
            done = sum(layout.run_done(spec) for spec in grid)
            console.print(
                f"[bold]bench {manifest.tag}[/] in {escape(str(out))}: {len(tasks)} tasks x {len(phase_methods)} "
                f"methods x {seeds} seeds = {len(grid)} runs ({done} done); llm {escape(llm)}; reward from "
                f"{config.scoring.reward_from}; evaluator {kind}; sandbox {'on' if sandbox else 'off'}; "
                f"{len(slots)} worker{'s' * (len(slots) > 1)}",
                highlight=False,
            )
            with BenchProgress(console, len(grid), done) as progress:
                try:
                    run_bench(job, ProcessExecutor(slots), progress.emit)
                except BenchFailed as e:
                    again = "; the finished runs are kept: run the same command to continue"
                    if fresh and not any(layout.run_done(spec) for spec in grid):
                        shutil.rmtree(out, ignore_errors=True)  # nothing finished: leave nothing behind
                        again = ""
                    if e.user_error:
                        raise error_type(e.error)(f"{e}{again}") from e
                    raise click.ClickException(f"{e}{again}") from e
        return _report(layout)

    if train_list is not None and test_list is not None:
        _train_test(
            console, train_list, test_list, suite, memory_from, chosen, out, replay_path, steps, phase,
            cfg.scoring.reward_from,
        )  # fmt: skip
        return
    outcome = phase(out, list(suite), chosen, memory_from)
    _summarize(console, outcome, as_json)


def _train_test(
    console: Console,
    train_list: Path,
    test_list: Path,
    suite: tuple[str, ...],
    memory_from: Path | None,
    chosen: list[Method],
    out: Path,
    table: Path | None,
    steps: int,
    phase: Callable[[Path, list[str], list[Method], Path | None], Outcome],
    reward_from: str,
) -> None:
    """The three phases of a train/test comparison and its report (htam_graph/bench/memory_value.py)."""
    if suite:
        raise BadInput("--train/--test name the tasks: give no SUITE with them", option="--train")
    if memory_from is not None:
        raise BadInput(
            "--train/--test learn their memory on the --train tasks: give no --memory-from with them",
            option="--memory-from",
        )
    memory = [m for m in chosen if m in LEARNS]
    if not memory:
        names = ", ".join(sorted(m.value for m in LEARNS))
        raise BadInput(
            f"--train/--test compare memories: --method needs at least one memory method ({names})", option="--method"
        )
    train = resolve_suite([str(train_list)])
    test = resolve_suite([str(test_list)])
    both = sorted({t.id for t in train} & {t.id for t in test})
    if both:
        raise TaskError(
            f"--train and --test share {len(both)} task(s), e.g. {both[0]}; held-out tasks must be unseen", task=both[0]
        )
    from htam_graph.bench import memory_value as mv

    fresh = phase(out / "fresh", [str(test_list)], chosen, None)
    phase(out / "train", [str(train_list)], memory, None)
    trained = phase(out / "trained", [str(test_list)], memory, out / "train" / "memory")
    result = mv.compare(_runs(fresh), _runs(trained))
    header: dict[str, Any] = {"train": str(train_list), "test": str(test_list), "steps": steps,
                              "seeds": len(result["log_geomeans"][memory[0].value]), "llm": fresh.llm,
                              "reward_from": reward_from, "evaluator": fresh.evaluator,
                              "sandbox": "on" if fresh.sandbox else "off"}  # fmt: skip
    if table is not None:
        header["table"] = str(table)
        header["ceiling"] = mv.ceiling(table, [t.id for t in test], steps)
        header["share_of_ceiling"] = mv.shares(result, header["ceiling"])
    report = mv.write_report(out, result, header)
    rows = sorted(result["methods"], key=lambda r: -r["geomean"])
    print_table(
        f"memory value: {len(test)} test tasks, {header['seeds']} seeds (expert is an oracle)",
        ["method", "geomean", "95% CI"],
        [(r["method"], f"{r['geomean']:.3f}", f"{r['ci_lo']:.3f}-{r['ci_hi']:.3f}") for r in rows],
    )
    console.print(f"report: {escape(str(report))}", highlight=False)


def _runs(outcome: Outcome) -> pd.DataFrame:
    import pandas as pd

    return pd.read_parquet(next(t for t in outcome.tables if t.name == "runs.parquet"))


def _report(layout: Layout) -> Outcome:
    # pandas, pyarrow and matplotlib are imported for the report alone: a GPU machine
    # without them still runs the grid, and the report is written where they are.
    try:
        from htam_graph.bench.report import report_bench
    except ImportError as e:
        raise ConfigError(
            f"writing the report needs {e.name}, which is not installed here (the runs are kept); "
            f"write it where it is: htam bench --report-only --out {layout.out}"
        ) from None
    return report_bench(layout)


def _summarize(console: Console, outcome: Outcome, as_json: bool) -> None:
    """The per-method metrics as a table (or JSON) and where the report is."""
    if as_json:
        print_json(outcome.model_dump(mode="json"))
        return
    print_table(
        f"bench {outcome.bench}: {outcome.runs} runs ({outcome.evaluator}, {outcome.llm})",
        ["method", "correct", "fast_1", "geomean", "geomean, correct", "$ per task"],
        [
            (m["method"], m["correct"], m["fast_1"], m["geomean"], m["geomean_correct"], m["cost_usd"])
            for m in outcome.methods
        ],
    )
    console.print(f"report: {escape(str(outcome.report))}", highlight=False)


def _methods(text: str) -> list[Method]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = {m.value: m for m in Method}
    for name in names:
        if name not in known:
            raise BadInput(
                f"--method: unknown method {name!r}; choose from {', '.join(known)}", option="--method", value=name
            )
    if not names:
        raise BadInput(f"--method: name at least one method ({', '.join(known)})", option="--method", value=text)
    return list(dict.fromkeys(known[n] for n in names))


def _slots(kind: str, gpus: str | None, workers: int | None) -> list[Slot]:
    """--workers slots per GPU for the GPU evaluator; --workers slots without a GPU otherwise."""
    if kind != "gpu":
        if gpus is not None:
            raise BadInput(
                f"--gpus picks GPUs for the gpu evaluator; the {kind} evaluator uses none (use --workers)",
                option="--gpus",
            )
        return [Slot(name=f"worker{i}") for i in range(workers or 1)]
    from htam_graph.runner.pool import visible_gpu_count  # imports torch: only for the GPU evaluator

    try:
        visible = visible_gpu_count()
    except UserError:
        raise ConfigError(
            "the gpu evaluator needs a GPU and none is visible here (torch.cuda.device_count() is 0); "
            "without one, `--evaluator stand-in` runs a bench with synthetic times"
        ) from None
    chosen = numbers("--gpus", gpus) if gpus is not None else list(range(visible))
    missing = [g for g in chosen or [] if not 0 <= g < visible]
    if missing or not chosen:
        raise BadInput(
            f"--gpus {gpus}: this machine has {visible} GPU(s) (0..{visible - 1})", option="--gpus", value=gpus
        )
    per_gpu = workers or 1
    return [
        Slot(name=f"gpu{g}" + (f"-{k}" if per_gpu > 1 else ""), gpu=g)
        for g in dict.fromkeys(chosen)
        for k in range(per_gpu)
    ]


def _memory_source(path: Path, config: BenchConfig) -> MemorySource:
    """--memory-from, checked: exports that have directions when a method needs them, and
    no runs of this very bench (they would be taken for this bench's own). A folder holds
    one export per stream, named as a bench's memory/ names them (`htam-s0.json`): each
    method and seed starts from its own (the test phase of a train/test comparison)."""
    files = [path / f"{stream.name}.json" for stream in streams(config)] if path.is_dir() else [path]
    # a folder: every export there, read once; its digests are what each worker checks
    every = {f: read_snapshot(f) for f in sorted(path.glob("*.json"))} if path.is_dir() else {}
    snapshots = [every.get(file) or read_snapshot(file) for file in files]
    for file, (snapshot, _) in zip(files, snapshots, strict=True):
        if not snapshot.globals and any(m in MEMORY_METHODS for m in config.methods):
            raise BadInput(
                f"--memory-from {file} holds no directions (globals); export a seeded memory",
                option="--memory-from",
                path=file,
            )
    if every:
        sha256 = memory_digest([digest for _, digest in every.values()])
        content = memory_digest([content_digest(snapshot) for snapshot, _ in every.values()])
    else:
        sha256, content = snapshots[0][1], content_digest(snapshots[0][0])
    source = MemorySource(path=str(path.resolve()), sha256=sha256, content=content)
    with_source = config.model_copy(update={"memory_from": source})
    ours = {spec.run_id for stream in streams(with_source) for spec in stream.runs}
    for file, (snapshot, _) in zip(files, snapshots, strict=True):
        clash = sorted(ours & {run.id for run in snapshot.runs})
        if clash:
            raise BadInput(
                f"--memory-from {file} holds runs of this very bench ({clash[0]}); export another memory",
                option="--memory-from",
                path=file,
            )
    return source


class BenchProgress:
    """The whole suite at a glance: runs done of all, and each worker's run in progress
    with its best speedup so far. Without a terminal, one line per finished run."""

    def __init__(self, console: Console, total: int, done: int) -> None:
        self.console, self.total, self.done = console, total, done
        self.live = console.is_terminal
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self._overall = self._bar.add_task("runs", total=total, completed=done, status="")
        self._workers: dict[str, TaskID] = {}
        self._correct = 0
        self._finished = 0

    def __enter__(self) -> BenchProgress:
        if self.live:
            self._bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.live:
            self._bar.stop()

    def emit(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            label = escape(f"  {event.worker}: {event.task_id} {event.method.value} s{event.seed}")  # ids, not markup
            if event.worker not in self._workers:
                self._workers[event.worker] = self._bar.add_task(label, total=event.steps_planned, status="")
            self._bar.update(
                self._workers[event.worker],
                description=label,
                total=event.steps_planned,
                completed=event.steps_done,
                status="resumed" if event.steps_done else "",
            )
        elif isinstance(event, StepFinished) and event.worker in self._workers:
            status = f"{event.verdict.value}, best {best_text(event.best_speedup)}"
            self._bar.update(self._workers[event.worker], completed=event.index + 1, status=status)
        elif isinstance(event, RunFinished):
            self.done += 1
            self._finished += 1
            self._correct += event.correct
            status = f"{self._correct} of {self._finished} with a correct candidate"
            self._bar.update(self._overall, completed=self.done, status=status)
            if not self.live:
                cost = "" if event.cost_usd is None else f", ${event.cost_usd:.3f}"
                self.console.print(
                    f"[{self.done}/{self.total}] {event.task_id} {event.method.value} s{event.seed}: "
                    f"{'best ' + best_text(event.best_speedup) if event.correct else 'no correct candidate'}{cost}",
                    highlight=False,
                    markup=False,
                )
