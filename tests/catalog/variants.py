"""Tasks the catalog's tests exercise; the kernel variants they render come from
htam_graph/catalog/variants.py (shared with bench/bench_catalog_*.py)."""

from __future__ import annotations

from pathlib import Path

from htam_graph.tasks import builtin_suite_dir, load_tasks

OWN_TASKS = Path(__file__).with_name("tasks")


def suite() -> dict[str, str]:
    """Built-in task id -> source."""
    return {t.id: t.source for t in load_tasks(builtin_suite_dir())}


def own() -> dict[str, str]:
    """This folder's KernelBench-format tasks (written for these tests), by file stem."""
    return {p.stem: p.read_text() for p in sorted(OWN_TASKS.glob("*.py"))}
