"""The HTAM optimization loop: one run of one task over T steps (docs/method.md).

Each step: state synthesis, a direction (global) chosen by the method, a strategy (local)
chosen by the LLM among the global's locals, the next candidate written by the LLM and
judged by the evaluator (one repair after a compile error), a reflection, and the memory
update in one transaction. A step is written to the run folder before it reaches the
memory, and the memory ignores a step it already holds, so a run killed at any point
resumes without redoing or double-counting a finished step.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput
from htam_graph.llm.base import InvalidAnswer, LLMClient, Prompt, RecordedChoice, Usage
from htam_graph.llm.request import Request
from htam_graph.llm.script import Script, ScriptEntry
from htam_graph.loop.evaluators import CandidateEvaluator, hardware_of, reference_of
from htam_graph.loop.extract import extract_candidate
from htam_graph.loop.records import (
    Attempt,
    CallRecord,
    RunManifest,
    RunSummary,
    StepRecord,
    TrajectoryStep,
    atomic_write,
)
from htam_graph.loop.runs import task_context
from htam_graph.loop.state import (
    Candidate,
    GlobalView,
    LastCandidate,
    LocalView,
    PathEntry,
    ReferenceTiming,
    RetrievedStep,
    StepState,
    TaskContext,
    TransitionView,
    code_diff,
)
from htam_graph.memory.models import (
    CHANGE_MAX,
    MAX_TEXT_LENGTH,
    GlobalScore,
    SimilarStep,
    StepUpdate,
    TaskRecord,
    best_step,
    utcnow,
)
from htam_graph.memory.outcome import reward_base
from htam_graph.memory.store import MemoryStore
from htam_graph.policy.policy import SoftmaxPolicy, with_probabilities
from htam_graph.runner.models import EvalResult, Feedback
from htam_graph.tasks import Task
from htam_graph.templating import Rendered, render
from htam_graph.vocab import MAX_DISTANCE, Method, Verdict

log = logging.getLogger(__name__)

REFERENCE = "reference.json"  # the reference's timings, as the judge gave them, in the run folder
START = "start.json"  # the generator's start kernel and its judgement, in the run folder
CODE_MAX_TOKENS = 16000
CHOICE_MAX_TOKENS = 1000
NOTE_MAX_TOKENS = 300
FLAT_TOP_K = 5  # past steps the flat-memory baseline shows in the prompts
FLAT_RETRIEVE = 256  # past steps the flat-memory baseline weighs to choose a strategy
HIERARCHY_FREE_LOCALS = 8  # locals htam-no-hierarchy offers, ranked by their own record
REPAIRABLE = {Verdict.COMPILE_ERROR}

# Which methods choose what (docs/method.md, "Methods").
SCORED = {Method.HTAM, Method.HTAM_NO_PREFIX, Method.HTAM_NO_LOCAL, Method.HTAM_NO_FAMILY}
CHOOSES_LOCAL = {Method.HTAM, Method.HTAM_NO_PREFIX, Method.HTAM_NO_HIERARCHY, Method.HTAM_NO_FAMILY}
# The methods whose scores and strategy records are conditioned on the task's operator family
# (docs/method.md, "Conditioning on the operator family"): HTAM and the ablations of its other
# parts; htam-no-family reads the pooled evidence only.
BY_FAMILY = {Method.HTAM, Method.HTAM_NO_PREFIX, Method.HTAM_NO_LOCAL, Method.HTAM_NO_HIERARCHY}
WITHOUT_MEMORY = {Method.VANILLA, Method.FEEDBACK, Method.FLAT, Method.RANDOM, Method.EXPERT}
WITH_MEMORY = set(Method) - WITHOUT_MEMORY  # the memory bank in the prompts


DECLINE = "decline"  # the strategy choice's answer when no offered strategy fits (issue 34, item 6)
# Directions aimed at memory-bound kernels (their intent says so): not offered to a language
# model for a task whose arithmetic intensity makes it compute-bound.
MEMORY_BOUND_DIRECTIONS = frozenset({"memory_access"})
# FLOPs per byte moved above which a task is compute-bound: fp32 CUDA-core peak over memory
# bandwidth is about 14 on the H200 and 10 on the A100 (a GEMM of level 2 is in the hundreds).
COMPUTE_BOUND_INTENSITY = 10.0


class LocalChoice(BaseModel):
    """Choose the one strategy to apply to the kernel in this optimization step, or decline
    them all when none fits this task."""

    local_id: str = Field(description="the chosen strategy's id, or `decline` when none of them fits this task")
    reason: str = Field("", description="one sentence: why the strategy fits this kernel now, or why none does")


def choice_schema(ids: list[str]) -> type[LocalChoice]:
    """LocalChoice with the offered ids (and `decline`) as the id's enum."""
    allowed: Any = Literal.__getitem__((*ids, DECLINE))
    return create_model(
        "LocalChoice",
        __base__=LocalChoice,
        __doc__=LocalChoice.__doc__,
        local_id=(allowed, Field(description=LocalChoice.model_fields["local_id"].description)),
    )


class Direction(BaseModel):
    """What the method chose for this step."""

    glob: GlobalView | None = None
    local: LocalView | None = None
    local_fallback: bool = False
    scores: list[GlobalScore] = Field(default_factory=list)
    offered: list[str] | None = None  # the globals the backend could act on; None: all
    transitions: list[TransitionView] = Field(default_factory=list)
    choice_reason: str = ""  # the model's reason for its strategy choice (or for declining)
    declined: list[str] = Field(default_factory=list)  # the strategies offered and declined
    retrieved: list[RetrievedStep] = Field(default_factory=list)


def hierarchy_free_locals(
    locals_: list[LocalView], alpha: float, rng: random.Random, k: int = HIERARCHY_FREE_LOCALS
) -> list[LocalView]:
    """htam-no-hierarchy's offer: the k locals of all globals with the highest shrunk mean
    reward, ties in a seeded random order (on a fresh memory every local ties at 0, and a
    fixed order would offer the same k strategies at every step of every run)."""
    shuffled = list(locals_)
    rng.shuffle(shuffled)
    return sorted(shuffled, key=lambda v: -v.shrunk_mean_reward(alpha))[:k]


class Optimizer:
    """One run. `observe` is called after every finished step (the CLI's live view)."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        client: LLMClient,
        evaluator: CandidateEvaluator,
        task: Task,
        manifest: RunManifest,
        folder: Path,
        max_cost: float | None = None,
        observe: Callable[[StepRecord, RunSummary], None] | None = None,
        context: TaskContext | None = None,
    ) -> None:
        """`context`: the task's dtype, shapes, roofline counts and operator family when the
        caller has them already (task_context(task) otherwise)."""
        self.store, self.client, self.evaluator = store, client, evaluator
        self.task, self.manifest, self.folder = task, manifest, folder
        self.context = context if context is not None else task_context(task)
        self.family = self.context.family  # recorded with the task, whatever the method
        by_family = manifest.run.method in BY_FAMILY and manifest.run.config.scoring.by_family
        self.condition_on = self.family if by_family else None
        self.shape_class = self.context.shape_class  # recorded with the task, whatever the method
        by_shape = by_family and manifest.run.config.scoring.by_shape
        self.shape_on = self.shape_class if by_shape and self.family is not None else None
        self.run_record = manifest.run
        self.method = self.run_record.method
        self.params: ScoringParams = self.run_record.config.scoring
        self.max_cost = max_cost
        self.observe = observe
        self.policy = SoftmaxPolicy(self.run_record.seed, self.run_record.id, self.params.tau)
        self.steps: list[StepRecord] = []
        self.start: Attempt | None = None  # the generator's start kernel, judged once (start.json)
        self.reference: ReferenceTiming | None = None  # the time to beat (reference.json)
        self._calls: list[CallRecord] = []  # of the step in progress
        self._step_state: StepState | None = None  # of the step in progress
        self._shared: Rendered | None = None  # its rendering, the same in every call of the step
        self._static: list[Rendered] | None = None  # the run's prefix after the system text

    @property
    def planned(self) -> int:
        return 1 if self.method == Method.VANILLA else self.run_record.config.steps

    # -- the run ------------------------------------------------------------------------
    def run(self) -> RunSummary:
        self.store.start_run(
            self.run_record,
            TaskRecord(
                id=self.task.id,
                name=self.task.name,
                sha256=self.task.sha256,
                family=self.family,
                shape_class=self.shape_class,
            ),
        )
        self.steps = load_steps(self.folder)
        self.start = self._start_kernel()
        self.reference = self._reference()
        for done in self.steps:  # a step persisted just before a kill may not have reached the memory
            self.store.record_step(done.update)
        if self.steps:
            self.client.resume(_calls_per_template(self.steps))
        stopped = "done"
        for index in range(len(self.steps), self.planned):
            if self.max_cost is not None and (self.usage().cost_usd or 0.0) >= self.max_cost:
                stopped = f"max cost ${self.max_cost:g} reached"
                break
            record = self._step(index)
            self._persist(record)
            self.store.record_step(record.update)
            self.steps.append(record)
            if self.observe:
                self.observe(record, self.summary("running"))
        summary = self.summary(stopped)
        atomic_write(self.folder / "trajectory.json", summary.model_dump_json(indent=1))
        return summary

    def _start_kernel(self) -> Attempt | None:
        """The generator's start kernel and its judgement: from start.json when the run judged it
        before, else judged now and written there (docs/method.md, "One optimization run")."""
        path = self.folder / START
        if path.exists():
            return Attempt.model_validate_json(path.read_text())
        source = self.client.start_kernel(self.task.source)
        if source is None:
            return None
        start = Attempt(source=source, result=self.evaluator.evaluate(self.task, source))
        atomic_write(path, start.model_dump_json(indent=1))
        return start

    def _reference(self) -> ReferenceTiming | None:
        """The reference's timings: from reference.json, else from a result the run holds,
        else asked of the evaluator (a reference-only job on the GPU), and written there, so
        step 1's prompt states the time to beat (issue 34, item 5)."""
        path = self.folder / REFERENCE
        if path.exists():
            return ReferenceTiming.of(EvalResult.model_validate_json(path.read_text()))
        held = [self.start] if self.start is not None else []
        held += [attempt for step in self.steps for attempt in step.attempts]
        result = next((a.result for a in held if a.result is not None and a.result.reference_eager), None)
        if result is None:
            result = reference_of(self.evaluator, self.task)
        if result is None or result.reference_eager is None:
            return None
        atomic_write(path, result.model_dump_json(indent=1))
        return ReferenceTiming.of(result)

    def _start_candidate(self) -> Candidate | None:
        """The start kernel as a candidate to build on, when it was judged correct."""
        speedup = self._start_speedup()
        if self.start is None or speedup is None:
            return None
        return Candidate(step_index=None, source=self.start.source, speedup=speedup, feedback=_feedback(self.start))

    def _start_speedup(self) -> float | None:
        result = self.start.result if self.start is not None else None
        return result.speedup_eager if result is not None and result.verdict == Verdict.OK else None

    def usage(self) -> Usage:
        total = Usage()
        for step in self.steps:
            total = total + step.usage
        return total

    def summary(self, stopped: str) -> RunSummary:
        best = best_step(self.steps)
        return RunSummary(
            run_id=self.run_record.id,
            task_id=self.task.id,
            method=self.method,
            evaluator=self.manifest.evaluator,
            device=self.manifest.device,
            folder=str(self.folder),
            steps_done=len(self.steps),
            steps_planned=self.planned,
            best_speedup=best.speedup if best is not None else None,
            best_step=best.index if best is not None else None,
            correct=best is not None,
            usage=self.usage(),
            stopped=stopped,
            trajectory=[
                TrajectoryStep(
                    index=s.index,
                    global_id=s.global_id,
                    local_id=s.local_id,
                    verdict=s.verdict,
                    speedup=s.speedup,
                    reward=s.update.reward,
                    best_after=s.best_after,
                    cost_usd=s.usage.cost_usd,
                    note=s.note,
                    input_tokens=s.usage.input_tokens,
                    cache_read_tokens=s.usage.cache_read_tokens,
                    cache_write_tokens=s.usage.cache_write_tokens,
                    output_tokens=s.usage.output_tokens,
                    events=s.events(),
                )
                for s in self.steps
            ],
            events=_sum_events(s.events() for s in self.steps),
        )

    # -- one step -----------------------------------------------------------------------
    def _step(self, index: int) -> StepRecord:
        started = utcnow()
        self._calls = []
        state = self._state(index)
        direction = self._direction(state)
        attempts = [self._generate(state, direction)]
        first = attempts[0]
        if first.result is not None and first.result.verdict in REPAIRABLE and first.source is not None:
            attempts.append(self._repair(state, first.source, first.result))
        final = attempts[-1]
        feedback = _feedback(final)
        best_before = state.best.speedup
        speedup = feedback.speedup_eager if feedback.verdict == Verdict.OK and _trusted(final.result) else None
        best_after = max(best_before, speedup) if speedup is not None else best_before
        # what the reward is measured against (memory/outcome.py holds the whole reward rule)
        base_before, deadband = reward_base(
            self.params.reward_from, best_before, state.base.speedup, self.params.deadband
        )
        note = self._reflect(direction, final, feedback, best_before, best_after)
        update = StepUpdate(
            id=f"{self.run_record.id}:{index}",
            run_id=self.run_record.id,
            task_id=self.task.id,
            index=index,
            prefix=self._prefix() if direction.glob is not None else [],
            global_id=direction.glob.id if direction.glob else None,
            local_id=direction.local.id if direction.local else None,
            verdict=feedback.verdict,
            candidate_sha256=_sha256(final.source) if final.source is not None else None,
            parent_id=f"{self.run_record.id}:{state.best.step_index}" if state.best.step_index is not None else None,
            parent_sha256=_sha256(self._parent_source(state)),
            change=_change(self._parent_source(state), final.source),
            speedup=speedup,
            best_before=best_before,
            best_after=best_after,
            base_before=base_before,
            deadband=deadband,
            error_class=_error_class(final.result),
            note=note,
            choice_reason=direction.choice_reason[:MAX_TEXT_LENGTH],
            declined=direction.declined,
            scores={s.global_id: s.score for s in direction.scores},
        )
        return StepRecord(
            index=index,
            started_at=started,
            scores=update.scores,
            probabilities={s.global_id: s.probability or 0.0 for s in direction.scores},
            offered=direction.offered,
            local_fallback=direction.local_fallback,
            calls=self._calls,
            attempts=attempts,
            update=update,
        )

    def _state(self, index: int) -> StepState:
        best_step = max(
            (s for s in self.steps if s.verdict == Verdict.OK and s.best_after > s.best_before),
            key=lambda s: s.best_after,
            default=None,
        )
        last = self.steps[-1] if self.steps else None
        best = Candidate(step_index=None, source=None, speedup=1.0, feedback=None)
        start = self._start_candidate()
        if best_step is not None:
            best = Candidate(
                step_index=best_step.index,
                source=best_step.final.source,
                speedup=best_step.best_after,
                feedback=_feedback(best_step.final),
            )
        elif start is not None and start.speedup > 1.0:
            best = start  # the start kernel beats the reference: steps must beat it
        fastest = None
        if best.source is None:  # while the reference is the best, a backend may still build on the fastest kernel
            correct = [
                Candidate(
                    step_index=s.index, source=s.final.source, speedup=s.speedup or 0.0, feedback=_feedback(s.final)
                )
                for s in self.steps
                if s.verdict == Verdict.OK and s.speedup is not None
            ]
            fastest = max([*([start] if start is not None else []), *correct], key=lambda c: c.speedup, default=None)
        base = best if best.source is not None else fastest
        last_candidate = None  # the last candidate beside its feedback, unless it is the base shown
        if last is not None and last is not best_step and (base is None or base.step_index != last.index):
            last_candidate = LastCandidate(
                step_index=last.index,
                source=last.final.source,
                diff=code_diff(base.source if base is not None else None, last.final.source),
                feedback=_feedback(last.final),
            )
        state = StepState(
            method=self.method,
            run_id=self.run_record.id,
            task=self.context,
            step_index=index,
            steps=self.planned,
            best=best,
            fastest=fastest,
            last=_feedback(last.final) if last is not None and last is not best_step else None,
            last_candidate=last_candidate,
            path=[PathEntry.of(s.update) for s in self.steps],
            reference=self.reference,
        )
        self._step_state, self._shared = state, render("step_state", state=state)
        return state

    def _prefix(self) -> list[str]:
        """The run's chosen globals, most recent first (p_1 first)."""
        chosen = [s.global_id for s in reversed(self.steps) if s.global_id is not None]
        return chosen[:MAX_DISTANCE]

    # -- direction ------------------------------------------------------------------------
    def _direction(self, state: StepState) -> Direction:
        """The method's choice; a replayed run (a script that recorded its path) takes the
        recorded one, so the replay follows the run whatever the memory or the run id."""
        recorded = self.client.recorded_choice(state.step_index)
        direction = self._choose_direction(state, recorded)
        if recorded is None or recorded.global_id is None:
            return direction
        globals_ = {g.id: g for g in self.store.get_globals()}
        if direction.glob is None or direction.glob.id != recorded.global_id:
            if recorded.global_id not in globals_:
                raise BadInput(
                    f"script step {state.step_index + 1}: no global {recorded.global_id!r} in this memory",
                    option="--script",
                    value=recorded.global_id,
                )
            direction.glob = GlobalView.of(globals_[recorded.global_id])
        if recorded.local_id is not None and (direction.local is None or direction.local.id != recorded.local_id):
            views = {loc.id: LocalView.of(loc) for loc in self.store.get_locals(recorded.global_id)}
            if recorded.local_id not in views:
                raise BadInput(
                    f"script step {state.step_index + 1}: no local {recorded.local_id!r} in this memory",
                    option="--script",
                    value=recorded.local_id,
                )
            direction.local = views[recorded.local_id]
        return direction

    def _shape_cell(self) -> str | None:
        """The shape class this step's evidence is conditioned on besides the family
        (docs/method.md, "Conditioning on the shape class"): the task's when by_shape is on
        and its (family, shape class) cell has steps; else None, the family's evidence."""
        if self.shape_on is None:
            return None
        return self.shape_on if self.store.family_evidence(self.condition_on, self.shape_on).globals else None

    def _choose_direction(self, state: StepState, recorded: RecordedChoice | None) -> Direction:
        if self.method in SCORED:
            prefix = [] if self.method == Method.HTAM_NO_PREFIX else self._prefix()
            cell = self._shape_cell()
            scores = self.store.score(prefix, self.params, self.condition_on, shape_class=cell)
            offered = self._offered(state, [s.global_id for s in scores])
            scores = with_probabilities(scores, self.params.tau, offered)
            replayed = [s for s in scores if recorded is not None and s.global_id == recorded.global_id]
            chosen = replayed[0] if replayed else self.policy.choose(scores, state.step_index, offered)
            glob = next(g for g in self.store.get_globals() if g.id == chosen.global_id)
            direction = Direction(
                glob=GlobalView.of(glob, chosen),
                scores=scores,
                offered=offered,
                transitions=self._transitions(glob.id, prefix),
            )
            if self.method in CHOOSES_LOCAL:
                evidence = self.store.family_evidence(self.condition_on, cell)
                locals_ = self._fitting([LocalView.of(loc, evidence) for loc in self.store.get_locals(glob.id)])
                direction.local, direction.local_fallback = self._choose_local(state, direction, locals_)
            return direction
        if self.method == Method.HTAM_NO_HIERARCHY:
            evidence = self.store.family_evidence(self.condition_on, self._shape_cell())
            views = self._fitting([LocalView.of(loc, evidence) for loc in self.store.get_locals()])
            offered = self._offered(state, [v.global_id for v in views])
            if offered is not None:
                views = [v for v in views if v.global_id in offered]
            rng = self.policy.rng(state.step_index, "hierarchy-free")
            ranked = hierarchy_free_locals(views, self.params.alpha, rng)
            free = Direction(offered=offered)
            local, free.local_fallback = self._choose_local(state, free, ranked)
            if local is None:  # declined: the step has no direction (no global to credit)
                return free
            free.local = local
            free.glob = GlobalView.of(next(g for g in self.store.get_globals() if g.id == local.global_id))
            return free
        if self.method == Method.FLAT:
            return self._flat(state)
        if self.method in (Method.RANDOM, Method.FEEDBACK):
            return self._control(state)
        return Direction()

    def _control(self, state: StepState) -> Direction:
        """The controls without a memory (docs/method.md, "Methods"). random: a strategy drawn
        uniformly among those the generator can apply (all of the memory's for a language
        model). feedback: with a generator that names its strategies, one drawn uniformly among
        those not tried since the best was set (all once each was tried); a language model
        chooses its own change from the feedback (no strategy)."""
        can = self.client.strategies(state.view())
        if can is None and self.method == Method.FEEDBACK:
            return Direction()
        views = {v.id: v for v in (LocalView.of(loc) for loc in self.store.get_locals())}
        pool = [sid for sid in (can if can is not None else sorted(views)) if sid in views]
        if self.method == Method.FEEDBACK:
            tried = _tried_since_best(state)
            pool = [sid for sid in pool if sid not in tried] or pool
        if not pool:
            return Direction()
        local = views[self.policy.rng(state.step_index, self.method.value).choice(pool)]
        glob = next(g for g in self.store.get_globals() if g.id == local.global_id)
        return Direction(glob=GlobalView.of(glob), local=local)

    def _offered(self, state: StepState, candidates: list[str]) -> list[str] | None:
        """The globals among `candidates` that the backend says it can act on in this state
        (asked with the state as the prompts receive it), sorted; None for all of them: the
        backend named none (a language model), or none of the candidates (every direction
        would fail, so the method draws as it would without the backend's word).

        A language model names none; it is offered the directions that fit the task (issue
        34, item 6): those with a strategy for the task's operator family, and no direction
        aimed at memory-bound kernels when the task is compute-bound."""
        can = self.client.directions(state.view())
        if not can:
            return self._fitting_globals(candidates)
        return sorted(set(candidates) & can) or None

    def _fits_task(self) -> bool:
        """Whether the offers are filtered by the task: for language models and their
        replays (the catalog names what it can act on itself, and has done so already)."""
        return not self.client.fits_task_itself

    def _fitting(self, locals_: list[LocalView]) -> list[LocalView]:
        """The strategies that apply to the task's operator family (all, when none does)."""
        if not self._fits_task():
            return locals_
        return [v for v in locals_ if v.fits(self.family)] or locals_

    def _fitting_globals(self, candidates: list[str]) -> list[str] | None:
        if not self._fits_task():
            return None
        fitting = {loc.global_id for loc in self.store.get_locals() if LocalView.of(loc).fits(self.family)}
        if (self.context.intensity or 0.0) >= COMPUTE_BOUND_INTENSITY:
            fitting -= MEMORY_BOUND_DIRECTIONS
        offered = sorted(set(candidates) & fitting)
        return offered if offered and set(offered) != set(candidates) else None

    def _transitions(self, target: str, prefix: list[str]) -> list[TransitionView]:
        edges = {(t.source, t.target): t for t in self.store.get_transitions() if t.target == target}
        views = []
        for k, source in enumerate(prefix[: self.params.K], start=1):
            if (edge := edges.get((source, target))) is not None:
                views.append(TransitionView.of(edge, k))
        return views

    def _choose_local(
        self, state: StepState, direction: Direction, locals_: list[LocalView]
    ) -> tuple[LocalView | None, bool]:
        """The LLM's choice among `locals_`, with its reason (kept in `direction`); None when
        it declined them all (the step follows the direction alone, and the memory keeps the
        reason); one retry, then the best by its own record."""
        if not locals_:
            raise ValueError("a global without locals: seed the memory (htam memory seed)")
        by_record = max(locals_, key=lambda v: v.shrunk_mean_reward(self.params.alpha))
        if not self.client.answers("select_local"):
            return by_record, True  # a backend (a script) that makes no strategy choices leaves them to the memory
        by_id = {loc.id: loc for loc in locals_}
        prompt = self._prompt(
            "select_local", False, state=state, glob=direction.glob, transitions=direction.transitions, locals=locals_
        )
        schema = choice_schema(list(by_id))
        for _attempt in range(2):
            try:
                answer, completion = self.client.structured(prompt, schema, CHOICE_MAX_TOKENS)
            except InvalidAnswer as bad:
                self._calls.append(CallRecord.of(prompt, bad.completion, error=bad.reason))
                continue
            if answer.local_id == DECLINE:
                self._calls.append(CallRecord.of(prompt, completion))
                direction.choice_reason, direction.declined = answer.reason.strip(), list(by_id)
                log.info("step %d: the model declined the strategies: %s", state.step_index, answer.reason)
                return None, False
            if answer.local_id in by_id:
                self._calls.append(CallRecord.of(prompt, completion))
                direction.choice_reason = answer.reason.strip()
                return by_id[answer.local_id], False
            error = f"{answer.local_id!r} is not one of the offered strategies"
            self._calls.append(CallRecord.of(prompt, completion, error=error))
        log.warning(
            "step %d: no valid strategy choice after a retry; took %s by its record", state.step_index + 1, by_record.id
        )
        return by_record, True

    def _flat(self, state: StepState) -> Direction:
        """The flat-memory baseline (docs/method.md, "flat"): the past steps most similar to this
        one, weighted by similarity tier; the FLAT_TOP_K most similar go into the prompts. With a
        generator that names its strategies (the catalog), the untried strategy on offer with the
        highest value V(s) = sum w*r / (sum w + alpha) over the retrieved steps that took s, ties
        in an order drawn by the run; a language model chooses its own change. Each step shown
        carries the text of the strategy it applied (docs/prompts.md)."""
        similar = self.store.similar_steps(
            self.task.id, self.family, _sha256(self._parent_source(state)), self.run_record.id, FLAT_RETRIEVE
        )
        views = {v.id: v for v in (LocalView.of(loc) for loc in self.store.get_locals())}
        retrieved = [RetrievedStep.of(s, _strategy_text(views, s.step.local_id)) for s in similar[:FLAT_TOP_K]]
        can = self.client.strategies(state.view())
        if can is None:
            return Direction(retrieved=retrieved)
        pool = [sid for sid in can if sid in views]
        if not pool:
            return Direction(retrieved=retrieved)
        tried = _tried_since_best(state)
        pool = [sid for sid in pool if sid not in tried] or pool
        chosen = flat_choice(pool, similar, self.params.alpha, self.policy.rng(state.step_index, "flat"))
        local = views[chosen]
        glob = next(g for g in self.store.get_globals() if g.id == local.global_id)
        return Direction(glob=GlobalView.of(glob), local=local, retrieved=retrieved)

    def _parent_source(self, state: StepState) -> str:
        """The code this step modifies: the candidate it builds on, or the reference."""
        return state.base.source if state.base.source is not None else self.task.source

    # -- candidates -----------------------------------------------------------------------
    def _generate(self, state: StepState, direction: Direction) -> Attempt:
        prompt = self._prompt(
            "generate",
            with_contract=True,
            state=state,
            glob=direction.glob,
            transitions=direction.transitions,
            local=direction.local,
            retrieved=direction.retrieved,
        )
        return self._attempt(prompt)

    def _repair(self, state: StepState, source: str, result: EvalResult) -> Attempt:
        return self._attempt(
            self._prompt("repair", with_contract=True, state=state, source=source, errors=result.errors)
        )

    def _attempt(self, prompt: Prompt) -> Attempt:
        completion = self.client.complete(prompt, CODE_MAX_TOKENS)
        self._calls.append(CallRecord.of(prompt, completion))
        source = extract_candidate(completion.text)
        if source is None:
            return Attempt(source=None, result=None)
        return Attempt(source=source, result=self.evaluator.evaluate(self.task, source))

    def _reflect(
        self, direction: Direction, final: Attempt, feedback: Feedback, best_before: float, best_after: float
    ) -> str:
        values = {
            "task_id": self.task.id,
            "global_id": direction.glob.id if direction.glob else None,
            "local_id": direction.local.id if direction.local else None,
            "feedback": feedback,
            "best_before": round(best_before, 3),
            "best_after": round(best_after, 3),
            "choice_reason": direction.choice_reason,
        }
        fallback = render("reflection_fallback", **values).text.strip()
        if not self._writes_notes() or final.source is None:
            return fallback
        state = self._step_state
        prompt = self._prompt(
            "reflect",
            with_contract=False,
            source=final.source,
            diff=code_diff(state.base.source if state is not None else None, final.source),
            local=direction.local,
            step_index=state.step_index if state is not None else len(self.steps),
            steps=self.planned,
            **values,
        )
        completion = self.client.complete(prompt, NOTE_MAX_TOKENS)
        note = " ".join(completion.text.split())[:600]
        if not note:  # a counted event (StepRecord.events), never a silent empty note
            why = "cut off while reasoning" if completion.truncated else "an empty answer"
            self._calls.append(CallRecord.of(prompt, completion, error=f"no note ({why}); the template's note is kept"))
            log.warning("step %d: the reflection gave no note (%s); kept the template's note", len(self.steps) + 1, why)
            return fallback
        self._calls.append(CallRecord.of(prompt, completion))
        return note

    def _writes_notes(self) -> bool:
        """Backends that write reflections (a language model; a script that recorded some). Vanilla's one
        step has no later step to read its note: the template writes it."""
        if self.method == Method.VANILLA:
            return False
        return self.client.reflects()

    def _prompt(self, name: str, with_contract: bool = True, **values: Any) -> Prompt:
        """prompts/<name>.j2 as the call's question, after the run's prefix (the system text,
        the native contract, the memory bank for the methods with a memory, the task: the
        same in every call of the run) and the step's state (step_state.j2: the same in every
        call of the step), so each call reads all but its question from the prompt cache.
        `with_contract` is no longer read: every call carries the contract, one prefix per run."""
        user = render(name, **values)
        reward = {"reward_from": self.params.reward_from, "deadband": self.params.deadband}
        system = [render("system", target=self.manifest.target, **reward)]
        if self._static is None:
            self._static = [render("native_contract"), render("hardware", hw=hardware_of(self.evaluator))]
            if self.method in WITH_MEMORY:
                self._static.append(render("memory_bank", globals=self.store.get_globals()))
            self._static.append(render("task", task=self.context))
        shared = [self._shared] if self._shared is not None else []
        return Prompt.build(user=user, system=system, static=self._static, shared=shared, context=Request.of(values))

    # -- the run folder -------------------------------------------------------------------
    def _persist(self, record: StepRecord) -> None:
        """The step's files, then (after this returns) the memory: see the module docstring."""
        name = f"{record.index:03d}"
        if record.final.source is not None:
            atomic_write(self.folder / "candidates" / f"{name}.py", record.final.source)
        steps = [*self.steps, record]
        if best_step(steps) is record and record.final.source is not None:  # the run's best, as reported
            atomic_write(self.folder / "best.py", record.final.source)
        atomic_write(self.folder / "steps" / f"{name}.json", record.model_dump_json(indent=1))
        entries = [
            ScriptEntry(template=call.template, text=call.text, reasoning=call.reasoning, truncated=call.truncated)
            for step in steps
            for call in step.calls
        ]
        path = [RecordedChoice(global_id=step.global_id, local_id=step.local_id) for step in steps]
        start = self.start.source if self.start is not None else None
        Script(responses=entries, start=start, steps=path).write(self.folder / "responses.yaml")


def load_steps(folder: Path) -> list[StepRecord]:
    """The steps a run folder holds, in order (a resumed run continues after the last)."""
    records = [StepRecord.model_validate_json(p.read_text()) for p in sorted((folder / "steps").glob("*.json"))]
    for expected, record in enumerate(records):
        if record.index != expected:
            raise ValueError(f"{folder}/steps: step {expected} is missing (found step {record.index})")
    return records


def _sum_events(per_step: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for events in per_step:
        for kind, n in events.items():
            total[kind] = total.get(kind, 0) + n
    return dict(sorted(total.items()))


def _calls_per_template(steps: list[StepRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for step in steps:
        for call in step.calls:
            counts[call.template] = counts.get(call.template, 0) + 1
    return counts


def _feedback(attempt: Attempt) -> Feedback:
    if attempt.result is None:
        return Feedback(
            verdict=Verdict.NO_CANDIDATE,
            errors="the answer held no Python file defining ModelNew",
            cheats=[],
            max_abs_error=None,
            max_rel_error=None,
            candidate_ms=None,
            candidate_host_ms=None,
            eager_ms=None,
            compile_ms=None,
            speedup_eager=None,
            speedup_compile=None,
            suspicious=False,
            roofline=None,
        )
    return Feedback.of(attempt.result)


def _trusted(result: EvalResult | None) -> bool:
    """Whether an ok result's speedup may reach the reward and the memory: a suspicious one
    only once the runner re-verified it (runner/evaluate.py, `reverified`)."""
    return result is not None and (not result.suspicious or result.verified)


def _error_class(result: EvalResult | None) -> str | None:
    if result is None:
        return Verdict.NO_CANDIDATE.value
    if result.cheats:
        return result.cheats[0].kind.value
    return None if result.verdict == Verdict.OK else result.verdict.value


def _strategy_text(views: dict[str, LocalView], local_id: str | None) -> str | None:
    """A strategy's name and pattern, as a retrieved step shows the one it applied."""
    view = views.get(local_id) if local_id is not None else None
    return f"{view.name}: {view.pattern}" if view is not None else None


def flat_values(similar: list[SimilarStep], alpha: float) -> dict[str, float]:
    """The flat baseline's value of each strategy the retrieved steps took:
    V(s) = sum w*r / (sum w + alpha) over those steps (a strategy none took has V = 0)."""
    num: dict[str, float] = {}
    den: dict[str, float] = {}
    for s in similar:
        if s.step.local_id is None:
            continue
        num[s.step.local_id] = num.get(s.step.local_id, 0.0) + s.weight * s.step.reward
        den[s.step.local_id] = den.get(s.step.local_id, 0.0) + s.weight
    return {sid: num[sid] / (den[sid] + alpha) for sid in num}


def flat_choice(pool: list[str], similar: list[SimilarStep], alpha: float, rng: random.Random) -> str:
    """The strategy of `pool` with the highest flat value, ties in an order drawn by `rng`."""
    values = flat_values(similar, alpha)
    shuffled = list(pool)
    rng.shuffle(shuffled)
    return max(shuffled, key=lambda sid: values.get(sid, 0.0))


def _tried_since_best(state: StepState) -> set[str]:
    """The strategies the run tried since its best was set (all of them before one was)."""
    best = state.best.step_index if state.best.source is not None else None
    return {p.local_id for p in state.path if p.local_id and (best is None or p.index > best)}


def _change(parent: str, source: str | None) -> str:
    """What a step changed: its candidate as a unified diff against its parent, cut to CHANGE_MAX
    characters ('' without a candidate)."""
    if source is None:
        return ""
    diff = "".join(difflib.unified_diff(parent.splitlines(True), source.splitlines(True), "parent", "candidate", n=1))
    return diff[: CHANGE_MAX - 4] + "\n..." if len(diff) > CHANGE_MAX else diff


def _sha256(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()
