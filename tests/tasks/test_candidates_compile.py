"""The honest native-format candidates in bench/candidates: one per built-in task, the reference's
constructor, kernels that exist, and a real nvcc build of each to an sm_90 cubin (runner.build)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from htam_graph.runner.build import BuildSettings, build_cubin, find_nvcc
from htam_graph.runner.formats import static_cuda_sources
from htam_graph.runner.native import parse_kernels, parse_signature
from htam_graph.tasks import builtin_suite_dir, load_tasks

CANDIDATES = Path(__file__).resolve().parents[2] / "bench" / "candidates"


def _candidate_files() -> list[Path]:
    return sorted(CANDIDATES.rglob("*.py"))


def _cuda_source(path: Path) -> str:
    """The candidate's one CUDA_SRC string, found as the runner finds it."""
    sources = static_cuda_sources(path.read_text(encoding="utf-8"))
    assert len(sources) == 1, f"{path}: expected one module-level CUDA_SRC string, found {len(sources)}"
    return sources[0]


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
    kernels = parse_kernels(_cuda_source(path))
    for name, params in kernels.items():
        parse_signature(name, params)  # every parameter type is one launch() can pass
    defined = set(kernels)
    launched = _launched_kernels(path)
    assert launched, f"{path} launches no kernel"
    assert launched <= defined, f'{path} launches {launched - defined}, not extern "C" __global__ in CUDA_SRC'


@pytest.mark.nvcc
@pytest.mark.parametrize("path", _candidate_files(), ids=_rel)
def test_candidate_compiles_to_sm90_cubin(path: Path, tmp_path: Path):
    settings = BuildSettings(nvcc=find_nvcc(), cache_dir=tmp_path, arch="sm_90")  # a fresh cache: really compile
    result = build_cubin(_cuda_source(path), settings)
    assert result.ok, f"{path}:\n{result.errors}\n{result.log[-3000:]}"
    assert not result.cached and result.cubin_path is not None
    assert Path(result.cubin_path).stat().st_size > 0
