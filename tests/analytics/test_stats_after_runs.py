"""`htam stats transitions` as a user runs it after filling the memory with real runs
(conftest.py; `htam demo` once it exists): a table of success rates and Wilson intervals
that fits 80 columns in a pipe, and `--format csv` with the same numbers."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pandas as pd
import pytest

pytestmark = [pytest.mark.neo4j, pytest.mark.nvcc]


def test_the_transitions_table_in_a_pipe_and_its_csv(filled_neo4j, tmp_path):
    def htam(*args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_") and k != "COLUMNS"}
        run = subprocess.run(
            [sys.executable, "-m", "htam_graph", "stats", "transitions", *args],
            cwd=tmp_path,
            env={**env, **filled_neo4j},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return run.stdout

    table = htam().splitlines()
    csv = pd.read_csv(io.StringIO(htam("--format", "csv")))
    assert table[0] == "TRANSITION edges with 1+ observations"
    assert table[1].startswith(f"in {filled_neo4j['HTAM_NEO4J_URI']}") and max(len(line) for line in table) <= 80
    assert table[2].split() == ["from", "to", "n", "rate", "95%", "CI", "reward", "gain"]
    rows = [line.split() for line in table[3 : 3 + len(csv)]]
    assert "Wilson" in table[-1]  # the legend follows the rows
    assert len(csv) > 10 and (csv["successes"] > 0).any() and (csv["successes"] == 0).any()
    for cells, (_, want) in zip(rows, csv.iterrows(), strict=True):
        low, high = cells[4].split("-")
        assert cells[:3] == [want["source"], want["target"], str(want["observations"])]
        assert [float(cells[3]), float(low), float(high), float(cells[5]), float(cells[6])] == pytest.approx(
            [want["success_rate"], want["ci_low"], want["ci_high"], want["mean_reward"], want["mean_gain"]], abs=0.005
        )
