"""`htam eval TASK CANDIDATE`: judge one candidate on this machine's GPU."""

from __future__ import annotations

import json
from pathlib import Path

import click

from htam_graph.runner.models import EvalResult, Verdict


@click.command("eval")
@click.argument("task")
@click.argument("candidate", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="print the full result record as JSON")
@click.option(
    "--trials", default=100, show_default=True, type=click.IntRange(min=1), help="timed runs (median reported)"
)
@click.option(
    "--timeout",
    "timeout_s",
    default=120.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="seconds per candidate (load_inline candidates get --kernelbench-timeout)",
)
@click.option(
    "--kernelbench-timeout",
    "kernelbench_timeout_s",
    default=900.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="seconds for a KernelBench-format (load_inline) candidate",
)
@click.option("--compile-reference", is_flag=True, help="also time torch.compile of the reference")
@click.option(
    "--no-run", is_flag=True, help="no GPU needed: only the static cheat checks and the nvcc build (verdict 'checked')"
)
def eval_cmd(
    task: str,
    candidate: Path,
    as_json: bool,
    trials: int,
    timeout_s: float,
    kernelbench_timeout_s: float,
    compile_reference: bool,
    no_run: bool,
) -> None:
    """Check, build, verify and time CANDIDATE (a file defining ModelNew) against TASK
    (a built-in task id such as level1/19_ReLU, or a KernelBench-format task file).
    Exits 0 when the verdict is ok (checked, with --no-run), 1 otherwise."""
    from htam_graph.runner.evaluate import Evaluator, precheck
    from htam_graph.tasks import resolve_task

    resolved = resolve_task(task)
    if no_run:
        result = precheck(resolved, candidate)
    else:
        with Evaluator(
            workers=1,
            timeout_s=timeout_s,
            compile_reference=compile_reference,
            spare=False,
            trials=trials,
            kernelbench_timeout_s=kernelbench_timeout_s,
        ) as ev:
            result = ev.evaluate(resolved, candidate)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        _print(result)
    if result.verdict not in (Verdict.OK, Verdict.CHECKED):
        raise SystemExit(1)


def _print(result: EvalResult) -> None:
    from rich.console import Console

    from htam_graph.runner.evaluate import results_table

    console = Console()
    colour = "green" if result.verdict in (Verdict.OK, Verdict.CHECKED) else "red"
    console.print(f"[bold {colour}]{result.verdict.value}[/] {result.task_id} ({result.candidate_format} format)")
    if result.errors and not result.cheats:  # a rejection's errors repeat its cheats
        console.print(result.errors, markup=False, highlight=False)
    if result.verdict == Verdict.CHECKED:
        built = f"CUDA compiled in {result.build_seconds:.2f} s" if result.compiled else "no CUDA built here"
        console.print(f"static checks passed; {built}; not run (--no-run)")
    for cheat in result.cheats:
        console.print(f"cheat {cheat.kind.value} ({cheat.stage}): {cheat.detail}", markup=False, highlight=False)
    if result.candidate is not None:
        console.print(results_table([result]))
    if result.suspicious:
        console.print("[yellow]speedup above 10x: suspicious, worth a human look[/]")
    if result.device:
        versions = ", ".join(f"{k} {v}" for k, v in result.versions.items())
        console.print(f"[dim]{result.device}; {versions}[/]")
