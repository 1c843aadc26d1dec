"""The verdict table of docs/method.md: one function gives every step's reward and counters."""

from __future__ import annotations

import math

import pytest

from htam_graph.memory.outcome import FAILURE_COUNTER, STEP_VERDICTS, RewardBase, reward_base, step_outcome
from htam_graph.vocab import Verdict


@pytest.mark.parametrize(
    "best_before, speedup, reward",
    [
        (1.0, 0.5, 0.0),  # ok but slower than the run's best: no reward, no penalty
        (2.0, 2.0, 0.0),  # ok, equal
        (1.0, 1.5, math.log2(1.5)),
        (1.0, 8.0, 1.0),  # clipped
    ],
)
def test_an_ok_step_is_rewarded_by_its_gain_over_the_best(best_before, speedup, reward):
    outcome = step_outcome(Verdict.OK, best_before, max(best_before, speedup), speedup)
    assert outcome.reward == pytest.approx(reward)
    assert outcome.counters.successes == int(reward > 0)
    assert sum(outcome.counters.model_dump().values()) == int(reward > 0)


@pytest.mark.parametrize("verdict", sorted(FAILURE_COUNTER))
def test_every_failure_is_minus_one_and_moves_its_own_counter(verdict):
    outcome = step_outcome(verdict, 1.5, 1.5)
    assert outcome.reward == -1.0
    moved = {k: v for k, v in outcome.counters.model_dump().items() if v}
    assert moved == {FAILURE_COUNTER[verdict]: 1}


def test_a_rejected_candidate_can_never_score():
    """A cheat whose output compared equal and ran fast still gets -1 and no speedup."""
    with pytest.raises(ValueError, match="speedups come only from ok"):
        step_outcome(Verdict.REJECTED, 1.0, 4.0, speedup=4.0)
    assert step_outcome(Verdict.REJECTED, None, None).reward == -1.0


def test_the_step_verdicts_are_every_verdict_but_checked():
    assert set(Verdict) - STEP_VERDICTS == {Verdict.CHECKED}


@pytest.mark.parametrize(
    "base, speedup, reward",
    [
        (0.25, 0.3, math.log2(1.2)),  # faster than the fastest kernel, still below eager
        (0.25, 0.5, 1.0),  # twice the fastest
        (0.25, 0.2, 0.0),  # slower than it: no reward, no penalty
        (0.25, 1.5, 1.0),  # beats eager: clipped log2(1.5 / 0.25)
    ],
)
def test_with_a_base_the_gain_is_over_the_kernel_the_step_built_on(base, speedup, reward):
    """scoring.reward_from = fastest: while the reference is the best (1.0), the base is the
    run's fastest correct kernel."""
    outcome = step_outcome(Verdict.OK, 1.0, max(1.0, speedup), speedup, base_before=base)
    assert outcome.reward == pytest.approx(reward)
    assert outcome.counters.successes == int(reward > 0)


def test_a_base_above_the_best_is_refused_and_a_failure_is_minus_one_with_any_base():
    with pytest.raises(ValueError, match="must not exceed best_before"):
        step_outcome(Verdict.OK, 1.0, 1.0, 0.9, base_before=1.2)
    assert step_outcome(Verdict.INCORRECT, 1.0, 1.0, base_before=0.25).reward == -1.0


# reward_base(reward_from, best_before, built_on, deadband): the speedup of the kernel the step
# built on is the run's best, or while the reference (1.0) is the best, its fastest correct kernel.
@pytest.mark.parametrize(
    "best_before, built_on",
    [(1.0, 1.0), (1.0, 0.25), (1.5, 1.5)],  # the reference; the fastest kernel below it; a kernel that beat it
)
def test_with_best_the_base_is_the_runs_best(best_before, built_on):
    assert reward_base("best", best_before, built_on, 0.03) == RewardBase(base_before=None, deadband=None)


@pytest.mark.parametrize(
    "best_before, built_on, base_before",
    [
        (1.0, 0.25, 0.25),  # the fastest kernel, slower than the reference
        (1.0, 1.0, None),  # nothing correct yet: the reference's 1.0, the best itself
        (1.5, 1.5, None),  # a kernel beat the reference: HTAM's reward
    ],
)
def test_with_fastest_the_base_is_the_fastest_kernel_while_below_the_best(best_before, built_on, base_before):
    assert reward_base("fastest", best_before, built_on, 0.03) == RewardBase(base_before, None)
    if base_before is not None:  # what step_outcome then measures against: twice it earns +1
        assert step_outcome(Verdict.OK, best_before, best_before, 2 * base_before, base_before).reward == 1.0


@pytest.mark.parametrize("best_before, built_on", [(1.0, 0.25), (1.0, 1.0), (1.5, 1.5), (1.2, 1.2)])
def test_with_parent_the_base_is_the_kernel_built_on_with_the_deadband(best_before, built_on):
    base = reward_base("parent", best_before, built_on, 0.05)
    assert base == RewardBase(base_before=built_on, deadband=0.05)
    for speedup, reward in [(built_on / 2, -1.0), (built_on * 1.01, 0.0)]:  # signed; 0 within the dead-band
        assert step_outcome(Verdict.OK, best_before, max(best_before, speedup), speedup, *base).reward == reward


def test_an_unknown_reward_from_is_refused():
    with pytest.raises(ValueError, match="unknown reward_from"):
        reward_base("median", 1.0, 1.0, 0.03)  # type: ignore[arg-type]
