"""A recorded run replays exactly (issue 35): `--llm script` with a run folder's
responses.yaml takes the recorded path and answers, so the replay's steps, candidates and
verdicts are the run's, even under another run id and in a memory the run has since changed
(the policy's draws depend on both). For every backend that records: the catalog, the two
LLM APIs (through their real SDKs and local servers) and the script backend itself."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from htam_graph.config import ScoringParams
from htam_graph.llm.base import LLMClient
from htam_graph.llm.script import ScriptClient
from htam_graph.llm.settings import LLMSettings
from htam_graph.loop.clients import make_client
from htam_graph.loop.evaluators import HoldsNothing
from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.records import RunSummary
from htam_graph.loop.runs import create_run
from htam_graph.memory.models import RunConfig
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.runner.models import EvalResult, Timing
from htam_graph.tasks import Task, resolve_task
from htam_graph.vocab import Method, Verdict
from tests.llm.conftest import settings
from tests.llm.family_servers import AnthropicThinkingServer, OpenAIReasoningServer

TASK = "level1/19_ReLU"


class HashJudge(HoldsNothing):
    """ok, at a speed read from the candidate's hash (0.5-2.0x): any source gets a verdict."""

    label, device, target = "hash", "hashed timings (no GPU)", "an NVIDIA H200 (sm_90)"

    def evaluate(self, task: Task, source: str) -> EvalResult:
        digest = hashlib.sha256(source.encode()).hexdigest()
        speedup = 0.5 + 1.5 * int(digest[:8], 16) / 0xFFFFFFFF
        ms = 1.0 / speedup
        timing = Timing(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, trials=10)
        eager = Timing(median_ms=1.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, trials=10)
        return EvalResult(
            task_id=task.id, task_sha256=task.sha256, candidate_sha256=digest, candidate_format="native",
            verdict=Verdict.OK, compiled=True, correct=True, candidate=timing, reference_eager=eager,
            speedup_eager=speedup, device=self.device,
        )  # fmt: skip


def run(store: SQLiteStore, client: LLMClient, out: Path, run_id: str, method: Method) -> RunSummary:
    task = resolve_task(TASK)
    manifest, folder = create_run(
        out=out, task=task, method=method, seed=0, config=RunConfig(steps=4, scoring=ScoringParams()),
        llm=f"{client.name}:{client.model}", evaluator="hash", device=HashJudge.device, target=HashJudge.target,
        run_id=run_id,
    )  # fmt: skip
    return Optimizer(
        store=store, client=client, evaluator=HashJudge(), task=task, manifest=manifest, folder=folder
    ).run()


def path(summary: RunSummary) -> list[tuple]:
    return [(t.global_id, t.local_id, t.verdict, t.speedup, t.best_after) for t in summary.trajectory]


def check_replays(record: Callable[[], LLMClient], tmp_path: Path, method: Method = Method.HTAM) -> None:
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        store.seed(load_seed_bank())
        first = run(store, record(), tmp_path / "runs", "first", method)
        script = Path(first.folder) / "responses.yaml"
        again = run(store, ScriptClient(script), tmp_path / "runs", "again", method)  # the memory has moved on
        third = run(store, ScriptClient(Path(again.folder) / "responses.yaml"), tmp_path / "runs", "third", method)
    assert path(again) == path(first) and path(third) == path(first)
    assert first.steps_done == 4 and all(t.global_id for t in first.trajectory)
    sources = [sorted((Path(s.folder) / "candidates").iterdir()) for s in (first, again, third)]
    assert [[p.read_text() for p in files] for files in sources[1:]] == [[p.read_text() for p in sources[0]]] * 2
    assert (Path(again.folder) / "responses.yaml").read_text() == script.read_text()


@pytest.mark.parametrize("method", [Method.HTAM, Method.FEEDBACK])
def test_a_catalog_run_replays_exactly(method: Method, tmp_path: Path) -> None:
    check_replays(lambda: make_client(LLMSettings(backend="catalog")), tmp_path, method)


def test_an_openai_run_replays_exactly(tmp_path: Path) -> None:
    with OpenAIReasoningServer() as server:
        check_replays(
            lambda: make_client(settings("openai", server.url + "/v1", model="o4-mini", family=None)), tmp_path
        )


def test_an_anthropic_run_replays_exactly(tmp_path: Path) -> None:
    with AnthropicThinkingServer() as server:
        check_replays(lambda: make_client(settings("anthropic", server.url, family="anthropic-thinking")), tmp_path)
