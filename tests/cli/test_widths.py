"""Issue 35, item 7: every command's output reads at 80 and at 200 columns. Each command
with a table (or a source listing) is rendered at both widths: no word, id, number or path
shown at 200 columns is cut or split at 80 (the tables never cut a cell, so there is no
ellipsis to look for: a cell is whole or it is a bug), and no table line is wider than the
terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from htam_graph.cli.common import print_table

BOX = set("│┃┏┓┗┛┡┩┠┨┣┫┳┻╇╋━─┼┬┴┌┐└┘╭╮╰╯═║")
TABLE_LINE = re.compile(r"^[│┃┏┡└┗┠┣]")


def words(text: str) -> set[str]:
    """The words of a rendering, box drawing and the records' `column:` and `·` left out."""
    out = set()
    for raw in text.split():
        word = raw.strip("".join(BOX) + "·,;()").removesuffix(":")
        if word and not set(word) <= BOX:
            out.add(word)
    return out


def check_widths(wide: str, narrow: str, width: int = 80) -> None:
    # A word longer than the terminal (a deep temporary path) cannot fit whole at any wrap.
    missing = sorted(w for w in words(wide) - words(narrow) if len(w) < width)
    assert not missing, f"shown at 200 columns but cut or split at {width}: {missing[:20]}"
    for text, w in ((wide, 200), (narrow, width)):
        too_wide = [line for line in text.splitlines() if TABLE_LINE.match(line) and len(line) > w]
        assert not too_wide, too_wide[:3]


def render(width: int, title: str, columns: list[str], rows: list[list[object]]) -> str:
    console = Console(record=True, width=width, force_terminal=False)
    print_table(title, columns, rows, console)
    return console.export_text()


@pytest.mark.parametrize(
    "columns,rows",
    [
        (["id", "n"], [["fusion", 1], ["memory_access", 22]]),
        (  # many numeric columns behind two long ids: rows become blocks at 80
            ["from", "to", "n", "success", "mean reward", "compile fail", "incorrect", "n by distance"],
            [["precision_tensor_cores", "compute_efficiency", 3, 0.5, 0.125, 1, 0, "2 1"]] * 3,
        ),
        (  # free text wraps between words, a path is never split
            ["id", "summary", "path"],
            [["level1/19_ReLU", "ReLU of a (16384, 8192) fp32 tensor: 1.07 GB moved " * 3, "/a/" + "long-folder/" * 8]],
        ),
        (["task", "verdict"], []),
    ],
)
def test_print_table_never_cuts_a_cell(columns, rows):
    wide = render(200, "a title naming /some/path/of/a/memory.sqlite", columns, rows)
    narrow = render(80, "a title naming /some/path/of/a/memory.sqlite", columns, rows)
    for row in rows:
        for cell in row:
            text = f"{cell:.4f}" if isinstance(cell, float) else str(cell)
            for word in text.split():
                assert any(word in line for line in narrow.splitlines()), (word, narrow)
    check_widths(wide, narrow)
    assert "…" not in wide + narrow


def htam(*args: str, cwd: Path, columns: int) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    env |= {
        "HTAM_STORE": "local",
        "HTAM_LOCAL_PATH": str(cwd / "memory.sqlite"),
        "HTAM_CACHE_DIR": str(cwd / "cache"),
        "COLUMNS": str(columns),
    }
    r = subprocess.run(
        [sys.executable, "-m", "htam_graph", *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )
    assert r.returncode == 0 or (args[:2] == ("db", "status") and r.returncode == 1), (args, r.stdout, r.stderr)
    return r.stdout


# Every command that prints a table (or a listing), in an order that gives each data: the
# loop's commands write runs that `memory show --transitions` and `stats` then show.
COMMANDS = [
    ["memory", "seed"],
    ["memory", "show"],
    ["memory", "show", "--locals", "fusion"],
    ["memory", "score", "--prefix", "fusion,memory_access", "--family", "elementwise"],
    ["tasks", "list"],
    ["tasks", "show", "level1/19_ReLU"],
    ["tasks", "show", "level2/6_Conv2d_Bias_ReLU"],  # a line of 112 characters
    ["catalog", "space", "level1/19_ReLU", "level1/7_Softmax", "level2/6_Conv2d_Bias_ReLU"],
    ["config"],
    ["db", "status"],  # no server here: exit 1, its status still printed
    ["optimize", "level1/19_ReLU", "--llm", "catalog", "--evaluator", "stand-in", "--steps", "3", "--run-id", "r1"],
    ["demo", "--tasks", "level1/7_Softmax", "--steps", "2", "--out", "demo"],
    ["bench", "level1/19_ReLU", "--method=htam", "--llm=catalog", "--evaluator=stand-in", "--steps=1", "--out=b"],
    ["memory", "show", "--transitions"],
    ["stats", "transitions"],
    ["stats", "globals"],
    ["stats", "runs"],
    ["stats", "runs", "--run", "r1"],
]


@pytest.mark.slow  # ~2 minutes: two of each command, the loop's among them
def test_every_command_reads_at_80_and_200_columns(tmp_path):
    """The same commands on the same data at 200 and at 80 columns (two folders, as the
    runs are deterministic: catalog LLM, stand-in judge, fixed run ids)."""
    (tmp_path / "80").mkdir()
    (tmp_path / "200").mkdir()
    for args in COMMANDS:
        wide = htam(*args, cwd=tmp_path / "200", columns=200)
        narrow = htam(*args, cwd=tmp_path / "80", columns=80).replace(str(tmp_path / "80"), str(tmp_path / "200"))
        try:
            check_widths(wide, narrow)
        except AssertionError as e:
            raise AssertionError(f"htam {' '.join(args)}: {e}\n--- 200:\n{wide}\n--- 80:\n{narrow}") from None
        if args[:2] == ["tasks", "show"]:  # the whole source, every line of it
            source = (Path(__file__).parents[2] / "htam_graph/tasks/suite" / f"{args[2]}.py").read_text()
            assert words(source) <= words(narrow), sorted(words(source) - words(narrow))
