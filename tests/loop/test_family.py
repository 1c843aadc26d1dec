"""The run's operator family (docs/method.md, "Conditioning on the operator family"): the task
record keeps the catalog's family; `htam` scores directions and ranks strategies with the
family's evidence shrunk toward the pooled, `htam-no-family` with the pooled evidence only;
the strategy catalog's record of a strategy is conditioned the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from htam_graph.catalog.client import SHRINK, _record
from htam_graph.config import ScoringParams
from htam_graph.llm.base import Completion, Prompt, T
from htam_graph.llm.request import Offer
from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.runs import create_run
from htam_graph.loop.state import LocalView
from htam_graph.memory.models import RunConfig, RunRecord, StepUpdate, TaskRecord
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.tasks import resolve_task
from htam_graph.vocab import Method, Verdict
from tests.loop.test_reward_base import Scripted, Writer

TASK = "level1/19_ReLU"  # elementwise


def past_evidence(store: SQLiteStore, family: str | None, task_id: str, chosen: str, local: str) -> None:
    """Three steps of another run that doubled the speedup with `local`, on a task of `family`."""
    store.start_run(RunRecord(id=f"past-{task_id}", task_id=task_id), TaskRecord(id=task_id, family=family))
    for i in range(3):
        store.record_step(
            StepUpdate(
                id=f"past-{task_id}:{i}", run_id=f"past-{task_id}", task_id=task_id, index=i, global_id=chosen,
                local_id=local, verdict=Verdict.OK, speedup=2.0, best_before=1.0, best_after=2.0,
            )
        )  # fmt: skip


class Reader(Writer):
    """The fake backend, keeping the strategy-choice prompts it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.choices: list[str] = []

    def structured(self, prompt: Prompt, schema: type[T], max_tokens: int | None = None) -> tuple[T, Completion]:
        self.choices.append(prompt.user)
        return super().structured(prompt, schema, max_tokens)


def one_step(store: SQLiteStore, method: Method, tmp: Path, client: Writer | None = None) -> StepUpdate:
    task = resolve_task(TASK)
    manifest, folder = create_run(
        out=tmp / "runs", task=task, method=method, seed=0, config=RunConfig(steps=1), llm="writer:fake",
        evaluator="scripted", device=Scripted.device, target=Scripted.target, run_id=f"family-{method.value}",
    )  # fmt: skip
    client = client or Writer()
    Optimizer(store=store, client=client, task=task, evaluator=Scripted(), manifest=manifest, folder=folder).run()
    [step] = store.get_steps(f"family-{method.value}")
    return step


@pytest.mark.parametrize("method", [Method.HTAM, Method.HTAM_NO_FAMILY])
def test_the_strategy_choice_shows_the_familys_record_to_htam_only(method: Method, tmp_path: Path) -> None:
    bank = load_seed_bank()
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        store.seed(bank)
        for g in bank.globals:  # every direction has a strategy with three steps on elementwise tasks
            local = next(loc.id for loc in bank.locals if loc.global_ == g.id)
            past_evidence(store, "elementwise", f"other-{g.id}", g.id, local)
        client = Reader()
        one_step(store, method, tmp_path, client)
    [prompt] = client.choices
    line = "On elementwise tasks (this task's operator family): 3 step(s), mean reward +1.00."
    assert (line in prompt) == (method == Method.HTAM)


@pytest.mark.parametrize("method", [Method.HTAM, Method.HTAM_NO_FAMILY])
def test_htam_scores_with_the_family_and_htam_no_family_pooled(method: Method, tmp_path: Path) -> None:
    bank = load_seed_bank()
    chosen = bank.globals[-1].id
    local = next(loc.id for loc in bank.locals if loc.global_ == chosen)
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        store.seed(bank)
        past_evidence(store, "elementwise", "other-elementwise", chosen, local)
        first = bank.globals[0].id
        past_evidence(store, "matmul", "some-gemm", first, next(loc.id for loc in bank.locals if loc.global_ == first))
        params = ScoringParams()
        by_family = {s.global_id: s.score for s in store.score([], params, "elementwise")}
        pooled = {s.global_id: s.score for s in store.score([], params)}
        assert by_family != pooled and by_family[chosen] > pooled[chosen]
        step = one_step(store, method, tmp_path)
        assert [t.family for t in store.get_tasks() if t.id == TASK] == ["elementwise"]  # recorded for every method
    assert step.scores == pytest.approx(by_family if method == Method.HTAM else pooled, abs=1e-12)


def test_a_strategy_record_is_shrunk_toward_the_pooled_record_by_the_family_evidence(tmp_path: Path) -> None:
    def loc(family: dict[str, Any] | None = None) -> Offer:
        return Offer.model_validate({"id": "x", "outcomes": {"attempts": 4, "mean_reward": 0.5}, "family": family})

    base = 0.5 * 4 / (4 + SHRINK)
    assert _record(loc()) == base  # htam-no-family: no family record
    assert _record(loc({"family": "norm", "attempts": 0, "reward_sum": 0.0})) == base  # none yet
    record = _record(loc({"family": "norm", "attempts": 3, "reward_sum": -3.0}))
    assert record == pytest.approx((-3.0 + SHRINK * base) / (3 + SHRINK))
    many = _record(loc({"family": "norm", "attempts": 10**9, "reward_sum": -(10**9)}))
    assert many == pytest.approx(-1.0, abs=1e-8)


def test_the_loop_fallback_ranks_by_the_same_conditioned_record(tmp_path: Path) -> None:
    bank = load_seed_bank()
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        store.seed(bank)
        chosen = bank.globals[-1].id
        local = next(loc.id for loc in bank.locals if loc.global_ == chosen)
        past_evidence(store, "elementwise", "other-elementwise", chosen, local)
        node = next(loc for loc in store.get_locals(chosen) if loc.id == local)
        pooled = LocalView.of(node)
        conditioned = LocalView.of(node, store.family_evidence("elementwise"))
        other = LocalView.of(node, store.family_evidence("matmul"))
    assert pooled.family is None and other.family is not None and other.family.attempts == 0
    assert other.shrunk_mean_reward(2.0) == pooled.shrunk_mean_reward(2.0) == pytest.approx(3 / 5)
    assert conditioned.family is not None and conditioned.family.attempts == 3
    assert conditioned.shrunk_mean_reward(2.0) == pytest.approx((3 + 2 * 3 / 5) / 5)
    assert _record(Offer.model_validate(conditioned)) == pytest.approx(conditioned.shrunk_mean_reward(SHRINK))
