"""`htam stats ...`: tables that fit 80 columns in a pipe, CSV and JSON with the same
numbers, and one-line errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from htam_graph.cli import main
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from tests.analytics.test_agreement import fill

TABLES = [
    ["transitions"],
    ["transitions", "--by-distance"],
    ["globals"],
    ["locals"],
    ["locals", "--global", "memory_access", "--min-count", "0"],
    ["runs"],
    ["runs", "--by-method"],
    ["runs", "--run", "r-htam"],
]


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    path = tmp_path / "memory.sqlite"
    with SQLiteStore(path) as store:
        fill(store)
    return path


def stats(path: Path, *args: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> tuple:
    """`htam stats ARGS` in this process (main() and all): exit code, stdout, stderr."""
    monkeypatch.setenv("HTAM_LOCAL_PATH", str(path))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(sys, "argv", ["htam", "stats", *args])
    with pytest.raises(SystemExit) as done:
        main()
        sys.exit(0)
    out, err = capsys.readouterr()
    return done.value.code, out, err


def test_transitions_in_a_pipe_fit_80_columns_and_csv_has_the_same_numbers(memory: Path):
    def htam(*args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_") and k != "COLUMNS"}
        run = subprocess.run(
            [sys.executable, "-m", "htam_graph", "stats", "transitions", *args],
            env={**env, "HTAM_LOCAL_PATH": str(memory)},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return run.stdout

    table = htam().splitlines()
    csv = pd.read_csv(io.StringIO(htam("--format", "csv")))
    assert table[1] == f"in {memory}" and max(len(line) for line in table[2:]) <= 80
    assert table[2].split() == ["from", "to", "n", "rate", "95%", "CI", "reward", "gain"]
    rows = [line.split() for line in table[3 : 3 + len(csv)]]
    assert "Wilson" in table[-1]  # the legend follows the rows
    for cells, (_, want) in zip(rows, csv.iterrows(), strict=True):
        low, high = cells[4].split("-")
        assert cells[:3] == [want["source"], want["target"], str(want["observations"])]
        assert [float(cells[3]), float(low), float(high), float(cells[5]), float(cells[6])] == pytest.approx(
            [want["success_rate"], want["ci_low"], want["ci_high"], want["mean_reward"], want["mean_gain"]], abs=0.005
        )


@pytest.mark.parametrize("args", TABLES, ids=" ".join)
def test_every_table_fits_and_json_matches_csv(memory, args, monkeypatch, capsys):
    code, table, err = stats(memory, *args, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    lines = table.splitlines()
    assert lines[1] == f"in {memory}" and max(len(line) for line in lines[2:]) <= 80
    _, text, _ = stats(memory, *args, "--format", "csv", monkeypatch=monkeypatch, capsys=capsys)
    _, records, _ = stats(memory, *args, "--format", "json", monkeypatch=monkeypatch, capsys=capsys)
    from_csv = pd.read_csv(io.StringIO(text))
    from_json = pd.DataFrame(json.loads(records))
    assert list(from_json.columns) == list(from_csv.columns) and len(from_json) == len(from_csv) > 0
    numbers = from_csv.select_dtypes("number").columns
    pd.testing.assert_frame_equal(from_json[numbers], from_csv[numbers], check_dtype=False)


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope"], "no table 'nope': choose one of transitions, globals, locals, runs"),
        (["transitions", "--min-count", "-1"], "--min-count must be 0 or more, got -1"),
        (["globals", "--min-count", "1000"], "nothing to show: no global directions with 1000+ attempts"),
        (["runs", "--run", "nope"], "no run 'nope'"),
        (["runs", "--run", "r-htam", "--by-method"], "give one of them"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(memory, args, message, monkeypatch, capsys):
    code, out, err = stats(memory, *args, monkeypatch=monkeypatch, capsys=capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_an_empty_or_unused_memory_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty.sqlite"
    code, out, err = stats(empty, "transitions", monkeypatch=monkeypatch, capsys=capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1 and "is empty: run `htam memory seed`" in err
    with SQLiteStore(empty) as store:
        store.seed(load_seed_bank())
    code, out, err = stats(empty, "transitions", "--format", "csv", monkeypatch=monkeypatch, capsys=capsys)
    assert (code, out) == (2, "") and "no TRANSITION edges with 1+ observations" in err
