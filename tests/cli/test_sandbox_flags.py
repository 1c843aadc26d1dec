"""--sandbox/--no-sandbox on every command that judges generated code: one default, the
choice reaching the judge and recorded with what it judged, and a machine that cannot
confine refused up front (one line, exit code 2, nothing written)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from htam_graph.bench.record import META, check_continues, record
from htam_graph.bench.report import sandbox_text
from htam_graph.cli import cli, main
from htam_graph.errors import UserError
from htam_graph.loop.evaluators import StandInEvaluator, make_evaluator, sandbox_of
from htam_graph.runner import sandbox
from htam_graph.runner.jobs import EvalConfig
from htam_graph.tasks import resolve_task
from tests.bench.example import htam

REPO = Path(__file__).resolve().parents[2]
HONEST = REPO / "bench" / "candidates" / "level1" / "19_ReLU.py"
TABLE = REPO / "bench/results/table-2026-12-04-h200-suite/table.parquet"
CATALOG = ["--llm", "catalog", "--model", "catalog-space-v1"]
COMMANDS = {
    "eval": ["eval", "level1/19_ReLU", "CANDIDATE", "--no-run"],
    "optimize": ["optimize", "level1/19_ReLU", *CATALOG, "--evaluator", "stand-in", "--out", "OUT"],
    "bench": ["bench", "level1/19_ReLU", *CATALOG, "--evaluator", "stand-in", "--out", "OUT"],
    "catalog record": ["catalog", "record", "level1/19_ReLU", "--evaluator", "stand-in", "--out", "OUT"],
}
confinable = pytest.mark.skipif(sandbox.missing() is not None, reason=f"no sandbox here: {sandbox.missing()}")


def _command(words: list[str]) -> click.Command:
    command: click.Command = cli
    for word in words:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), word)
        assert found is not None, word
        command = found
    return command


@pytest.mark.parametrize("name", COMMANDS)
def test_every_judging_command_takes_the_flag_with_the_one_default(name):
    option = next(p for p in _command(name.split()).params if p.name == "sandbox")
    assert isinstance(option, click.Option)
    assert option.opts == ["--sandbox"] and option.secondary_opts == ["--no-sandbox"]
    assert option.default is sandbox.ON_BY_DEFAULT is EvalConfig().sandbox


@pytest.mark.parametrize("name", COMMANDS)
def test_sandbox_asked_for_where_it_is_missing_is_one_line_exit_2_and_nothing_written(
    name, monkeypatch, tmp_path, capsys
):
    monkeypatch.setattr(sandbox, "missing", lambda: "Landlock (Linux 5.13+, enabled in the kernel's lsm= list)")
    candidate = tmp_path / "candidate.py"
    candidate.write_bytes(HONEST.read_bytes())
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HTAM_LOCAL_PATH", str(work / "memory.sqlite"))
    monkeypatch.setenv("HTAM_CACHE_DIR", str(work / "cache"))
    given = [str(candidate) if a == "CANDIDATE" else str(work / "out") if a == "OUT" else a for a in COMMANDS[name]]
    monkeypatch.setattr(sys, "argv", ["htam", *given, "--sandbox"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err == (
        "error: cannot sandbox generated code: this machine lacks Landlock (Linux 5.13+, enabled in the kernel's "
        "lsm= list); --no-sandbox accepts the risk\n"
    )
    assert list(work.iterdir()) == []


def test_unconfined_judging_says_so_in_a_bench_report():
    assert sandbox_text("gpu", False) == (
        "**off** (--no-sandbox): generated code ran unconfined, with this user's privileges"
    )
    assert sandbox_text("stand-in", True).startswith("on: generated code and its builds ran confined")
    assert "runs no generated code" in sandbox_text("replay", True)


@pytest.mark.nvcc
def test_the_stand_in_judges_as_its_config_says(tmp_path, monkeypatch):
    monkeypatch.setenv("HTAM_CACHE_DIR", str(tmp_path / "cache"))
    task = resolve_task("level1/19_ReLU")
    source = HONEST.read_text()
    assert sandbox_of(make_evaluator("stand-in", EvalConfig(sandbox=False))) is False
    assert not StandInEvaluator(EvalConfig(sandbox=False)).evaluate(task, source).sandboxed
    assert sandbox_of(make_evaluator("replay", replay=TABLE)) is None


@confinable
@pytest.mark.nvcc
def test_catalog_record_with_sandbox_records_it_in_meta_json(tmp_path, monkeypatch):
    """The CLI's choice reaches the recorder's judge (every row's result is confined) and
    meta.json; a recording continues only as it was made, refused before anything is written."""
    monkeypatch.setenv("HTAM_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "table"
    args = ["catalog", "record", "level1/19_ReLU", "--evaluator", "stand-in", "--max-states", "2", "--out", str(out)]
    done = CliRunner().invoke(cli, [*args, "--sandbox"])
    assert done.exit_code == 0, done.output
    assert "sandbox on" in done.output
    assert json.loads((out / META).read_text())["sandbox"] is True
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(json.loads(row["result"])["sandboxed"] for row in rows)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = CliRunner().invoke(cli, [*args, "--no-sandbox"])
    assert isinstance(again.exception, UserError)
    assert str(again.exception) == (
        f"{out} was recorded with --sandbox: continue it with --sandbox, or record with --no-sandbox in another --out"
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.nvcc
def test_record_writes_unconfined_into_meta_json(tmp_path, monkeypatch):
    monkeypatch.setenv("HTAM_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "table"
    meta = record([resolve_task("level1/19_ReLU")], out, StandInEvaluator(), "test", "abc", max_states=1)
    assert meta.sandbox is False and json.loads((out / META).read_text())["sandbox"] is False
    assert check_continues(out, False) == meta
    with pytest.raises(UserError, match="recorded with --no-sandbox"):
        check_continues(out, True)


@confinable
@pytest.mark.nvcc
def test_a_bench_with_sandbox_confines_its_workers_and_says_so(tmp_path):
    """The flag reaches every worker process's judge: each step's result is confined, and
    bench.json, each run.json and the report say so."""
    out = tmp_path / "bench"
    cmd = ["bench", "level1/19_ReLU", *CATALOG, "--evaluator", "stand-in", "--method", "feedback", "--steps", "1",
           "--workers", "1", "--sandbox", "--out", str(out)]  # fmt: skip
    done = htam(*cmd, env={"HTAM_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((out / "bench.json").read_text())["config"]["sandbox"] is True
    (run,) = (out / "runs").iterdir()
    assert json.loads((run / "run.json").read_text())["sandbox"] is True
    steps = [json.loads(p.read_text()) for p in sorted((run / "steps").glob("*.json"))]
    results = [a["result"] for s in steps for a in s.get("attempts", []) if a.get("result")]
    assert results and all(r["sandboxed"] for r in results)
    report = (out / "report.md").read_text()
    assert "| sandbox | on: generated code and its builds ran confined" in report
