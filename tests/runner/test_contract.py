"""The native contract's example (prompts/native_contract.j2, docs/native_format.md) is a
valid candidate: it renders, passes the static checks and builds."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest

from htam_graph.runner.formats import detect_format, static_cuda_sources
from htam_graph.runner.native import parse_kernels, parse_signature
from htam_graph.runner.static_checks import static_check

REPO = Path(__file__).resolve().parents[2]


def _example(text: str) -> str:
    return re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)


def _rendered_contract() -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(REPO / "prompts"), undefined=jinja2.StrictUndefined, autoescape=False
    )
    return env.get_template("native_contract.j2").render()


def test_the_prompt_and_the_doc_show_the_same_example():
    assert _example(_rendered_contract()) == _example((REPO / "docs" / "native_format.md").read_text())


def test_the_example_is_a_clean_native_candidate():
    source = _example(_rendered_contract())
    assert detect_format(source) == "native"
    assert static_check(source, "float32", "native") == []
    (cuda,) = static_cuda_sources(source)
    signature = parse_signature("relu_kernel", parse_kernels(cuda)["relu_kernel"])
    assert [p.name for p in signature.params] == ["x", "y", "n"]


@pytest.mark.nvcc
def test_the_example_builds(tmp_path):
    from htam_graph.runner.build import BuildSettings, build_cubin, find_nvcc

    (cuda,) = static_cuda_sources(_example(_rendered_contract()))
    assert build_cubin(cuda, BuildSettings(nvcc=find_nvcc(), cache_dir=tmp_path, arch="sm_90")).ok


def test_eval_without_a_gpu_is_a_one_line_error(tmp_path):
    """CI has no GPU: `htam eval` says so (exit 2) instead of a worker traceback."""
    import subprocess
    import sys

    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "htam_graph",
            "eval",
            "level1/19_ReLU",
            str(repo / "bench/candidates/level1/19_ReLU.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert r.returncode == 2
    assert r.stderr.strip() == r.stderr.strip().splitlines()[0] and "no CUDA GPU is visible" in r.stderr
