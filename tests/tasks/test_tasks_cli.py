"""`htam tasks list|show` as a user runs them: a real process, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from htam_graph.tasks import builtin_suite_dir, load_tasks


def htam(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "htam_graph", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_list_json_matches_the_suite(tmp_path):
    r = htam("tasks", "list", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    assert [t["id"] for t in listed] == [t.id for t in load_tasks(builtin_suite_dir())]
    relu = next(t for t in listed if t["id"] == "level1/19_ReLU")
    assert relu["level"] == 1 and relu["summary"].startswith("ReLU of a (16384, 8192)")
    assert "source" not in relu


def test_list_table_shows_docstrings_verbatim(tmp_path):
    r = htam("tasks", "list", "--filter", "Batched", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "1 tasks in the built-in suite" in r.stdout
    assert "C[b] = A[b] @ B[b]" in r.stdout  # not eaten as rich markup


def test_list_and_show_a_user_root(tmp_path):
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (level / "3_Copy.py").write_text(
        '"""Copies."""\nimport torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n'
        "    def forward(self, x):\n        return x.clone()\n\n\n"
        "def get_inputs():\n    return [torch.rand(2)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    listed = json.loads(htam("tasks", "list", "--root", str(tmp_path), "--json", cwd=tmp_path).stdout)
    assert [(t["id"], t["summary"]) for t in listed] == [("level1/3_Copy", "Copies.")]
    shown = json.loads(htam("tasks", "show", "Copy", "--root", str(tmp_path), "--json", cwd=tmp_path).stdout)
    assert shown["id"] == "level1/3_Copy" and "return x.clone()" in shown["source"]


def test_show_prints_the_source(tmp_path):
    r = htam("tasks", "show", "level2/3_Gemm_Bias_ReLU", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "level2/3_Gemm_Bias_ReLU" in r.stdout and "class Model(nn.Module)" in r.stdout


def test_show_ambiguous_or_unknown_exits_2(tmp_path):
    r = htam("tasks", "show", "matmul", cwd=tmp_path)
    assert r.returncode == 2 and "ambiguous" in r.stderr and "level1/1_Square_matmul" in r.stderr
    r = htam("tasks", "show", "Sofmax", cwd=tmp_path)
    assert r.returncode == 2 and "did you mean" in r.stderr


def test_listing_does_not_import_torch(tmp_path):
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "htam_graph", "tasks", "list", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if "|" in line}
    assert "torch" not in imported
