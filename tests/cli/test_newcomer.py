"""Issue 35, a newcomer's first hour: the README's no-key, no-GPU paths work as typed, and a
command that fails leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NVCC_PACKAGES = ["nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime", "nvidia-cuda-cccl"]


def htam(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "HTAM_LOCAL_PATH": str(cwd / "memory.sqlite"), "HTAM_CACHE_DIR": str(cwd / "cache"), **env}
    return subprocess.run(
        [sys.executable, "-m", "htam_graph", *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=full
    )


def test_nvcc_is_installed_by_default():
    """`uv run htam optimize ... --evaluator stand-in` builds with nvcc: the PyPI nvcc is a
    default dependency (on Linux), in pyproject.toml and in uv.lock alike."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {d.split(";")[0].split("=")[0].strip() for d in project["dependencies"]}
    assert set(NVCC_PACKAGES) <= names
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    ours = next(p for p in lock["package"] if p["name"] == "htam-graph")
    assert set(NVCC_PACKAGES) <= {d["name"] for d in ours["dependencies"]}  # not only under the extra
    assert set(NVCC_PACKAGES) <= {d["name"] for d in lock["package"]}


def test_failing_commands_leave_nothing_behind(tmp_path):
    """No nvcc (or an empty memory): one line, exit 2, and no run folder, bench folder or
    empty SQLite file left behind."""
    no_nvcc = {"HTAM_NVCC": str(tmp_path / "no-nvcc")}
    try_loop = ["optimize", "level1/10_RMSNorm", "--llm", "catalog", "--evaluator", "stand-in", "--steps", "1"]
    r = htam(*try_loop, cwd=tmp_path)
    assert r.returncode == 2 and "htam memory seed" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no empty memory.sqlite

    assert htam("memory", "seed", cwd=tmp_path).returncode == 0
    r = htam(*try_loop, cwd=tmp_path, **no_nvcc)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no-nvcc" in r.stderr, r.stderr
    assert not (tmp_path / "htam-runs").exists()

    bench = ["bench", "level1/10_RMSNorm", "--llm", "catalog", "--evaluator", "stand-in", "--steps", "1"]
    r = htam(*bench, "--out", "bench-try", cwd=tmp_path, **no_nvcc)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no-nvcc" in r.stderr, r.stderr
    assert not (tmp_path / "bench-try").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("memory.sqlite")) == []
