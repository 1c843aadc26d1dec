"""What one step's verdict writes into the memory: its reward and the counters it moves.

The whole reward rule lives here (docs/method.md, "Reward and counters"): `reward_base`
picks what an ok step's speedup is measured against (scoring.reward_from), and
`step_outcome` maps a verdict (and the run's best speedup before and after the step, and
that base) to the reward and the counters, so a rejected candidate can never score like a
correct one and every failure is counted under its own kind.
"""

from __future__ import annotations

import math
from typing import Annotated, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from htam_graph.config import RewardFrom
from htam_graph.vocab import Verdict

# Counts are stored as 64-bit integers (Neo4j's only integer type).
MAX_COUNT = 2**63 - 1
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]

# The counter each failing verdict moves. A load error (the file did not import or the
# constructor raised) is counted with compile failures: the candidate never ran a kernel.
FAILURE_COUNTER: dict[Verdict, str] = {
    Verdict.COMPILE_ERROR: "compile_failures",
    Verdict.LOAD_ERROR: "compile_failures",
    Verdict.INCORRECT: "incorrect",
    Verdict.REJECTED: "rejected",
    Verdict.TIMEOUT: "timeouts",
    Verdict.RUNTIME_ERROR: "runtime_errors",
    Verdict.NO_CANDIDATE: "generation_failures",
}
# Verdicts a step can end with: `checked` (static checks and a build, nothing run) says
# nothing about speed or correctness, so it never reaches the memory.
STEP_VERDICTS = frozenset({Verdict.OK, *FAILURE_COUNTER})


class Counters(BaseModel):
    """Outcome counters kept on every global, local and transition."""

    model_config = ConfigDict(allow_inf_nan=False)

    successes: Count = Field(0, description="ok and faster than the reward's base (reward > 0)")
    compile_failures: Count = Field(0, description="compile_error or load_error")
    incorrect: Count = 0
    rejected: Count = Field(0, description="a cheat check fired")
    timeouts: Count = 0
    runtime_errors: Count = 0
    generation_failures: Count = Field(0, description="no candidate was produced")

    def scaled(self, count: int) -> Counters:
        """These counters added `count` times (an edge seen at several prefix distances)."""
        return Counters(**{name: value * count for name, value in self.model_dump().items()})


COUNTER_NAMES: tuple[str, ...] = tuple(Counters.model_fields)


class Outcome(BaseModel):
    reward: float = Field(ge=-1.0, le=1.0)
    counters: Counters


class RewardBase(NamedTuple):
    """What a step's reward is measured against, as its StepUpdate records it."""

    base_before: float | None
    deadband: float | None


def reward_base(reward_from: RewardFrom, best_before: float, built_on: float, deadband: float) -> RewardBase:
    """The base of an ok step's reward (scoring.reward_from, docs/method.md), given the run's
    best speedup before the step and the speedup of the kernel the step built on (the run's
    best, or while the reference is the best, its fastest correct kernel).

    best (HTAM's reward): no base_before, so step_outcome measures against best_before.
    fastest: the kernel built on when it is slower than the best (the reference's 1.0), else
    none. parent: the kernel built on, with the dead-band (a signed reward, 0 within it).
    """
    if reward_from == "best":
        return RewardBase(None, None)
    if reward_from == "fastest":
        return RewardBase(built_on if 0 < built_on < best_before else None, None)
    if reward_from == "parent":
        return RewardBase(built_on, deadband)
    raise ValueError(f"unknown reward_from {reward_from!r}: best, fastest or parent")


def step_outcome(
    verdict: Verdict,
    best_before: float | None,
    best_after: float | None,
    speedup: float | None = None,
    base_before: float | None = None,
    deadband: float | None = None,
) -> Outcome:
    """Reward and counters of a step (HTAM's reward, docs/method.md).

    ok without a speedup (its time is untrusted: suspicious and not re-verified): r = 0, no
    counter, and best_after must be best_before.

    ok: r = clip(log2(speedup / base), -1, 1) when the candidate is faster than base, else
    0, where base is the run's best speedup before the step (HTAM's reward: r is then
    log2(best_after / best_before)), or `base_before` when given: the run's fastest correct
    kernel, slower than the reference, that the step built on (`reward_from = "fastest"`,
    docs/method.md). best_after must be max(best_before, speedup). Every other verdict:
    r = -1, one failure counter, and no speedup may be recorded. Raises ValueError on an
    inconsistent step (the caller's bug, or a tampered import file).

    With `deadband` (scoring.reward_from = parent): an ok step's reward is its signed gain over
    the kernel it modified, r = clip(log2(speedup / base_before), -1, 1), and 0 while |log2| is
    under the dead-band (timing noise); base_before is then required.
    """
    if verdict not in STEP_VERDICTS:
        raise ValueError(f"verdict {verdict.value!r} is not a step outcome; a step ends ok or with a failure")
    if deadband is None and base_before is not None and best_before is not None and base_before > best_before:
        raise ValueError(f"base_before {base_before} must not exceed best_before {best_before}")
    if verdict != Verdict.OK:
        if speedup is not None:
            raise ValueError(f"a {verdict.value} step has no speedup; speedups come only from ok verdicts")
        if best_before is not None and best_after is not None and best_after != best_before:
            raise ValueError(f"a {verdict.value} step cannot change the best speedup ({best_before} -> {best_after})")
        return Outcome(reward=-1.0, counters=Counters(**{FAILURE_COUNTER[verdict]: 1}))
    if best_before is None or best_after is None:
        raise ValueError("an ok step needs the run's best speedup before and after it")
    if speedup is None:
        # ok, but its time is not trusted (suspicious and not re-verified): no speedup, no
        # reward, no counter, and the run's best stays (docs/method.md, the verdict table)
        if best_after != best_before:
            raise ValueError(
                f"an ok step without a trusted speedup cannot change the best ({best_before} -> {best_after})"
            )
        return Outcome(reward=0.0, counters=Counters())
    if not math.isclose(best_after, max(best_before, speedup), rel_tol=1e-12):
        raise ValueError(f"best_after {best_after} must be max(best_before {best_before}, speedup {speedup})")
    if deadband is not None:
        if base_before is None:
            raise ValueError("a parent-relative reward needs the parent's speedup (base_before)")
        gain = math.log2(speedup / base_before)
        if abs(gain) < deadband:
            return Outcome(reward=0.0, counters=Counters())
        return Outcome(reward=max(-1.0, min(1.0, gain)), counters=Counters(successes=int(gain > 0)))
    base = best_before if base_before is None else base_before
    if speedup <= base:
        return Outcome(reward=0.0, counters=Counters())
    reward = max(-1.0, min(1.0, math.log2(speedup / base)))
    return Outcome(reward=reward, counters=Counters(successes=1))
