"""What a step's reward is measured against (scoring.reward_from, docs/method.md "Reward and
counters"): the run's best speedup (HTAM's reward, the default), or, with `fastest`, the
run's fastest correct kernel while none beats the reference. Through the real loop and
memory, with a fake backend that writes a kernel per step and a fake judge that times the
kernels as scripted."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, ClassVar

import pytest

from htam_graph.config import ScoringParams
from htam_graph.llm.base import Completion, LLMClient, Prompt, T
from htam_graph.loop.evaluators import HoldsNothing
from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.records import StepRecord
from htam_graph.loop.runs import create_run
from htam_graph.memory.models import RunConfig, StepUpdate
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.runner.models import EvalResult, Timing
from htam_graph.tasks import Task, resolve_task
from htam_graph.vocab import Method, Verdict

# Each step's speedup over eager: two kernels below eager, a faster one still below, one
# that beats eager, one slower than it.
SPEEDUPS = [0.125, 0.25, 0.2, 1.5, 1.2]


class Writer(LLMClient):
    """Answers every step with a new kernel file (its number in a comment)."""

    name: ClassVar[str] = "writer"

    def __init__(self) -> None:
        self.model, self.written = "fake", 0

    def check(self) -> None:
        pass

    def complete(self, prompt: Prompt, max_tokens: int | None = None) -> Completion:
        if prompt.template != "generate":
            return Completion(text="A note on the step.", model=self.model)
        self.written += 1
        code = f"# kernel {self.written}\nclass ModelNew:\n    pass\n"
        return Completion(text=f"```python\n{code}```", model=self.model)

    def structured(self, prompt: Prompt, schema: type[T], max_tokens: int | None = None) -> tuple[T, Completion]:
        assert prompt.context is not None
        answer: dict[str, Any] = {"local_id": prompt.context.locals[0].id}
        return schema.model_validate(answer), Completion(text=str(answer), model=self.model)


class Scripted(HoldsNothing):
    """Judges the n-th kernel ok at SPEEDUPS[n - 1] over eager."""

    label, device, target = "scripted", "scripted timings (no GPU)", "a GPU"

    def evaluate(self, task: Task, source: str) -> EvalResult:
        n = int(source.split("\n", 1)[0].removeprefix("# kernel "))
        ms = 1.0 / SPEEDUPS[n - 1]
        return EvalResult(
            task_id=task.id,
            task_sha256=hashlib.sha256(task.source.encode()).hexdigest(),
            candidate_sha256=hashlib.sha256(source.encode()).hexdigest(),
            candidate_format="native",
            verdict=Verdict.OK,
            compiled=True,
            correct=True,
            candidate=Timing(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, trials=1),
            reference_eager=Timing(median_ms=1.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, trials=1),
            speedup_eager=SPEEDUPS[n - 1],
            device=self.device,
        )


def run(reward_from: str, tmp: Path) -> tuple[list[StepRecord], list[StepUpdate], dict[str, float]]:
    task = resolve_task("level1/19_ReLU")
    scoring = ScoringParams(reward_from=reward_from)
    with SQLiteStore(tmp / "memory.sqlite") as store:
        store.seed(load_seed_bank())
        manifest, folder = create_run(
            out=tmp / "runs", task=task, method=Method.HTAM, seed=0,
            config=RunConfig(steps=len(SPEEDUPS), scoring=scoring), llm="writer:fake", evaluator="scripted",
            device=Scripted.device, target=Scripted.target, run_id=f"reward-{reward_from}",
        )  # fmt: skip
        Optimizer(store=store, client=Writer(), task=task, evaluator=Scripted(), manifest=manifest, folder=folder).run()
        stored = store.export()
    records = [StepRecord.model_validate_json(p.read_text()) for p in sorted((folder / "steps").glob("*.json"))]
    rewards: dict[str, float] = {}
    for step in stored.steps:
        if step.global_id is not None:
            rewards[step.global_id] = rewards.get(step.global_id, 0.0) + step.reward
    return records, stored.steps, rewards


def test_by_default_a_step_below_eager_earns_nothing(tmp_path: Path) -> None:
    records, stored, _ = run("best", tmp_path)
    assert [r.speedup for r in records] == SPEEDUPS
    assert [s.base_before for s in stored] == [None] * len(SPEEDUPS)
    assert [s.reward for s in sorted(stored, key=lambda s: s.index)] == pytest.approx(
        [0.0, 0.0, 0.0, math.log2(1.5), 0.0]
    )


def test_with_fastest_progress_below_eager_is_rewarded(tmp_path: Path) -> None:
    records, stored, rewards = run("fastest", tmp_path)
    steps = sorted(stored, key=lambda s: s.index)
    # step 0: nothing to build on yet; 1: twice the fastest (0.125); 2: slower than it;
    # 3: beats eager, measured against the fastest (0.25); 4: the best is now a kernel: HTAM's reward
    assert [s.base_before for s in steps] == [None, 0.125, 0.25, 0.25, None]
    assert [s.reward for s in steps] == pytest.approx([0.0, 1.0, 0.0, 1.0, 0.0])  # step 3: log2(1.5 / 0.25), clipped
    assert [s.best_before for s in steps] == [1.0, 1.0, 1.0, 1.0, 1.5]  # the run's best is unchanged
    assert [r.best_after for r in records] == [1.0, 1.0, 1.0, 1.5, 1.5]
    assert sum(s.reward for s in steps) == pytest.approx(sum(rewards.values()))  # what the memory holds
    # The record carries its base: an import recomputes the same reward, and refuses another.
    again = StepUpdate.model_validate(steps[1].model_dump())
    assert again.reward == 1.0
    with pytest.raises(ValueError, match="disagrees"):
        StepUpdate.model_validate({**steps[1].model_dump(), "base_before": None})
    with pytest.raises(ValueError, match="must not exceed best_before"):
        StepUpdate.model_validate({**steps[1].model_dump(), "base_before": 1.2, "reward": None})
