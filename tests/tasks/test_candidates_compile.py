"""Every native-format candidate in bench/candidates compiles with the real nvcc to an sm_90 cubin."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from htam_graph.tasks import builtin_suite_dir, load_tasks

CANDIDATES = Path(__file__).resolve().parents[2] / "bench" / "candidates"
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')


def _find_nvcc() -> str | None:
    """HTAM_NVCC, then PATH, then the nvcc of the pip packages (nvidia/cu13/bin, nvidia/cuda_nvcc/bin)."""
    explicit = os.environ.get("HTAM_NVCC")
    if explicit:
        return explicit
    on_path = shutil.which("nvcc")
    if on_path:
        return on_path
    try:
        import nvidia
    except ImportError:
        return None
    for root in nvidia.__path__:
        for found in sorted(Path(root).glob("*/bin/nvcc")):
            return str(found)
    return None


def _candidate_files() -> list[Path]:
    return sorted(CANDIDATES.rglob("*.py"))


def _cuda_source(path: Path) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CUDA_SRC" for t in node.targets):
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            return node.value.value
    raise AssertionError(f"{path}: no module-level CUDA_SRC string")


def _launched_kernels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "launch"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }


def _init_params(path: Path, class_name: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return [a.arg for a in init.args.args]


def _rel(path: Path) -> str:
    return path.relative_to(CANDIDATES).with_suffix("").as_posix()


def test_one_candidate_per_builtin_task():
    tasks = {task.id for task in load_tasks(builtin_suite_dir())}
    assert {_rel(p) for p in _candidate_files()} == tasks


@pytest.mark.parametrize("path", _candidate_files(), ids=_rel)
def test_constructor_matches_the_reference(path: Path):
    task = builtin_suite_dir() / path.relative_to(CANDIDATES)
    assert _init_params(path, "ModelNew") == _init_params(task, "Model")


@pytest.mark.parametrize("path", _candidate_files(), ids=_rel)
def test_launched_kernels_are_defined_extern_c(path: Path):
    defined = set(_KERNEL.findall(_cuda_source(path)))
    launched = _launched_kernels(path)
    assert launched, f"{path} launches no kernel"
    assert launched <= defined, f"{path} launches {launched - defined}, not extern \"C\" __global__ in CUDA_SRC"


@pytest.mark.nvcc
@pytest.mark.parametrize("path", _candidate_files(), ids=_rel)
def test_candidate_compiles_to_sm90_cubin(path: Path, tmp_path: Path):
    nvcc = _find_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc: set HTAM_NVCC, put nvcc on PATH, or install the `nvcc` extra")
    source = tmp_path / "candidate.cu"
    source.write_text(_cuda_source(path), encoding="utf-8")
    cubin = tmp_path / "candidate.cubin"
    result = subprocess.run(
        [nvcc, "-cubin", "-arch=sm_90", "-O3", "-o", str(cubin), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{path}:\n{result.stderr[-4000:]}"
    assert cubin.stat().st_size > 0
