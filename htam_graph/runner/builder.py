"""load_inline candidates, built in a confined builder before their process loads them.

torch's `load_inline` compiles when the candidate's module runs (ninja, nvcc, the host
compiler: programs a candidate's process may not start). So with the sandbox, the referee
first runs the candidate's module in a builder process (`python -m
htam_graph.runner.builder`, under runner/confined.py): it may start compilers, writes only
its own build folder, sees no GPU (CUDA_VISIBLE_DEVICES is empty) and nothing of the
user's files. What the module does besides building (its static initialisers run when the
library loads) happens there, inside the same walls. The candidate's process then loads
the built libraries with torch's own loader (`use_prebuilt`), reading the folder it cannot
write. A folder is reused for the same source only while the hashes of its files are those
the referee recorded after the build (kept in the referee's memory).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import logging
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from htam_graph.runner import sandbox
from htam_graph.runner.build import confined_command

logger = logging.getLogger(__name__)

SOURCE_FILE = "candidate.py"
REPORT_FILE = "report.json"
EXTENSIONS = "ext"


def inline_root(cache_dir: Path) -> Path:
    """Where the sandbox's builder builds load_inline candidates (candidates read it)."""
    return cache_dir / "torch_ext_sandboxed"


def candidate_readable(cache_dir: Path) -> tuple[Path, ...]:
    """The judge's folders a sandboxed candidate reads: built cubins and extensions only."""
    return (cache_dir / "cubin", inline_root(cache_dir))


@dataclass(frozen=True)
class InlineBuild:
    extensions_dir: Path  # TORCH_EXTENSIONS_DIR for the candidate's process
    errors: str  # the build's failure (empty when the module ran to the end)


def _digest(folder: Path) -> str:
    """One hash over every file under `folder` (names and bytes)."""
    total = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        total.update(str(path.relative_to(folder)).encode() + b"\0")
        total.update(hashlib.sha256(path.read_bytes()).digest())
    return total.hexdigest()


class InlineBuilder:
    """The referee's builds of load_inline candidates, by source hash."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[str, tuple[Path, str]] = {}  # source hash -> folder, digest of its files

    def build(self, source: str, arch: str, timeout_s: float) -> InlineBuild:
        key = hashlib.sha256(source.encode()).hexdigest()
        if key in self.done:
            folder, digest = self.done[key]
            if folder.is_dir() and _digest(folder / EXTENSIONS) == digest:
                return InlineBuild(folder / EXTENSIONS, "")
            logger.warning("the build folder %s changed since it was built; building again", folder)
            del self.done[key]
        self.root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{key[:16]}-", dir=self.root))  # the builder owns it
        (folder / SOURCE_FILE).write_text(source, encoding="utf-8")
        errors = run_builder(folder, arch, timeout_s)
        if not errors:
            self.done[key] = (folder, _digest(folder / EXTENSIONS))
        return InlineBuild(folder / EXTENSIONS, errors)


def run_builder(folder: Path, arch: str, timeout_s: float) -> str:
    """Run the candidate's module in a confined builder writing only `folder`; its errors."""
    env = {
        **os.environ,
        **sandbox.python_env(),
        "CUDA_VISIBLE_DEVICES": "",
        "TORCH_EXTENSIONS_DIR": str(folder / EXTENSIONS),
        "TORCH_CUDA_ARCH_LIST": _torch_arch(arch),
        "MAX_JOBS": str(min(os.cpu_count() or 1, 8)),
    }
    cmd = confined_command([sys.executable, "-m", "htam_graph.runner.builder", str(folder)], folder)
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return f"the build took longer than {timeout_s:.0f} s"
    try:  # never through a link the builder planted: this process may read what it may not
        fd = os.open(folder / REPORT_FILE, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as handle:
            report = json.loads(handle.read(1 << 20))
        return str(report.get("errors", "") if isinstance(report, dict) else "")[:20000]
    except (OSError, ValueError):
        tail = (done.stdout + done.stderr).strip()[-2000:]
        return f"the builder exited with code {done.returncode} without a report: {tail}"


def _torch_arch(arch: str) -> str:
    """sm_90 -> 9.0 (TORCH_CUDA_ARCH_LIST's form)."""
    digits = arch.removeprefix("sm_").rstrip("a")
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else digits


# --- the candidate's process -----------------------------------------------------------------


_EXTENSIONS = "torch.utils.cpp_extension"


def use_prebuilt() -> None:
    """Make torch's load_inline/load in this process load what the builder built, never
    compile (a confined candidate's process may not start a compiler). The library's name
    follows torch's own versioning, which is deterministic for the same sequence of calls.

    Done when torch.utils.cpp_extension is first imported, not now: importing it takes a
    fresh process about 0.25 s (it was a sandboxed job's largest extra cost, H100,
    bench/results/sandbox-2026-12-06-h100-start), which a native-format candidate, the
    common case, never needs; and the fork server cannot import it once for all (its import
    asks CUDA whether it is available, which no process may do before it forks)."""
    module = sys.modules.get(_EXTENSIONS)
    if module is not None:
        _patch(module)
    elif not any(isinstance(finder, _PatchOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches torch.utils.cpp_extension right after it is first executed."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _EXTENSIONS:
            return None
        sys.meta_path.remove(self)  # once; and the search below must not find this finder
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            _patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _patch(ext: Any) -> None:
    original = ext._jit_compile
    if getattr(original, "htam_prebuilt", False):
        return
    signature = inspect.signature(original)

    def load_prebuilt(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        name, sources, directory = a["name"], a["sources"], a["build_directory"]
        with_cuda = a["with_cuda"] if a["with_cuda"] is not None else any(map(ext._is_cuda_file, sources))
        with_sycl = a.get("with_sycl")
        if with_sycl is None:
            with_sycl = any(map(getattr(ext, "_is_sycl_file", lambda _: False), sources))
        version = ext.JIT_EXTENSION_VERSIONER.bump_version_if_changed(
            name,
            sources,
            build_arguments=[a["extra_cflags"], a["extra_cuda_cflags"], a["extra_ldflags"], a["extra_include_paths"]],
            build_directory=directory,
            with_cuda=with_cuda,
            with_sycl=with_sycl,
            is_python_module=a["is_python_module"],
            is_standalone=a["is_standalone"],
        )
        if version > 0:
            name = f"{name}_v{version}"
        library = Path(directory) / f"{name}{ext.LIB_EXT}"
        if not library.is_file():
            raise RuntimeError(
                f"Error building extension '{name}': the sandbox's builder did not build it "
                "(load_inline must run when the module is executed, with the same arguments every time)"
            )
        if a["is_standalone"]:
            return str(library)
        return ext._import_module_from_library(name, directory, a["is_python_module"])

    load_prebuilt.htam_prebuilt = True  # type: ignore[attr-defined]
    ext._jit_compile = load_prebuilt


# --- the builder process ------------------------------------------------------------------


def main(folder: Path) -> int:
    """Run the candidate's module once, so that its load_inline calls build; report."""
    from htam_graph.tasks import exec_source

    source = (folder / SOURCE_FILE).read_text(encoding="utf-8")
    errors = ""
    try:
        exec_source(source, str(folder / SOURCE_FILE), "htam_candidate_build")
    except BaseException as exc:  # the module may fail for want of a GPU after its builds
        text = f"{type(exc).__name__}: {exc}"
        errors = text if "Error building extension" in text else ""
    (folder / REPORT_FILE).write_text(json.dumps({"errors": errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
