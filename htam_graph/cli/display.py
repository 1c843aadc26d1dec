"""How the runner's results look in a terminal: a table of verdicts and timings, one
result in full, and a progress bar that counts verdicts as they arrive."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress

from htam_graph.cli.common import print_table
from htam_graph.runner.models import EvalResult, Verdict


def print_results_table(results: Sequence[EvalResult], console: Console) -> None:
    """Verdicts, errors and speedups, one row per result (cli.common.print_table: readable at any width)."""
    fmt = lambda v, spec: "" if v is None else format(v, spec)
    rows = [
        (
            r.task_id,  # a name, never markup
            r.verdict.value,
            fmt(r.max_abs_error, ".2e"),
            fmt(r.candidate and r.candidate.median_ms, ".4f"),
            fmt(r.reference_eager and r.reference_eager.median_ms, ".4f"),
            fmt(r.reference_compile and r.reference_compile.median_ms, ".4f"),
            fmt(r.speedup_eager, ".2f"),
            fmt(r.speedup_compile, ".2f"),
        )
        for r in results
    ]
    columns = ["task", "verdict", "max abs err", "cand ms", "eager ms", "compile ms", "x eager", "x compile"]
    print_table("timings", columns, rows, console)


def print_result(result: EvalResult, console: Console | None = None) -> None:
    """One evaluation in full: verdict, errors, cheats, timings, roofline, versions."""
    console = console or Console()
    good = result.verdict in (Verdict.OK, Verdict.CHECKED)
    colour = "green" if good else "red"
    console.print(
        f"[bold {colour}]{result.verdict.value}[/] {escape(result.task_id)} ({result.candidate_format} format)",
        highlight=False,
    )
    if not result.sandboxed:
        console.print("[bold yellow]unconfined (no --sandbox): the candidate ran with your privileges[/]")
    if result.errors and not result.cheats:  # a rejection's errors repeat its cheats
        console.print(result.errors, markup=False, highlight=False)
    if result.verdict == Verdict.CHECKED:
        built = f"CUDA compiled in {result.build_seconds:.2f} s" if result.compiled else "no CUDA built here"
        console.print(f"static checks passed; {built}; not run (--no-run)")
    for cheat in result.cheats:
        console.print(f"cheat {cheat.kind.value} ({cheat.stage}): {cheat.detail}", markup=False, highlight=False)
    skipped = [p.name for p in result.probes if p.outcome == "skipped"]
    if skipped:
        console.print(f"[dim]input probes skipped (the reference is not finite there): {escape(', '.join(skipped))}[/]")
    if result.candidate is not None:
        print_results_table([result], console)
    if line := result.roofline:
        parts = [f"floor {line.floor_ms:.4f} ms", f"{line.bytes_moved / 1e9:.3f} GB", f"{line.flops / 1e9:.2f} GFLOP"]
        if line.bandwidth_fraction is not None:
            parts.append(f"{line.bandwidth_fraction:.0%} of {line.peak_bandwidth_gbs:.0f} GB/s")
        if line.compute_fraction is not None and line.peak_tflops:
            parts.append(f"{line.compute_fraction:.0%} of {line.peak_tflops:.0f} TFLOP/s")
        console.print("roofline: " + ", ".join(parts))
    if result.suspicious:
        console.print(f"[yellow]suspicious: {escape(str(result.suspicious_reason))}; worth a human look[/]")
    if result.device:
        versions = ", ".join(f"{k} {v}" for k, v in result.versions.items())
        console.print(f"[dim]{escape(result.device)}; {escape(versions)}[/]", highlight=False)


class VerdictProgress:
    """A progress bar counting verdicts; pass `advance` as Evaluator.evaluate_many's progress."""

    def __init__(self, total: int, console: Console | None = None) -> None:
        self._bar = Progress(*Progress.get_default_columns(), "{task.fields[verdicts]}", console=console)
        self._task = self._bar.add_task("evaluating", total=total, verdicts="")
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()  # results arrive from one thread per GPU

    def __enter__(self) -> VerdictProgress:
        self._bar.start()
        return self

    def advance(self, result: EvalResult) -> None:
        with self._lock:
            self._counts[result.verdict.value] = self._counts.get(result.verdict.value, 0) + 1
            text = " ".join(f"{k}={v}" for k, v in sorted(self._counts.items()))
            self._bar.update(self._task, advance=1, verdicts=text)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._bar.stop()
