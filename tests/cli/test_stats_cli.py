"""`htam stats ...` on an embedded memory filled through the store API: every table fits
80 columns, CSV and JSON carry the same numbers, bad input is one line. (The table in a
pipe after real runs: tests/analytics/test_stats_after_runs.py.)"""

from __future__ import annotations

import io
import json
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
    # JSON's null is CSV's empty cell: a column of nulls only (base_before by default) is NaN in both
    pd.testing.assert_frame_equal(from_json[numbers].astype(float), from_csv[numbers].astype(float))


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


def test_the_runs_table_says_what_each_run_started_from_and_was_rewarded_against(memory, monkeypatch, capsys):
    code, table, err = stats(memory, "runs", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    assert table.splitlines()[2].endswith("reward from")  # the llm gives way first at 80 columns
    rows = {line.split()[0]: line for line in table.splitlines()[3:6]}
    assert rows["r-htam"].endswith(" parent") and rows["r-noprefix"].endswith(" best")
    _, records, _ = stats(memory, "runs", "--format", "json", monkeypatch=monkeypatch, capsys=capsys)
    assert {r["run_id"]: (r["llm"], r["reward_from"]) for r in json.loads(records)} == {
        "r-htam": ("catalog:catalog-space-v1", "parent"),
        "r-noprefix": ("catalog:catalog-v1", "best"),
        "r-feedback": ("unrecorded", "parent"),
    }
