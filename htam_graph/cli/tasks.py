"""`htam tasks list|show`: KernelBench-format tasks, over htam_graph.tasks (no torch import)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.syntax import Syntax

from htam_graph.cli.common import console, print_json, print_table
from htam_graph.tasks import Task, builtin_suite_dir, load_tasks, resolve_task

_ROOT = click.option(
    "--root",
    type=click.Path(exists=True, path_type=Path),
    help="A KernelBench checkout, one of its level folders, or a task file (default: the built-in suite).",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def _record(task: Task, with_source: bool) -> dict[str, object]:
    exclude = None if with_source else {"source"}
    return {**task.model_dump(mode="json", exclude=exclude), "summary": task.summary}


@click.group()
def tasks() -> None:
    """List and show KernelBench-format tasks: the built-in suite or your own checkout."""


@tasks.command("list")
@_ROOT
@click.option("--filter", "pattern", help="Keep ids matching a glob ('level2/*Gemm*') or containing a substring.")
@_JSON
def list_tasks(root: Path | None, pattern: str | None, as_json: bool) -> None:
    """Every task, sorted by level then number: id, name, level, and its docstring's first line."""
    found = load_tasks(root or builtin_suite_dir(), pattern)
    if as_json:
        print_json([_record(task, with_source=False) for task in found])
        return
    title = f"{len(found)} tasks in {root or 'the built-in suite'}"
    rows = [(t.id, t.name, t.level, t.summary) for t in found]  # plain text: docstrings hold [b]
    print_table(title, ["id", "name", "level", "summary"], rows)


@tasks.command("show")
@click.argument("task")
@_ROOT
@_JSON
def show_task(task: str, root: Path | None, as_json: bool) -> None:
    """Print one task's source. TASK is a path, an id (level1/19_ReLU) or a unique part of one (ReLU)."""
    found = resolve_task(task, root)
    if as_json:
        print_json(_record(found, with_source=True))
        return
    # the path on one line whatever the width; a source line longer than the width wraps
    # under its number (never cut)
    console.print(
        f"[bold]{escape(found.id)}[/bold]  {escape(str(found.path))}  sha256 {found.sha256[:12]}", soft_wrap=True
    )
    console.print(Syntax(found.source, "python", line_numbers=True, word_wrap=True))
