"""bench/bench_catalog.py is `htam bench` with the catalog's defaults (a stand-in run here)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.nvcc  # the stand-in builds every candidate with nvcc


def test_the_catalog_benchmark_is_htam_bench_with_the_catalogs_defaults(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench_catalog.py"), "level1/10_RMSNorm",
         "--evaluator", "stand-in", "--steps", "2", "--out", str(out)],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO), "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = pd.read_csv(out / "results" / "runs.csv")
    assert runs["method"].tolist() == ["htam", "feedback", "htam-no-prefix"]
    assert set(runs["llm"]) == {"catalog:catalog-space-v1"} and set(runs["family"]) == {"norm"}  # the base start
    assert (runs["steps_planned"] == 2).all()  # the command's --steps overrides the default 6
    report = (out / "report.md").read_text()
    assert "bench/bench_catalog.py" in report and "## Per operator family" in report


def test_bench_compare_agrees_with_the_benchs_own_metrics(tmp_path: Path) -> None:
    """bench/bench_compare.py on a finished (stand-in) bench gives the report's geomean
    and fast_1 per method."""
    out = tmp_path / "bench"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    env.update(PYTHONPATH=str(REPO), HOME=str(tmp_path))
    bench = [sys.executable, str(REPO / "bench" / "bench_catalog.py"), "level1/19_ReLU", "level1/10_RMSNorm"]
    done = subprocess.run(
        [*bench, "--evaluator", "stand-in", "--steps", "2", "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = tmp_path / "compare.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench_compare.py"), f"a={out}", "--json", str(table)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {r["group"]: r for r in json.loads(table.read_text())["rows"]}
    metrics = pd.read_csv(out / "results" / "metrics.csv").set_index("method")
    assert sorted(rows) == sorted(f"a: {m}" for m in metrics.index)
    for method, m in metrics.iterrows():
        row = rows[f"a: {method}"]
        assert row["runs"] == 2 and row["correct"] == pytest.approx(m["correct"])
        assert row["geomean_vs_eager"] == pytest.approx(m["geomean"]) and row["fast_1"] == pytest.approx(m["fast_1"])
        assert row["geomean_vs_compile"] is None  # the stand-in times no torch.compile


def test_a_suite_is_found_wherever_it_stands_among_the_options() -> None:
    """`bench_catalog.py --seeds 2 tasks/` runs tasks/, not the built-in suite as well."""
    spec = importlib.util.spec_from_file_location("bench_catalog", REPO / "bench" / "bench_catalog.py")
    assert spec is not None and spec.loader is not None
    bench_catalog = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_catalog)
    given_suite = bench_catalog.given_suite
    assert not given_suite([]) and not given_suite(["--seeds", "2", "--method", "feedback"])
    assert given_suite(["--seeds", "2", "tasks/"]) and given_suite(["level1/19_ReLU", "--workers", "3"])
    assert given_suite(["--method", "feedback", "a.py", "--note", "n"])
