"""A memory filled by real optimization runs, in the test session's own Neo4j.

The runs are `htam optimize` as a user runs it, without a GPU or an API key: the script
backend replays bench/scripts/softmax (six hand-written kernels, one repaired), and the
stand-in evaluator builds each with the real nvcc and checks it statically (its ok
verdicts and times are synthetic). They run once per session; each test that asks for
the memory gets it imported afresh into the server (tests empty the server between them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from htam_graph.memory.models import MemorySnapshot
from tests.conftest import neo4j_env

REPO = Path(__file__).parents[2]
SCRIPT = REPO / "bench" / "scripts" / "softmax" / "script.yaml"
# (method, seed) of each run: HTAM on two seeds, its ablation without the prefix, a baseline.
RUNS = [("htam", 0), ("htam", 1), ("htam-no-prefix", 0), ("feedback", 0)]


def fill_stages(out: Path) -> list[list[list[str]]]:
    """The `htam` commands that fill the memory (each a list of arguments): the stages run
    one after another, the commands of a stage side by side (the store takes concurrent
    steps; the machine has two cores)."""
    optimize = ["optimize", "level1/7_Softmax", "--llm", "script", "--script", str(SCRIPT)]
    optimize += ["--evaluator", "stand-in", "--steps", "6", "--out", str(out)]
    runs = [[*optimize, "--method", method, "--seed", str(seed)] for method, seed in RUNS]
    return [[["memory", "seed"]], runs]


def run_side_by_side(commands: list[list[str]], cwd: Path, env: dict[str, str]) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "htam_graph", *args],
            cwd=cwd,
            env={**base, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in commands
    ]
    for args, process in zip(commands, processes, strict=True):
        _, err = process.communicate(timeout=600)
        assert process.returncode == 0, f"htam {' '.join(args)}: {err}"


@pytest.fixture(scope="session")
def _filled_snapshot(_neo4j_session_store, tmp_path_factory: pytest.TempPathFactory) -> MemorySnapshot:
    _neo4j_session_store.reset()
    work = tmp_path_factory.mktemp("fill")
    for stage in fill_stages(work / "runs"):
        run_side_by_side(stage, work, neo4j_env())
    return _neo4j_session_store.export()


@pytest.fixture
def filled_neo4j(_neo4j_session_store, _filled_snapshot: MemorySnapshot) -> Iterator[dict[str, str]]:
    """The session's Neo4j holding the filled memory; yields the environment that reaches it."""
    _neo4j_session_store.reset()
    _neo4j_session_store.import_snapshot(_filled_snapshot)
    yield neo4j_env()
