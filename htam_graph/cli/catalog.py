"""`htam catalog`: the strategy catalog's kernel space, and its table recorded on a GPU."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from htam_graph.bench.suite import resolve_suite
from htam_graph.catalog.space import MAX_STATES
from htam_graph.cli.common import numbers, print_json, print_table, require_sandbox, sandbox_option
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.sandbox import NO_SANDBOX_FLAG


@click.group()
def catalog() -> None:
    """The strategy catalog's kernel space: every kernel a run can reach from a task's base
    kernel by its family's strategies (docs/method.md, "Comparing methods")."""


@catalog.command("space")
@click.argument("suite", nargs=-1, required=True)
@click.option("--level", "levels", metavar="1,2", help="Keep the tasks of these levels.")
@click.option("--filter", "pattern", metavar="GLOB", help="Keep tasks whose id or name matches.")
@click.option("--max-states", type=click.IntRange(min=1), default=MAX_STATES, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def space_cmd(suite: tuple[str, ...], levels: str | None, pattern: str | None, max_states: int, as_json: bool) -> None:
    """Each task's space: its strategies and how many kernels it holds (no GPU needed)."""
    from htam_graph.catalog.families import recognize
    from htam_graph.catalog.ir import Unsupported
    from htam_graph.catalog.space import build_space

    rows: list[dict[str, Any]] = []
    for task in resolve_suite(list(suite), numbers("--level", levels), pattern):
        try:
            space = build_space(recognize(task.source), task.id, max_states)
        except Unsupported as e:
            rows.append({"task": task.id, "family": None, "states": 0, "depth": 0, "strategies": f"unsupported: {e}"})
            continue
        rows.append(
            {
                "task": task.id,
                "family": space.family,
                "states": len(space.states),
                "depth": max(s.depth for s in space.states.values()),
                "strategies": ", ".join(space.strategies),
            }
        )
    if as_json:
        print_json(rows)
        return
    print_table("catalog space", list(rows[0]), [list(r.values()) for r in rows])
    click.echo(f"{sum(r['states'] for r in rows)} kernels in {len(rows)} tasks")


@catalog.command("record")
@click.argument("suite", nargs=-1, required=True)
@click.option("--level", "levels", metavar="1,2", help="Keep the tasks of these levels.")
@click.option("--filter", "pattern", metavar="GLOB", help="Keep tasks whose id or name matches.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The table's folder (table.parquet, rows.jsonl, meta.json); the same --out continues a recording.",
)
@click.option("--max-states", type=click.IntRange(min=1), default=MAX_STATES, show_default=True)
@click.option("--trials", type=click.IntRange(min=10), default=EvalConfig().trials, show_default=True)
@click.option(
    "--evaluator",
    type=click.Choice(["gpu", "stand-in"]),
    default="gpu",
    show_default=True,
    help="stand-in: no GPU, synthetic times (to try the recorder; such a table says so in every row).",
)
@click.option("--compile-reference/--no-compile-reference", default=True, show_default=True)
@sandbox_option
@click.option("--json", "as_json", is_flag=True, help="Print the table's meta as JSON.")
def record_cmd(
    suite: tuple[str, ...],
    levels: str | None,
    pattern: str | None,
    out: Path,
    max_states: int,
    trials: int,
    evaluator: str,
    compile_reference: bool,
    sandbox: bool,
    as_json: bool,
) -> None:
    """Judge every kernel of each task's space once and write the table under --out. A killed
    recording continues where it stopped when run again with the same --out."""
    from htam_graph.bench.record import check_continues, record
    from htam_graph.loop.evaluators import make_evaluator

    require_sandbox(sandbox)
    check_continues(out, sandbox)
    tasks = resolve_suite(list(suite), numbers("--level", levels), pattern)
    console = Console(stderr=True)
    command = "htam catalog record " + " ".join(shlex.quote(a) for a in sys.argv[3:])
    config = EvalConfig(trials=trials, compile_reference=compile_reference, sandbox=sandbox)
    with make_evaluator(evaluator, config) as judge:

        def progress(task_id: str, done: int, total: int) -> None:
            if done == total or done % 10 == 0:
                console.print(f"{task_id}: {done}/{total} kernels recorded")

        meta = record(tasks, out, judge, command, _commit(), max_states, progress, sandbox=sandbox)
    if as_json:
        print_json(meta.model_dump(mode="json"))
        return
    rows = [
        {"task": t.task_id, "family": t.family, "kernels": t.states, "recorded": t.recorded,
         "judge s": round(t.judge_seconds, 1), "note": t.unsupported or ""}
        for t in meta.tasks
    ]  # fmt: skip
    print_table(f"table {out}", list(rows[0]), [list(r.values()) for r in rows])
    confined = "on" if meta.sandbox else f"off ({NO_SANDBOX_FLAG}: generated code ran unconfined)"
    click.echo(
        f"{sum(t.recorded for t in meta.tasks)} kernels recorded in {meta.judge_seconds / 60:.1f} judge-minutes "
        f"on {meta.device}, sandbox {confined}: {out / 'table.parquet'}"
    )


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
            cwd=Path(__file__).parent,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
