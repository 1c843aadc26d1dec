"""An ok step whose time is not trusted (suspicious and not re-verified) earns nothing: no
speedup, reward 0, no counter, and the run's best stays (docs/method.md, the verdict table).
Through the real loop and memory, with the fake backend of test_reward_base."""

from __future__ import annotations

from pathlib import Path

import pytest

from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.runs import create_run
from htam_graph.memory.models import RunConfig, StepUpdate
from htam_graph.memory.outcome import step_outcome
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.runner.models import EvalResult
from htam_graph.tasks import Task, resolve_task
from htam_graph.vocab import Method, Verdict
from tests.loop.test_reward_base import Scripted, Writer

SUSPICIOUS = {2: False, 3: True}  # kernel n -> verified; kernel 2 is suspicious and not verified


class Suspicious(Scripted):
    def evaluate(self, task: Task, source: str) -> EvalResult:
        result = super().evaluate(task, source)
        n = int(source.split("\n", 1)[0].removeprefix("# kernel "))
        if n in SUSPICIOUS:
            speedup = 30.0
            return result.model_copy(
                update={"speedup_eager": speedup, "suspicious": True, "suspicious_reason": "speedup above 10x",
                        "verified": SUSPICIOUS[n]}
            )  # fmt: skip
        return result


def test_an_untrusted_ok_step_gets_no_speedup_no_reward_and_keeps_the_best(tmp_path: Path) -> None:
    task = resolve_task("level1/19_ReLU")
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        store.seed(load_seed_bank())
        manifest, folder = create_run(
            out=tmp_path / "runs", task=task, method=Method.HTAM, seed=0, config=RunConfig(steps=4),
            llm="writer:fake", evaluator="scripted", device=Scripted.device, target=Scripted.target, run_id="untrusted",
        )  # fmt: skip
        summary = Optimizer(
            store=store, client=Writer(), task=task, evaluator=Suspicious(), manifest=manifest, folder=folder
        ).run()
        steps = sorted(store.export().steps, key=lambda s: s.index)
        globals_ = {g.id: g for g in store.get_globals()}
    assert [s.verdict for s in steps] == [Verdict.OK] * 4
    untrusted, verified = steps[1], steps[2]
    assert untrusted.speedup is None and untrusted.reward == 0.0
    assert untrusted.best_after == untrusted.best_before == 1.0
    assert verified.speedup == 30.0 and verified.best_after == 30.0 and verified.reward == 1.0
    assert summary.best_speedup == 30.0
    assert sum(g.successes for g in globals_.values()) == 1  # the verified step only


def test_the_verdict_table_row_of_an_untrusted_ok_step() -> None:
    outcome = step_outcome(Verdict.OK, 1.5, 1.5, None)
    assert outcome.reward == 0.0 and not any(outcome.counters.model_dump().values())
    for base, deadband in ((None, None), (1.2, 0.03)):
        assert step_outcome(Verdict.OK, 1.5, 1.5, None, base, deadband).reward == 0.0
    with pytest.raises(ValueError, match="cannot change the best"):
        step_outcome(Verdict.OK, 1.0, 2.0, None)
    with pytest.raises(ValueError, match="disagrees"):
        StepUpdate(id="s", run_id="r", task_id="t", index=0, verdict=Verdict.OK, best_before=1.0, best_after=1.0,
                   reward=0.5)  # fmt: skip
