"""`htam eval --no-run`: what a machine without a GPU can judge (static checks, real nvcc)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HONEST = REPO / "bench" / "candidates" / "level1" / "19_ReLU.py"


def eval_no_run(candidate: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HTAM_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "htam_graph", "eval", "level1/19_ReLU", str(candidate), "--no-run", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )


@pytest.mark.nvcc
def test_honest_candidate_is_checked_and_compiled(tmp_path):
    r = eval_no_run(HONEST, tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert (result["verdict"], result["compiled"], result["cheats"]) == ("checked", True, [])
    assert any((tmp_path / "cache" / "cubin").iterdir())


@pytest.mark.nvcc
def test_compile_error_is_condensed_to_the_offending_line(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(HONEST.read_text().replace("fmaxf(", "fmaxf(undefined_thing + ", 1))
    r = eval_no_run(broken, tmp_path)
    assert r.returncode == 1
    result = json.loads(r.stdout)
    assert result["verdict"] == "compile_error"
    assert 'identifier "undefined_thing" is undefined' in result["errors"]
    assert result["errors"].startswith("CUDA_SRC line ")


def test_static_cheat_is_rejected_without_building(tmp_path):
    r = eval_no_run(REPO / "tests" / "redteam" / "candidates" / "functional_relu.py", tmp_path)
    assert r.returncode == 1
    result = json.loads(r.stdout)
    assert result["verdict"] == "rejected" and result["cheats"][0]["kind"] == "torch_compute_op"
    assert not (tmp_path / "cache").exists()
