"""KernelBench-format tasks: find them, validate them, import them.

A task is one Python file defining `class Model(nn.Module)`, `get_inputs()` and
`get_init_inputs()` (KernelBench's format; docs/native_format.md). Files are checked with `ast`, so
listing a suite never imports torch; torch is imported only when a task module is loaded.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib.util
import linecache
import re
import sys
import uuid
from fnmatch import fnmatch
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from pydantic import BaseModel

from htam_graph.errors import TaskError

if TYPE_CHECKING:
    import torch

_LEVEL_DIR = re.compile(r"^level(\d+)$")
_NUMBERED_STEM = re.compile(r"^(\d+)_(.+)$")
# What a task file must define, and the kind of `ast` node that defines it.
_REQUIRED: tuple[tuple[str, type[ast.stmt], str], ...] = (
    ("Model", ast.ClassDef, "class Model(nn.Module) with a forward method"),
    ("get_inputs", ast.FunctionDef, "def get_inputs() returning the forward inputs"),
    ("get_init_inputs", ast.FunctionDef, "def get_init_inputs() returning the constructor arguments"),
)


class Task(BaseModel):
    """One task file. `id` is its path without `.py` from the parent of its level<N> folder
    ("level1/19_ReLU"), else from the folder it was listed in; a lone file's id is its stem."""

    id: str
    name: str
    level: int | None
    number: int | None
    path: Path
    source: str
    sha256: str

    @property
    def summary(self) -> str:
        """The first line of the module docstring ('' when there is none)."""
        doc = ast.get_docstring(ast.parse(self.source)) or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""

    def load_module(self) -> ModuleType:
        """Import the file as a fresh module (its own namespace on every call)."""
        module_name = f"htam_task_{uuid.uuid4().hex}"
        spec = importlib.util.spec_from_file_location(module_name, self.path)
        if spec is None or spec.loader is None:
            raise TaskError(f"{self.path}: cannot be imported as a Python module; check the file name", path=self.path)
        module = importlib.util.module_from_spec(spec)
        # Registered only while it executes: dataclasses and pickling look the module up by name.
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise TaskError(
                f"{self.path}: importing the task failed with {type(exc).__name__}: {exc}; fix the file",
                task=self.id,
                path=self.path,
            ) from exc
        finally:
            sys.modules.pop(module_name, None)
        return module


def exec_source(source: str, filename: str, name: str, keep: bool = False) -> ModuleType:
    """`source` run as a fresh module named `name`, as Python runs a file: compiled without
    the caller's `from __future__` flags (dont_inherit), so module-level annotations run as
    code, as they do for a user. Its lines are cached under `filename` for tracebacks. It
    is in sys.modules while it runs (dataclasses and pickling look modules up by name) and
    stays there only with `keep`. What the source raises propagates."""
    module = ModuleType(name)
    module.__file__ = filename
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    sys.modules[name] = module
    try:
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
    finally:
        if not keep:
            sys.modules.pop(name, None)
    return module


def _validate(path: Path, source: str) -> None:
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(
            f"{path}:{exc.lineno}: syntax error ({exc.msg}); fix the Python syntax of the task file",
            path=path,
            line=exc.lineno,
        ) from exc
    definitions = {node.name: node for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    for name, kind, what in _REQUIRED:
        node = definitions.get(name)
        if not isinstance(node, kind):
            where = f"line {node.lineno} defines {name!r} differently" if node else f"{name!r} is not defined"
            raise TaskError(
                f"{path}:{node.lineno if node else 1}: {where}; add {what} at module level",
                path=path,
                line=node.lineno if node else 1,
            )
    model = definitions["Model"]
    if not any(isinstance(item, ast.FunctionDef) and item.name == "forward" for item in model.body):
        raise TaskError(
            f"{path}:{model.lineno}: class Model has no forward method; define forward(self, ...)",
            path=path,
            line=model.lineno,
        )


def _level_dir(path: Path, root: Path | None) -> tuple[Path, int] | None:
    """The nearest enclosing folder named level<N> (KernelBench's layout) and its N, searched
    up to `root` itself; None when there is none (root None: any ancestor counts)."""
    for folder in path.parents:
        match = _LEVEL_DIR.match(folder.name)
        if match:
            return folder, int(match.group(1))
        if root is not None and folder == root:
            return None
    return None


def load_task(path: Path | str, root: Path | str | None = None) -> Task:
    """Read and validate one task file found under `root` (None for a lone file).

    The id is the path without `.py` relative to the parent of its level<N> folder
    ("level1/19_ReLU", whatever folder of a KernelBench checkout `root` is), else relative
    to `root`; a lone file's id is its stem.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise TaskError(f"{path}: no such task file; give the path of a KernelBench-format .py file", path=path)
    source = path.read_text(encoding="utf-8")
    _validate(path, source)
    root = Path(root).resolve() if root is not None else None
    level = _level_dir(path, root)
    if root is None:
        task_id = path.stem
    else:
        task_id = path.relative_to(level[0].parent if level else root).with_suffix("").as_posix()
    match = _NUMBERED_STEM.match(path.stem)
    return Task(
        id=task_id,
        name=match.group(2) if match else path.stem,
        level=level[1] if level else None,
        number=int(match.group(1)) if match else None,
        path=path,
        source=source,
        sha256=hashlib.sha256(source.encode("utf-8")).hexdigest(),
    )


def _task_files(root: Path) -> list[Path]:
    """Python files under `root`; when the tree has level<N> folders, only the files in them
    (so a KernelBench checkout's scripts are not mistaken for tasks)."""
    files = [
        p
        for p in root.rglob("*.py")
        if p.name != "__init__.py" and not any(part.startswith((".", "__")) for part in p.relative_to(root).parts)
    ]
    in_levels = [p for p in files if _level_dir(p, root) is not None]
    return in_levels or files


def matches(task: Task, pattern: str) -> bool:
    """Whether `pattern` keeps `task`: a glob over its id or name, else a substring of its id."""
    if any(ch in pattern for ch in "*?["):
        return fnmatch(task.id, pattern) or fnmatch(task.name, pattern)
    return pattern.lower() in task.id.lower()


def _sort_key(task: Task) -> tuple[int, int, str]:
    unknown = sys.maxsize
    return (
        task.level if task.level is not None else unknown,
        task.number if task.number is not None else unknown,
        task.id,
    )


def load_tasks(root: Path | str, pattern: str | None = None) -> list[Task]:
    """Every task under `root` (a file or a folder tree), sorted by level then number.

    `pattern` keeps the tasks whose id or name matches a glob (`level1/*_matmul`), or whose
    id contains it as a substring (case-insensitive).
    """
    root = Path(root)
    if root.is_file():
        tasks = [load_task(root)]
    elif root.is_dir():
        tasks = [load_task(p, root) for p in _task_files(root)]
    else:
        raise TaskError(f"{root}: no such file or folder; give a task file or a KernelBench folder", path=root)
    if pattern:
        tasks = [t for t in tasks if matches(t, pattern)]
    if not tasks:
        suffix = f" matching {pattern!r}" if pattern else ""
        raise TaskError(
            f"{root}: no task files{suffix}; expected <id>_<Name>.py files (e.g. level1/19_ReLU.py)",
            task=pattern,
            path=root,
        )
    return sorted(tasks, key=_sort_key)


def builtin_suite_dir() -> Path:
    """The folder of the suite shipped with the package (level1/, level2/)."""
    return Path(__file__).resolve().parent / "suite"


def resolve_task(spec: str | Path, root: Path | str | None = None) -> Task:
    """A task from a path, an id ('level1/19_ReLU'), or a unique part of one ('ReLU').

    Ids and names are looked up in `root` (a task folder), by default the built-in suite.
    """
    path = Path(spec)
    if path.suffix == ".py" or path.is_file():
        return load_task(path)
    suite = load_tasks(root if root is not None else builtin_suite_dir())
    text = str(spec)
    exact = [t for t in suite if text == t.id or text.lower() == t.name.lower()]
    found = exact or [t for t in suite if text.lower() in t.id.lower()]
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(t.id for t in found[:10])
        raise TaskError(f"task {text!r} is ambiguous: it matches {names}; give the full id", task=text)
    close = difflib.get_close_matches(text, [t.id for t in suite] + [t.name for t in suite], n=5, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else "; run `htam tasks list` to see the ids"
    where = "the built-in suite" if root is None else str(root)
    raise TaskError(f"no task {text!r} in {where} and no such file{hint}", task=text)


def task_dtype(module: ModuleType) -> torch.dtype:
    """The dtype of the first floating-point tensor among the task's inputs.

    get_inputs() runs on the meta device, so no input memory is allocated.
    """
    import torch

    with torch.device("meta"):
        inputs = module.get_inputs()
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.dtype
    raise TaskError(
        f"{module.__file__}: get_inputs() returns no floating-point tensor; the runner needs one to pick tolerances",
        path=module.__file__,
    )
