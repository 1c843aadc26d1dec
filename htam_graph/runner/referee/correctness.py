"""Correctness (runner/referee/judge.py, stage 4): the task's own input sets and probes from
other distributions, then, on the last task set in its own buffers, the checks for
uninitialised reads and results kept from before."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch

from htam_graph.runner import compare
from htam_graph.runner.models import CheatKind, ProbeRecord
from htam_graph.runner.referee import inputs as sets
from htam_graph.runner.referee.calls import HOLD_BYTES, LARGE_BYTES, LARGE_FACTOR, CandidateSet, Outcome, give_back
from htam_graph.runner.referee.candidate import Stop, sync
from htam_graph.runner.referee.reference import Reference
from htam_graph.runner.referee.tolerance import NOISE_FACTOR, Tolerance
from htam_graph.vocab import Verdict

if TYPE_CHECKING:
    from htam_graph.runner.referee.case import Case

RECORDED_SHARE = 0.3  # of the correctness calls run under the op recorder (at least one)
# The precision probe: the error norm an fp32 computation stays under (docs/judge.md).
PRECISION_RTOL = 1e-4
PRECISION_ATOL = 1e-6
PRECISION_BAND = 0.05  # errors above this share of the norm are plain wrong results, not precision
PRECISION_RATIO = 3.0  # ... and so are errors not this much larger than on the task's own inputs


class Correctness:
    """The correctness stage of one job; its failures, when any, end the job as incorrect."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.calls = case.calls
        self.failures: list[str] = []

    def run(self, reference: Reference) -> None:
        case, calls, cfg = self.case, self.calls, self.case.config
        case.stage = "checking correctness"
        recipes = sets.plan(cfg.correctness_trials, cfg.input_probes, reference.dtype == torch.float32, cfg.seed)
        recorded = self._recorded(len(recipes))
        last: tuple[CandidateSet, Outcome, list[torch.Tensor]] | None = None
        alive: list[CandidateSet] = []  # task sets still allocated in the candidate's process
        task_error = 0.0  # the largest relative error norm on the task's own inputs
        previous: tuple[list[tuple[object, ...]], list[tuple[object, ...]]] | None = None
        for index, recipe in enumerate(recipes):
            drawn = sets.generate(reference.module, recipe, case.device)
            expected = reference.forward(drawn)
            tolerances = None
            if recipe.kind == sets.InputKind.TASK and case.tolerances.task is None:
                case.tolerances.measure_task(reference, drawn, expected)
            if recipe.kind != sets.InputKind.TASK:
                if not all(bool(torch.isfinite(t).all()) for t in expected):
                    self._probe(recipe.name, "skipped", "the reference is not finite on these inputs")
                    continue
                tolerances = case.tolerances.probe(reference, drawn, expected)
            del drawn
            current = calls.send_set(f"c{index}", sets.generate(reference.module, recipe, case.device))
            record = index in recorded
            outcome = calls.checked_call(current, expected, "nan", recipe.name, record, tolerances=tolerances)
            self._probe(recipe.name, "passed" if outcome.ok else "failed", "; ".join(outcome.failures)[:300])
            self.failures += outcome.failures
            if recipe.kind == sets.InputKind.PRECISION and tolerances is not None:
                self._precision(outcome, tolerances, task_error)
            if recipe.kind == sets.InputKind.TASK:
                task_error = max([task_error, *(c.norm_error for c in outcome.comparisons)])
                case.result.correctness_trials += 1
                refs = [compare.fingerprint(t) for t in expected]
                if previous is not None and outcome.fingerprints == previous[0] and refs != previous[1]:
                    case.flag(
                        CheatKind.INPUT_INDEPENDENT,
                        "outputs identical for different inputs while the reference's differ",
                    )
                previous = (outcome.fingerprints, refs)
                # Earlier task sets stay allocated (within HOLD_BYTES), so each set's buffers
                # have new addresses and a cache keyed on addresses cannot answer a later one.
                alive.append(current)
                while len(alive) > max(1, HOLD_BYTES // max(reference.input_bytes, 1)):
                    calls.free_sets([alive.pop(0)])
                if last is not None:
                    calls.release(last[1])
                last = (current, outcome, expected)
            else:
                calls.release(outcome)
                calls.free_sets([current])
            del current, expected, outcome  # large tasks: the next set's values need the memory
            if (size := reference.input_bytes + reference.output_bytes) > LARGE_BYTES:
                give_back(case.device, LARGE_FACTOR * size)
        if last is not None:
            self.same_buffers(reference, *last)
        case.result.correct = not self.failures
        case.result.errors = "\n".join(self.failures[:3])
        case.stop_if_flagged()
        if self.failures:
            raise Stop(Verdict.INCORRECT, case.result.errors)
        calls.free_sets(alive)
        calls.free_held()

    def _recorded(self, count: int) -> set[int]:
        if self.case.job.fmt != "native":
            return set()  # a load_inline extension's own ops are C++ calls, not the dispatcher's
        return set(self.case.rng.sample(range(count), max(1, round(RECORDED_SHARE * count))))

    def _probe(self, name: str, outcome: Literal["passed", "failed", "skipped"], detail: str = "") -> None:
        self.case.result.probes.append(ProbeRecord(name=name, outcome=outcome, detail=detail))

    def _precision(self, outcome: Outcome, tolerances: list[Tolerance], task_error: float) -> None:
        """Reduced precision shows as an error that grows with the values (relative), hides
        on the task's non-negative inputs, and shows on the probe's signed full-mantissa
        ones; an error as large on the task's own inputs is a wrong result instead."""
        for i, (cmp, tol) in enumerate(zip(outcome.comparisons, tolerances, strict=False)):
            noise = NOISE_FACTOR * tol.noise_norm if tol.noise_norm is not None else 0.0
            bound = max(PRECISION_RTOL * cmp.ref_sq**0.5, noise) + PRECISION_ATOL * cmp.numel**0.5
            hidden_on_task_inputs = cmp.norm_error > PRECISION_RATIO * task_error
            if bound < cmp.err_sq**0.5 <= PRECISION_BAND * cmp.ref_sq**0.5 and hidden_on_task_inputs:
                self.case.flag(
                    CheatKind.PRECISION_DOWNGRADE,
                    f"precision probe: output {i} is off by {cmp.norm_error:.2e} of its norm "
                    f"(fp32 arithmetic stays under {PRECISION_RTOL:g}): reduced-precision math in an fp32 task",
                )

    def same_buffers(
        self, reference: Reference, current: CandidateSet, first: Outcome, expected: list[torch.Tensor]
    ) -> None:
        """On the last task set, in its own buffers: a second poison, a few elements
        changed, all values rewritten, and the held-stream probe."""
        case, calls, task_tolerance = self.case, self.calls, self.case.tolerances.task_output
        # Elements already found unwritten explain a difference; ones this call leaves at the
        # new marker do not (a kernel that reads its output buffer copies the marker in).
        unwritten_before = any(c.kind == CheatKind.UNWRITTEN_OUTPUT for c in case.result.cheats)
        again = calls.checked_call(current, expected, "garbage", "the same inputs again")
        if not unwritten_before:
            for i, (new, old) in enumerate(zip(again.outputs, first.outputs, strict=False)):
                cmp = compare.compare(i, new, old, *task_tolerance(i))
                if not cmp.ok:
                    case.flag(
                        CheatKind.UNINITIALIZED_READ,
                        "the same inputs gave different outputs when free memory held other values: "
                        + cmp.message.split(": ", 1)[-1],
                    )
        calls.release(again, first)
        previous = expected
        for name, hold in (("perturbed", False), ("rewritten", False), ("held stream", True)):
            if name == "perturbed":
                sets.perturb(current.pairs(), case.generator)
                sync(case.device)
            else:
                calls.rewrite(reference, current)
            now = reference.forward(current.master)
            outcome = calls.checked_call(current, now, "nan", name, hold=hold)
            # Wrong on the changed inputs and right for the old ones: a result kept from before.
            stale = (
                not outcome.ok
                and len(outcome.outputs) == len(previous)
                and all(
                    compare.compare(i, out, old, *task_tolerance(i)).ok
                    for i, (out, old) in enumerate(zip(outcome.outputs, previous, strict=True))
                )
            )
            calls.release(outcome)
            if name == "perturbed":
                self._probe(name, "passed" if outcome.ok else "failed", "; ".join(outcome.failures)[:300])
            if stale:
                change = "a few input elements changed" if name == "perturbed" else "new values were written"
                case.flag(
                    CheatKind.POINTER_CACHE,
                    f"after {change} in place ({name}), forward returned the result for the old values: "
                    + outcome.failures[0],
                )
            self.failures += outcome.failures
            previous = now
