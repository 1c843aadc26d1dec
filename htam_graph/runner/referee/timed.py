"""The timed runs (runner/referee/judge.py, stage 5): the candidate's process times its own
trials, one per message; before each the referee rewrites the inputs in place, after some it
compares the outputs; its own clock must agree with the reported events."""

from __future__ import annotations

import statistics
import time
from collections import deque
from typing import TYPE_CHECKING

from htam_graph.runner import compare, timing
from htam_graph.runner.ipc import ProtocolViolation
from htam_graph.runner.models import CheatKind, Timing
from htam_graph.runner.protocol import RemoteTensor, Trial, TrialDone, Warmed, Warmup
from htam_graph.runner.referee import inputs as sets
from htam_graph.runner.referee.calls import CandidateSet, extent, overlaps
from htam_graph.runner.referee.reference import Reference, timing_set_count

if TYPE_CHECKING:
    from htam_graph.runner.referee.case import Case

RECORDED_TIMED = 2  # untimed, recorded calls slipped in among the timed trials
# The referee's clock: per-trial time the candidate's reported events do not explain.
WALL_SLACK_MS = 1.0
WALL_SLACK_SHARE = 0.25


class TimedRuns:
    """The timing stage of one job: the candidate's timing, speedups, roofline position."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.calls = case.calls

    def run(self, reference: Reference, eager: Timing, compiled: Timing | None) -> None:
        case, calls, cfg = self.case, self.calls, self.case.config
        case.stage = "the timed runs"
        masters = [sets.task_inputs(reference.module, sets.secret_seed(), case.device)]
        masters += [
            sets.task_inputs(reference.module, sets.secret_seed(), case.device)
            for _ in range(1, timing_set_count(masters[0]))
        ]
        timing_sets = [calls.send_set(f"t{i}", m) for i, m in enumerate(masters)]
        keys = [s.key for s in timing_sets]
        warm = case.request(Warmup(keys=keys, warmup=cfg.warmup), Warmed)
        case.health(warm.health, "warming up")
        case.stop_if_flagged()
        gate = timing.gate_ms(warm.host_ms)
        n = len(timing_sets)
        tail = set(range(max(0, cfg.trials - n), cfg.trials))  # the last output of each input set
        checked = tail | set(case.rng.sample(range(cfg.trials), min(cfg.timed_checks, cfg.trials)))
        recorded = (
            set(case.rng.sample(range(cfg.trials), min(RECORDED_TIMED, cfg.trials)))
            if case.job.fmt == "native"
            else set()
        )
        live: deque[list[tuple[int, int]]] = deque(maxlen=n)  # outputs the candidate's process holds
        trials, walls = [], []
        for i in range(cfg.trials):
            current = timing_sets[i % n]
            calls.rewrite(reference, current)  # fresh in full before every trial, outside the timed region
            if i in recorded:
                expected = reference.forward(current.master)
                outcome = calls.checked_call(current, expected, None, f"timed-phase call {i}", record=True)
                calls.release(outcome)
                if not outcome.ok:
                    case.flag(
                        CheatKind.BEHAVIOUR_CHANGE,
                        f"an untimed call among the timed runs returned a wrong result: {outcome.failures[0]}",
                    )
                calls.rewrite(reference, current)  # the trial must not see what the untimed call saw
            began = time.perf_counter()
            done = case.request(Trial(index=i, key=current.key, gate_ms=gate), TrialDone)
            walls.append((time.perf_counter() - began) * 1e3)
            if done.index != i:
                raise ProtocolViolation(f"a reply for trial {done.index} to trial {i}")
            trials.append(timing.Trial(None, done.ms, done.synced_ms, done.host_ms))
            extents = self._trial_outputs(i, done, current, reference if i in checked else None, live)
            live.append(extents)
        candidate = timing.summarize(trials, n, walls)
        case.result.candidate = candidate
        self._clock_checks(candidate, trials, walls, gate, warm.latency_ms)
        case.stop_if_flagged()
        case.result.reference_eager, case.result.reference_compile = eager, compiled
        case.result.speedup_eager = _speedup(eager, candidate)
        case.result.speedup_compile = _speedup(compiled, candidate)
        case.position(reference, candidate)

    def _trial_outputs(
        self,
        index: int,
        done: TrialDone,
        current: CandidateSet,
        reference: Reference | None,
        live: deque[list[tuple[int, int]]],
    ) -> list[tuple[int, int]]:
        case = self.case
        remotes = []
        for i, out in enumerate(done.outputs):
            if not isinstance(out, RemoteTensor):
                case.flag(CheatKind.LAZY_OUTPUT, f"timed run {index}: output {i} is a {out.type_name}")
                case.stop_if_flagged()
            else:
                remotes.append(out)
        extents = [extent(r) for r in remotes]
        for i, span in enumerate(extents):
            if overlaps(span, (e for held in live for e in held)):
                case.flag(
                    CheatKind.PERSISTENT_OUTPUT,
                    f"timed run {index}: output {i} is memory an earlier run returned and the caller still holds",
                )
            if overlaps(span, current.extents):
                case.flag(CheatKind.INPUT_ALIAS, f"timed run {index}: output {i} shares storage with an input")
        if reference is not None:
            link = self.calls.link
            expected = reference.forward(current.master)
            views = [link.tensor(r) for r in remotes]
            wrong = (
                [f"forward returned {len(views)} outputs, the reference {len(expected)}"]
                if len(views) != len(expected)
                else [
                    c.message
                    for i, (v, e) in enumerate(zip(views, expected, strict=True))
                    if not (c := compare.compare(i, v, e, *case.tolerances.task_output(i))).ok
                ]
            )
            if wrong:
                case.flag(
                    CheatKind.BEHAVIOUR_CHANGE,
                    f"timed run {index} returned a wrong result after the checked calls were right: {wrong[0]}",
                )
            for i, (master, buffer) in enumerate(current.pairs()):
                if not compare.bitwise_equal(master, buffer):
                    case.flag(CheatKind.INPUT_MUTATION, f"timed run {index}: forward modified input {i}")
            link.release(remotes)
        return extents

    def _clock_checks(
        self, candidate: Timing, trials: list[timing.Trial], walls: list[float], gate: float, latency_ms: float
    ) -> None:
        hidden = timing.hidden_work_ms(trials, latency_ms)
        if hidden > timing.hidden_work_tolerance(candidate):
            self.case.flag(
                CheatKind.SIDE_STREAM,
                f"timed runs: work went on {hidden:.3f} ms past the timed stream's end event "
                "(seen after a device-wide synchronize)",
            )
        unexplained = statistics.median(
            wall - self.case.judge.flush_ms - max(gate + t.ms, t.host_ms) for wall, t in zip(walls, trials, strict=True)
        )
        if unexplained > WALL_SLACK_MS + WALL_SLACK_SHARE * candidate.median_ms:
            self.case.flag(
                CheatKind.TIMER_PATCH,
                f"timed runs: the referee's clock saw {unexplained:.3f} ms per run more than the reported "
                f"{candidate.median_ms:.3f} ms explain (the events were not what they timed)",
            )


def _speedup(reference: Timing | None, candidate: Timing | None) -> float | None:
    if reference is None or candidate is None or candidate.cost_ms <= 0:
        return None
    return reference.cost_ms / candidate.cost_ms
