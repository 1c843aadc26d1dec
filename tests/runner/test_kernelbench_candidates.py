"""The honest candidates for real KernelBench tasks (tests/runner/kernelbench, judged on the
H200 by bench/bench_runner.py --kernelbench): clean for the static checks, and they build."""

from __future__ import annotations

from pathlib import Path

import pytest

from htam_graph.runner.build import BuildSettings, build_cubin, find_nvcc
from htam_graph.runner.formats import static_cuda_sources
from htam_graph.runner.static_checks import static_check

CANDIDATES = sorted((Path(__file__).parent / "kernelbench").rglob("*.py"))


@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: p.stem)
def test_clean_for_the_static_checks(path: Path):
    assert static_check(path.read_text(), "float32", "native") == []


@pytest.mark.nvcc
@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: p.stem)
def test_builds(path: Path, tmp_path: Path):
    settings = BuildSettings(nvcc=find_nvcc(), cache_dir=tmp_path, arch="sm_90")
    (source,) = static_cuda_sources(path.read_text())
    assert build_cubin(source, settings).ok
