"""`htam demo` and the replay evaluator: a recorded demo replays step for step, a candidate
that was not recorded is a clear error, and the demo leaves a memory `htam memory show`
reads. The CLI test runs on the stand-in (any machine with nvcc);
test_the_shipped_replay runs the demo exactly as a user does, on the H200 replay file."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from htam_graph.catalog import DEMO_REPLAY
from htam_graph.config import Settings
from htam_graph.demo import DemoOptions, run_demo
from htam_graph.errors import BadInput
from htam_graph.loop.evaluators import (
    REFERENCE_ONLY,
    RecordingEvaluator,
    ReplayEvaluator,
    StandInEvaluator,
    load_recording,
)

pytestmark = pytest.mark.nvcc  # the stand-in builds every candidate with nvcc

TASKS = ["level1/10_RMSNorm", "level2/2_Swish_Bias_Scale"]


def htam(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    return subprocess.run(
        [sys.executable, "-m", "htam_graph", *args],
        cwd=cwd,
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=900,
    )


def _trajectory(result) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(r.task_id, [(t.global_id, t.local_id, t.verdict, t.speedup) for t in r.trajectory]) for r in result.runs]


def test_a_recorded_demo_replays_step_for_step(tmp_path: Path) -> None:
    replay = tmp_path / "demo.json.gz"
    options = DemoOptions(tasks=TASKS, steps=3, out=tmp_path / "a")
    recorded = run_demo(options, Settings(), RecordingEvaluator(replay, "htam demo --record x", StandInEvaluator()))
    recording = load_recording(replay)
    # every judged candidate, and each task's reference-only result (step 1's time to beat)
    assert len(recording.results) == sum(len(r.trajectory) for r in recorded.runs) - sum(
        t.verdict == "no_candidate" for r in recorded.runs for t in r.trajectory
    ) + len(TASKS)
    reference_only = hashlib.sha256(REFERENCE_ONLY.encode()).hexdigest()
    assert sum(key.endswith(reference_only) for key in recording.results) == len(TASKS)
    replayed = run_demo(DemoOptions(tasks=TASKS, steps=3, out=tmp_path / "b"), Settings(), ReplayEvaluator(replay))
    assert _trajectory(replayed) == _trajectory(recorded)
    assert replayed.evaluator == "replay" and replayed.device.startswith("replay of")
    assert [t.model_dump() for t in replayed.transitions] == [t.model_dump() for t in recorded.transitions]
    # a task that was not recorded: its first candidate has no result in the file
    with pytest.raises(BadInput, match=r"level1/7_Softmax.*htam demo --record .*demo\.json\.gz") as err:
        unrecorded = DemoOptions(tasks=["level1/7_Softmax"], steps=1, out=tmp_path / "c")
        run_demo(unrecorded, Settings(), ReplayEvaluator(replay))
    assert (err.value.option, err.value.value, err.value.path) == ("--replay", "level1/7_Softmax", replay)


def test_a_missing_replay_file_says_how_to_record_one(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="htam demo --record") as err:
        ReplayEvaluator(tmp_path / "nothing.json.gz")
    assert err.value.path == tmp_path / "nothing.json.gz"


def test_the_demo_command_leaves_a_memory_that_htam_memory_show_reads(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = htam("demo", "--evaluator", "stand-in", "--tasks", ",".join(TASKS), "--steps", "2", "--out", str(out),
                cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Transitions the memory learned" in done.stdout and "Best kernels" in done.stdout
    assert "stand-in evaluator" in done.stdout
    shown = htam("--store", "local", "--local-path", str(out / "memory.sqlite"), "memory", "show", "--json",
                 cwd=tmp_path)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    memory = json.loads(shown.stdout)
    assert memory["counts"]["runs"] == 2 and memory["counts"]["steps"] == 4
    assert sum(g["attempts"] for g in memory["globals"]) == 4


def test_the_shipped_replay(tmp_path: Path) -> None:
    assert DEMO_REPLAY.exists(), f"{DEMO_REPLAY} is part of the package (recorded on an H200, docs/catalog.md)"
    done = htam("demo", "--out", str(tmp_path / "demo"), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["evaluator"] == "replay" and "replay of" in result["device"]
    assert len(result["runs"]) == 5 and all(r["steps_done"] == 6 for r in result["runs"])
    assert result["transitions"]


def test_the_demo_keeps_its_recordings_settings_whatever_the_defaults(tmp_path: Path) -> None:
    """The shipped recording was made with the tuned start (catalog-v1) and reward_from = best:
    the demo uses them even where the defaults (catalog-space-v1, parent) or the environment
    say otherwise, so it neither fails on an unrecorded kernel nor changes its numbers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    done = subprocess.run(
        [sys.executable, "-m", "htam_graph", "demo", "--out", str(tmp_path / "demo"), "--json"],
        cwd=tmp_path,
        env={**env, "COLUMNS": "200", "HTAM_SCORING__REWARD_FROM": "parent", "HTAM_LLM__MODEL": "catalog-space-v1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [round(r["best_speedup"], 2) for r in result["runs"]] == [4.70, 1.05, 4.18, 1.98, 1.12]  # docs/usage.md
    for manifest in (tmp_path / "demo" / "runs").glob("*/run.json"):
        run = json.loads(manifest.read_text())
        assert run["llm"] == "catalog:catalog-v1" and run["run"]["config"]["scoring"]["reward_from"] == "best"
