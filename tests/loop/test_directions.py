"""The directions a backend declares (LLMClient.directions): the scored methods draw only
among them, htam-no-hierarchy offers only their locals, the step record says what was
offered; a backend that declares none draws exactly as the policy always did. A fake
backend that writes no code: every step is a failed generation, judged by nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from htam_graph.config import ScoringParams
from htam_graph.llm.base import Completion, LLMClient, Prompt, T
from htam_graph.llm.request import StepView
from htam_graph.loop.evaluators import HoldsNothing
from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.records import StepRecord
from htam_graph.loop.runs import create_run
from htam_graph.memory.models import GlobalScore, RunConfig
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.policy.policy import SoftmaxPolicy
from htam_graph.runner.models import EvalResult
from htam_graph.tasks import Task, resolve_task
from htam_graph.vocab import Method, Verdict

STEPS = 8
SET = frozenset({"fusion", "launch_config"})


class Directed(LLMClient):
    """Declares `offered`; answers the first offered strategy and no code."""

    name: ClassVar[str] = "directed"

    def __init__(self, offered: frozenset[str] | None) -> None:
        self.model, self.offered, self.asked = "fake", offered, 0

    def check(self) -> None:
        pass

    def directions(self, state: StepView) -> frozenset[str] | None:
        assert state.task.id == "level1/19_ReLU" and isinstance(state.step_index, int)
        self.asked += 1
        return self.offered

    def complete(self, prompt: Prompt, max_tokens: int | None = None) -> Completion:
        return Completion(text="No kernel this time.", model=self.model)

    def structured(self, prompt: Prompt, schema: type[T], max_tokens: int | None = None) -> tuple[T, Completion]:
        assert prompt.context is not None
        answer = {"local_id": prompt.context.locals[0].id}
        return schema.model_validate(answer), Completion(text=json.dumps(answer), model=self.model)


class Nobody(HoldsNothing):
    label, device, target = "none", "nothing (no candidate is ever written)", "a GPU"

    def evaluate(self, task: Task, source: str) -> EvalResult:
        raise AssertionError("the fake backend writes no code")


def run(method: Method, offered: frozenset[str] | None, tmp: Path) -> tuple[list[StepRecord], Directed]:
    task, client = resolve_task("level1/19_ReLU"), Directed(offered)
    with SQLiteStore(tmp / "memory.sqlite") as store:
        store.seed(load_seed_bank())
        manifest, folder = create_run(
            out=tmp / "runs", task=task, method=method, seed=3, config=RunConfig(steps=STEPS, scoring=ScoringParams()),
            llm="directed:fake", evaluator="none", device=Nobody.device, target=Nobody.target, run_id="directed",
        )  # fmt: skip
        Optimizer(store=store, client=client, evaluator=Nobody(), task=task, manifest=manifest, folder=folder).run()
    records = [StepRecord.model_validate_json(p.read_text()) for p in sorted((folder / "steps").glob("*.json"))]
    assert len(records) == STEPS and all(r.verdict == Verdict.NO_CANDIDATE for r in records)
    return records, client


def redraw(record: StepRecord, offered: list[str] | None) -> str:
    """The step's draw again, from its recorded scores: (seed, run id, step) and the offer."""
    scores = [GlobalScore(global_id=g, base=0, transition=0, score=s) for g, s in record.scores.items()]
    return SoftmaxPolicy(3, "directed", ScoringParams().tau).choose(scores, record.index, offered).global_id


@pytest.mark.parametrize("method", [Method.HTAM, Method.HTAM_NO_PREFIX, Method.HTAM_NO_LOCAL])
def test_the_scored_methods_draw_only_the_declared_directions(method: Method, tmp_path: Path) -> None:
    records, client = run(method, SET, tmp_path)
    assert client.asked == STEPS
    for record in records:
        assert record.global_id in SET and record.offered == sorted(SET)
        assert len(record.scores) == 9  # S(g) of every global is still recorded
        assert {g for g, p in record.probabilities.items() if p > 0} == SET
        assert sum(record.probabilities.values()) == pytest.approx(1.0)
        assert redraw(record, record.offered) == record.global_id  # reproducible from the record
        if record.local_id is not None:
            assert record.local_id.split(".", 1)[0] == record.global_id


def test_a_backend_that_declares_none_draws_as_before(tmp_path: Path) -> None:
    records, client = run(Method.HTAM, None, tmp_path)
    assert client.asked == STEPS
    assert len({r.global_id for r in records}) > len(SET)  # every direction is drawable
    for record in records:
        assert record.offered is None and all(p > 0 for p in record.probabilities.values())
        assert redraw(record, None) == record.global_id  # the policy's original draw


def test_an_empty_or_unknown_set_leaves_every_direction_open(tmp_path: Path) -> None:
    for n, offered in enumerate([frozenset(), frozenset({"no_such_direction"})]):
        records, _ = run(Method.HTAM, offered, tmp_path / str(n))
        assert all(r.offered is None and redraw(r, None) == r.global_id for r in records)


def test_htam_no_hierarchy_offers_only_locals_of_the_declared_directions(tmp_path: Path) -> None:
    records, _ = run(Method.HTAM_NO_HIERARCHY, SET, tmp_path)
    for record in records:
        assert record.global_id in SET and record.offered == sorted(SET)
        assert record.local_id is not None and record.local_id.split(".", 1)[0] in SET


def test_a_step_record_written_before_directions_still_loads(tmp_path: Path) -> None:
    records, _ = run(Method.HTAM, SET, tmp_path)
    old = json.loads(records[0].model_dump_json())
    del old["offered"]
    assert StepRecord.model_validate(old).offered is None
