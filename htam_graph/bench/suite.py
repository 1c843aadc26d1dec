"""Which tasks a bench runs: the built-in suite, a KernelBench checkout, task files, or a
text file listing tasks; narrowed by level and by a glob."""

from __future__ import annotations

from pathlib import Path

from htam_graph.errors import BadInput, TaskError
from htam_graph.tasks import Task, builtin_suite_dir, load_task, load_tasks, matches, resolve_task

BUILTIN = "builtin"
LIST_SUFFIXES = {".txt", ".list"}


def resolve_suite(sources: list[str], levels: list[int] | None = None, pattern: str | None = None) -> list[Task]:
    """The tasks of `sources`, in order, each source one of: `builtin`; a folder (a
    KernelBench checkout or one of its level folders); a task file; a text file naming one
    task per line (a path relative to the list, or a built-in id; `#` starts a comment); a
    built-in id. `levels` keeps the tasks of those levels, `pattern` those it matches (as
    `htam tasks list --filter`). A listed file's id is its path from the list's folder, as
    in a checkout ("level1/19_ReLU"). Two tasks with one id, or no task at all, is an error."""
    if not sources:
        raise BadInput(
            "give a SUITE: builtin, a KernelBench folder, task files, or a list of task files", option="SUITE"
        )
    tasks = [task for source in sources for task in _tasks_of(source)]
    if levels:
        tasks = [t for t in tasks if t.level in levels]
    if pattern:
        tasks = [t for t in tasks if matches(t, pattern)]
    if not tasks:
        narrowed = " left after --level/--filter" if levels or pattern else ""
        raise TaskError(
            f"the suite {' '.join(sources)} has no tasks{narrowed}; check the levels and the filter", task=pattern
        )
    unique: dict[str, Task] = {}
    for task in tasks:
        if task.id in unique and unique[task.id].path != task.path:
            raise TaskError(
                f"two tasks have the id {task.id}: {unique[task.id].path} and {task.path}; rename one",
                task=task.id,
                path=task.path,
            )
        unique[task.id] = task
    return list(unique.values())


def _tasks_of(source: str) -> list[Task]:
    if source == BUILTIN:
        return load_tasks(builtin_suite_dir())
    path = Path(source)
    if path.is_dir():
        return load_tasks(path)
    if path.is_file() and path.suffix in LIST_SUFFIXES:
        return [_listed(path, line) for line in _entries(path)]
    return [resolve_task(source)]


def _entries(listing: Path) -> list[str]:
    lines = [line.split("#", 1)[0].strip() for line in listing.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def _listed(listing: Path, entry: str) -> Task:
    beside = listing.parent / entry
    return load_task(beside, listing.parent) if beside.is_file() else resolve_task(entry)
