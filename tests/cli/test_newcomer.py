"""Issue 35, a newcomer's first hour: the README's no-key, no-GPU paths work as typed, and a
command that fails leaves nothing behind."""

from __future__ import annotations

import json
import os
import re
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


def test_eval_no_run_refuses_what_cannot_be_a_candidate(tmp_path):
    """An empty file, a syntax error, a file without ModelNew: one line naming the file and
    the problem, exit 2, nothing built."""
    cases = {
        "empty.py": ("", "is empty"),
        "syntax.py": ("class ModelNew(:\n    pass\n", "line 1: SyntaxError"),
        "nomodel.py": ("import torch\n\nclass Model(torch.nn.Module):\n    pass\n", "defines no ModelNew"),
    }
    for name, (source, expected) in cases.items():
        (tmp_path / name).write_text(source)
        r = htam("eval", "level1/19_ReLU", name, "--no-run", cwd=tmp_path)
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        assert r.stderr.startswith(f"error: {name}: ") and expected in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "cache").exists()


def test_precheck_gives_a_load_error_for_what_cannot_be_a_candidate():
    """The loop's stand-in judge (precheck) calls such a candidate a load error, as running it would."""
    from htam_graph.runner.evaluate import precheck
    from htam_graph.vocab import Verdict

    for source, expected in [("\n\n", "is empty"), ("def f(:\n", "SyntaxError"), ("x = 1\n", "no ModelNew")]:
        result = precheck("level1/19_ReLU", source + "\n")
        assert result.verdict == Verdict.LOAD_ERROR and expected in (result.errors or "")


def test_one_best_for_the_run_summary_the_bench_and_stats(tmp_path):
    """A run whose only correct candidate is slower than eager (0.797x): its best is 0.797x
    in the run's summary (what optimize prints and its JSON), in the bench's progress events
    (the summary's), the bench's results and report rows, and `htam stats runs` (none of
    them counts the reference's 1.0)."""
    from htam_graph import analytics
    from htam_graph.bench.results import _best
    from htam_graph.cli.common import best_text
    from htam_graph.memory.sqlite_store import SQLiteStore
    from htam_graph.vocab import Method
    from tests.llm.loop_harness import RecordingWriter, run_loop

    summary, records = run_loop(Method.HTAM, RecordingWriter(), tmp_path, steps=2)  # 0.797x, then incorrect
    assert (summary.best_speedup, summary.best_step, summary.correct) == (0.797, 0, True)
    assert summary.model_dump(mode="json")["best_speedup"] == 0.797
    best = _best(records)
    assert best is not None and best[1].speedup_eager == 0.797
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        runs = analytics.runs(store).set_index("run_id")
        methods = analytics.compare_methods(store).set_index("method")
    assert runs.loc["run-htam", "best_speedup"] == 0.797
    assert methods.loc["htam", "geomean_speedup"] == 0.797 and methods.loc["htam", "fast_1"] == 0.0
    assert best_text(summary.best_speedup) == "0.80x" and best_text(None) == "none correct"


def test_steps_count_from_1_and_outputs_say_only_what_is_true(tmp_path):
    """A run without a correct candidate announces no best.py (and writes none); its steps
    are numbered from 1 by optimize and by `htam stats runs --run`; the demo names Neo4j
    Browser only when its memory is in Neo4j."""
    assert htam("memory", "seed", cwd=tmp_path).returncode == 0
    script = tmp_path / "script.yaml"
    script.write_text("responses:\n  - template: generate\n    text: no code here\n")
    r = htam("optimize", "level1/19_ReLU", "--method", "vanilla", "--llm", "script", "--script", str(script),
             "--evaluator", "stand-in", "--run-id", "none", cwd=tmp_path, COLUMNS="200")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "best.py" not in r.stdout and not (tmp_path / "htam-runs" / "none" / "best.py").exists()
    assert "no correct candidate" in r.stdout
    assert re.search(r"^│ +1 +│ ", r.stdout, re.M)  # the table's first step
    shown = htam("stats", "runs", "--run", "none", "--format", "json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert [s["step"] for s in json.loads(shown.stdout)] == [1]
    table = htam("stats", "runs", "--run", "none", cwd=tmp_path, COLUMNS="200")
    assert table.stdout.splitlines()[2].split()[0] == "step" and table.stdout.splitlines()[3].split()[0] == "1"

    demo = htam("demo", "--tasks", "level1/10_RMSNorm", "--steps", "2", "--out", "demo", cwd=tmp_path,
                HTAM_NEO4J_URI="bolt://127.0.0.1:9", COLUMNS="200")  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    assert "Neo4j Browser" not in demo.stdout and "htam demo --neo4j" in demo.stdout
    assert " 1/2 " in demo.stdout and " 0/2 " not in demo.stdout


def test_every_command_that_takes_a_memory_file_takes_an_export(tmp_path):
    """`htam memory export` writes the one memory format: `htam memory import` and `htam
    bench --memory-from` take it, and the memory a bench writes is in it too."""
    assert htam("memory", "seed", cwd=tmp_path).returncode == 0
    assert htam("memory", "export", "-o", "memory.jsonl", cwd=tmp_path).returncode == 0
    copy = htam("--store", "local", "--local-path", "copy.sqlite", "memory", "import", "memory.jsonl", cwd=tmp_path)
    assert copy.returncode == 0, copy.stderr
    bench = [
        "bench",
        "level1/19_ReLU",
        "--method",
        "htam",
        "--steps",
        "1",
        "--llm",
        "catalog",
        "--evaluator",
        "stand-in",
    ]
    r = htam(*bench, "--memory-from", "memory.jsonl", "--out", "b1", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    written = tmp_path / "b1" / "memory" / "htam-s0.json"
    assert json.loads(written.read_text().splitlines()[0]) == {"format": "htam-graph/memory", "version": 3}
    again = htam("--store", "local", "--local-path", "again.sqlite", "memory", "import", str(written), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    for source in (str(written), str(written.parent)):  # a bench's memory file, and its folder
        r = htam(*bench, "--memory-from", source, "--out", f"b-{len(source)}", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    (tmp_path / "bad.jsonl").write_text('{"format": "htam-graph/memory", "version": 3}\n{"globals": 1}\n')
    r = htam(*bench, "--memory-from", "bad.jsonl", "--out", "b-bad", cwd=tmp_path)
    assert (
        r.returncode == 2
        and r.stderr.startswith("error: --memory-from bad.jsonl: line 2: ")
        and r.stderr.count("\n") == 1
    )
    assert not (tmp_path / "b-bad").exists()


def test_user_text_is_never_read_as_rich_markup():
    """A task id with brackets is printed as it is by `htam eval`'s result and by the
    bench's progress (rich would take `[bold]` as markup and drop it)."""
    from rich.console import Console

    from htam_graph.bench.events import RunStarted
    from htam_graph.cli.bench import BenchProgress
    from htam_graph.cli.display import print_result
    from htam_graph.runner.models import EvalResult
    from htam_graph.vocab import Method, Verdict

    name = "level1/[bold]odd[/bold]_[red]"
    console = Console(record=True, width=200, force_terminal=True)
    result = EvalResult(
        task_id=name, task_sha256="0" * 64, candidate_sha256="0" * 64, candidate_format="native",
        verdict=Verdict.CHECKED, device="[i]dev[/i]", suspicious=True, suspicious_reason="[b]why[/b]",
    )  # fmt: skip
    print_result(result, console)
    text = console.export_text()
    assert name in text and "[i]dev[/i]" in text and "[b]why[/b]" in text

    console = Console(record=True, width=200, force_terminal=True)
    progress = BenchProgress(console, total=1, done=0)
    started = RunStarted(
        worker="w0", run_id="r", task_id=name, method=Method.HTAM, seed=0, steps_done=0, steps_planned=2
    )
    progress.emit(started)
    console.print(progress._bar.get_renderable())
    assert name in console.export_text()


def test_the_demos_closing_paths_are_never_split_at_80_columns(tmp_path):
    """The memory's path and the command to look at it are one line each, at any width
    (a path split across lines cannot be copied)."""
    out = tmp_path / ("a-long-folder-name-" * 4) / "demo"
    r = htam("demo", "--tasks", "level1/10_RMSNorm", "--steps", "1", "--out", str(out), cwd=tmp_path, COLUMNS="80")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert f"memory: {out / 'memory.sqlite'}" in lines
    assert any(line.startswith("look at it: htam --store local") and str(out) in line for line in lines)
