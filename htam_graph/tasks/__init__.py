"""KernelBench-format tasks: loading, validation, and the built-in suite."""

from htam_graph.tasks.loader import (
    Task,
    builtin_suite_dir,
    exec_source,
    load_task,
    load_tasks,
    matches,
    resolve_task,
    task_dtype,
)

__all__ = [
    "Task",
    "builtin_suite_dir",
    "exec_source",
    "load_task",
    "load_tasks",
    "matches",
    "resolve_task",
    "task_dtype",
]
