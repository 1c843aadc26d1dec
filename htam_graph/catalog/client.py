"""The strategy catalog as an LLM backend (`--llm catalog`): a template generator, not a
language model.

It reads what each prompt was rendered from (`Prompt.context`, an llm/request.Request),
never the prompt's text: the task's source (recognized by its graph, catalog/families.py),
the run's best candidate, or its fastest correct one while the reference is the best (the
header records the knobs either was made with; "the best kernel" below), and the step's
strategy.
- select_local: among the offered strategies, one the catalog implements that changes
  the best kernel and was not tried since the best was set, ranked by the strategy's own
  record in the memory, then by the catalog's order for the family.
- generate: the best kernel with the chosen strategy applied; methods that choose no
  strategy take the next one of the family's order that composes (the order restarts
  when a step improves the best). A strategy (or direction) that changes nothing in the
  kernel gives no candidate, with the reason: the step is a failed generation.
- repair: the catalog cannot fix its own templates; it answers with the best kernel so far.
- directions: the globals with a strategy that changes the best kernel and was not tried on
  it, the only ones the policy then draws (a direction without one would be a failed
  generation, or a candidate judged before); all globals with one when every one was tried.
Every answer is deterministic, so runs replay exactly.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import ClassVar

from htam_graph.catalog.families import Recognition, recognize
from htam_graph.catalog.ir import Unsupported
from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.record import CatalogRecord, RecordBook
from htam_graph.catalog.render import Header, render_candidate
from htam_graph.catalog.space import task_space
from htam_graph.catalog.strategies import STRATEGIES, Applied, apply, curriculum, first_kernel
from htam_graph.errors import BadInput
from htam_graph.llm.base import Completion, InvalidAnswer, LLMClient, Prompt, T
from htam_graph.llm.request import Offer, Request, StepView
from htam_graph.vocab import Verdict

# The tuned start: each run's first step is the family's hand-tuned first kernel, which does
# most of the work at step 1; the catalog's order ranks the strategies. Named explicitly
# (`--model catalog-v1`); its name is also the one every rendered kernel's header carries.
CATALOG_MODEL = "catalog-v1"
# The catalog's kernel space (catalog/space.py): runs start from the task's base kernel and
# offer the strategies of its space, whose every kernel a table can hold; the catalog's order
# ranks nothing (ties are drawn by the run), so a method's choices are its own.
SPACE_MODEL = "catalog-space-v1"
MODELS = (CATALOG_MODEL, SPACE_MODEL)
DEFAULT_MODEL = SPACE_MODEL  # `--llm catalog` without --model: the honest start (docs/method.md)
SHRINK = 2.0  # pseudo-observations a strategy's mean reward is shrunk toward 0 by (as the loop's fallback)


class CatalogClient(LLMClient):
    name: ClassVar[str] = "catalog"
    fits_task_itself: ClassVar[bool] = True  # it names only what it can apply to this task

    def __init__(self, model: str | None = None) -> None:
        self.model = model or DEFAULT_MODEL
        self.spaced = self.model == SPACE_MODEL
        self._rendered: dict[tuple[str, str], str] = {}
        self._first: dict[str, tuple[Knobs, list[str]]] = {}
        self.records = RecordBook()  # the kernels it wrote, each with its knobs and strategies

    def check(self) -> None:
        if self.model not in MODELS:
            raise BadInput(
                f"the strategy catalog is {' or '.join(MODELS)}; --model {self.model} is not one "
                f"(leave --model out for {DEFAULT_MODEL}, the task's base kernel as the start; {CATALOG_MODEL} "
                "starts from the family's tuned first kernel)",
                option="--model",
                value=self.model,
            )

    def complete(self, prompt: Prompt, max_tokens: int | None = None) -> Completion:
        request = self._request(prompt)
        if prompt.template == "generate":
            text = self.generate(request)
        elif prompt.template == "repair":
            text = self.repair(request)
        elif prompt.template == "reflect":
            text = _note(request)
        else:
            raise InvalidAnswer(f"the catalog answers no {prompt.template!r} call", self._completion(""))
        return self._completion(text)

    def structured(self, prompt: Prompt, schema: type[T], max_tokens: int | None = None) -> tuple[T, Completion]:
        if prompt.template != "select_local":
            raise InvalidAnswer(f"the catalog makes no structured {prompt.template!r} answer", self._completion(""))
        choice = self.select_local(self._request(prompt))
        completion = self._completion(json.dumps(choice))
        return schema.model_validate(choice), completion

    def _completion(self, text: str) -> Completion:
        return Completion(text=text, model=self.model, stop_reason="catalog")

    def _request(self, prompt: Prompt) -> Request:
        if prompt.context is None:
            why = f"the catalog reads what a prompt was rendered from, and this {prompt.template!r} call carries none"
            raise InvalidAnswer(why, self._completion(""))
        return prompt.context

    # -- the calls ----------------------------------------------------------------------------
    def directions(self, state: StepView) -> frozenset[str] | None:
        """The globals under which some strategy of the catalog changes the run's best
        kernel; None for a model the catalog has no kernels for (every step is then a failed
        generation, whose answer says why)."""
        try:
            rec = recognize(state.task.source)
        except Unsupported:
            return None
        knobs, _, _ = self._start(rec, state)
        tried = _tried_since_best(state)
        order = self._order(rec)
        composing: dict[str, list[str]] = {}
        for sid in order:
            if not self._apply(rec, knobs, sid).reason:
                composing.setdefault(sid.split(".", 1)[0], []).append(sid)
        # A direction whose every composing strategy was tried on this kernel would only
        # make a candidate judged before; those are drawn only when no other is left.
        fresh = frozenset(g for g, sids in composing.items() if any(sid not in tried for sid in sids))
        return fresh or frozenset(composing)

    def select_local(self, request: Request) -> dict[str, str]:
        offered = request.locals
        state = _state(request)
        try:
            rec = recognize(state.task.source)
        except Unsupported as e:
            return {"local_id": offered[0].id, "reason": f"the catalog has no kernels for this model ({e})"}
        knobs, _, _ = self._start(rec, state)
        tried = _tried_since_best(state)
        family = rec.family.value
        order = self._order(rec)
        composing = []
        for loc in offered:
            if loc.id not in STRATEGIES:
                continue
            result = self._apply(rec, knobs, loc.id)
            if not result.reason:
                composing.append(loc)
        fitting = [loc for loc in composing if family in loc.applies_to or "any" in loc.applies_to] or composing
        fresh = [loc for loc in fitting if loc.id not in tried] or fitting
        rank = (lambda loc: _draw(state, loc.id)) if self.spaced else (lambda loc: -_position(order, loc.id))
        if fresh:
            best = max(fresh, key=lambda loc: (_record(loc), rank(loc)))
            why = f"its template applies to this {family} kernel and changes it; record {_describe(best)}"
            if best.id in tried:
                why += " (every composing strategy was tried since the best was set)"
            return {"local_id": best.id, "reason": why}
        best = max(offered, key=lambda loc: (_record(loc), rank(loc)))
        return {
            "local_id": best.id,
            "reason": f"none of the offered strategies changes this {family} kernel; "
            f"taken by its record {_describe(best)}",
        }

    def generate(self, request: Request) -> str:
        state = _state(request)
        try:
            rec = recognize(state.task.source)
            knobs, strategies, first = self._start(rec, state)
            local, glob = request.local, request.glob
            if local is not None:
                order = [local.id]
            else:
                order = _under(self._order(rec), glob.id if glob is not None else None)
            skipped, chosen = self._nth_composing(
                rec, knobs, order, 0 if local is not None else _steps_since_best(state)
            )
            if self.spaced and local is None and glob is not None and chosen is not None:
                chosen = self._drawn_untried(rec, knobs, order, state) or chosen
            if chosen is None:
                what = f"strategy {order[0]}" if local is not None else f"direction {glob.id}" if glob else "catalog"
                reasons = "; ".join(f"{sid}: {why}" for sid, why in skipped[:4])
                return f"No candidate: nothing in the {what} changes this kernel ({reasons})."
            header = Header(
                CATALOG_MODEL, rec.describe(), [chosen.id], [f"{sid}: {why}" for sid, why in skipped],
                [*strategies, chosen.id], first,
            )  # fmt: skip
            source = self._written(rec, chosen.knobs, header)
        except Unsupported as e:
            return f"No candidate: the strategy catalog has no kernel templates for this model ({e})."
        return f"```python\n{source}```\n"

    def repair(self, request: Request) -> str:
        state = _state(request)
        best = state.base.source
        if best is not None:
            return f"The catalog cannot repair its templates; here is the best kernel so far.\n```python\n{best}```\n"
        try:
            rec = recognize(state.task.source)
            source = self._written(
                rec, Knobs(), Header(CATALOG_MODEL, rec.describe(), [], ["a repair: the failed variant is dropped"], [])
            )
        except Unsupported as e:
            return f"No candidate: the strategy catalog has no kernel templates for this model ({e})."
        return f"The catalog cannot repair its templates; here is its base kernel.\n```python\n{source}```\n"

    def strategies(self, state: StepView) -> list[str] | None:
        """The strategies that change the kernel a step builds on, in the catalog's order;
        None for a model the catalog has no kernels for."""
        try:
            rec = recognize(state.task.source)
        except Unsupported:
            return None
        knobs, _, _ = self._start(rec, state)
        return [sid for sid in self._order(rec) if not self._apply(rec, knobs, sid).reason]

    def start_kernel(self, task_source: str) -> str | None:
        """In the space (catalog-space-v1), the task's base kernel; catalog-v1 starts each run's
        first step from the family's first kernel instead, so it judges no start kernel."""
        if not self.spaced:
            return None
        try:
            rec = recognize(task_source)
            header = Header(self.model, rec.describe(), [], ["the run's start: the task's base kernel"], [])
            source = self._written(rec, Knobs(), header)
        except Unsupported:
            return None
        return source

    # -- helpers --------------------------------------------------------------------------------
    def _order(self, rec: Recognition) -> list[str]:
        """The strategies the catalog offers for this task: its space's (catalog-space-v1), or
        every implemented one, the family's order first."""
        return task_space(rec).strategies if self.spaced else curriculum(rec.family)

    def _drawn_untried(self, rec: Recognition, knobs: Knobs, order: list[str], state: StepView) -> Chosen | None:
        """A strategy of `order` that changes the kernel, drawn by the run among those not tried
        since the best was set (among all of them once each was tried)."""
        tried = _tried_since_best(state)
        composing = [Chosen(sid, r.knobs) for sid in order if not (r := self._apply(rec, knobs, sid)).reason]
        pool = [c for c in composing if c.id not in tried] or composing
        return max(pool, key=lambda c: _draw(state, c.id), default=None)

    def _start(self, rec: Recognition, state: StepView) -> tuple[Knobs, list[str], list[str]]:
        """The kernel a step builds on: its knobs, the strategies in it, and the family's
        first-kernel strategies when it is the family's first kernel (else []). That is the
        run's best (or fastest correct) catalog kernel; before there is one, the family's first
        kernel (strategies.FIRST_KERNEL), or the plain base kernel once a step built on the
        first kernel failed (compile error, wrong values, ...), so a first kernel that does not
        suit a model costs one step, not the run."""
        recorded = _recorded(state, self.records)
        if recorded is not None:
            return (*recorded, [])
        if self.spaced or _failed_without_base(state):
            return Knobs(), [], []
        if rec.source_sha256 not in self._first:
            self._first[rec.source_sha256] = first_kernel(rec, lambda k: self._render(rec, k))
        knobs, first = self._first[rec.source_sha256]
        return knobs, first, first

    def _apply(self, rec: Recognition, knobs: Knobs, strategy_id: str) -> Applied:
        if not self.spaced:
            return apply(rec, knobs, strategy_id, lambda k: self._render(rec, k))
        space = task_space(rec)  # the moves its closure found: no rendering
        here = space.lookup(knobs)
        if here is None:
            return Applied(knobs, "this kernel is outside the task's space")
        if strategy_id in here.moves:
            return Applied(space.states[here.moves[strategy_id]].knobs, "")
        return Applied(knobs, here.blocked.get(strategy_id, "not a strategy of this task's space"))

    def _written(self, rec: Recognition, knobs: Knobs, header: Header) -> str:
        """A kernel the catalog answers with; its record is kept as data."""
        source = render_candidate(rec, knobs, header)
        self.records.note(source, CatalogRecord(knobs, tuple(header.strategies), header.model, rec.family.value))
        return source

    def _render(self, rec: Recognition, knobs: Knobs) -> str:
        key = (rec.source_sha256, knobs.model_dump_json())
        if key not in self._rendered:
            self._rendered[key] = render_candidate(rec, knobs, Header(CATALOG_MODEL, "", [], [], []))
        return self._rendered[key]

    def _nth_composing(
        self, rec: Recognition, knobs: Knobs, order: list[str], n: int
    ) -> tuple[list[tuple[str, str]], Chosen | None]:
        """The n-th strategy of `order` that changes the kernel (wrapping around), and the
        strategies before it that do not, with why; None when none does."""
        composing, skipped = [], []
        for sid in order:
            result = self._apply(rec, knobs, sid)
            if result.reason:
                skipped.append((sid, result.reason))
            else:
                composing.append(Chosen(sid, result.knobs))
        if not composing:
            return skipped, None
        chosen = composing[n % len(composing)]
        before = order.index(chosen.id)
        return [(sid, why) for sid, why in skipped if order.index(sid) < before], chosen


@dataclass(frozen=True)
class Chosen:
    id: str
    knobs: Knobs


def _state(request: Request) -> StepView:
    if request.state is None:
        raise ValueError("the call's request carries no step state (llm/request.Request.state)")
    return request.state


def best_record(state: StepView, records: RecordBook | None = None) -> tuple[Knobs, list[str]]:
    """The knobs and strategies of the candidate the catalog builds on (`state.base`: the
    run's best, or, while the reference is the best, the run's fastest correct kernel: a
    GEMM's register tiles at 0.6x eager are still the kernel the next strategy must apply
    to, not the 0.13x base kernel): those kept
    in `records` when it is a kernel the client wrote, else those its `# catalog:` line records
    (the base kernel when it is the reference or not the catalog's)."""
    return _recorded(state, records) or (Knobs(), [])


def _recorded(state: StepView, records: RecordBook | None = None) -> tuple[Knobs, list[str]] | None:
    """best_record's answer when the candidate built on is the catalog's; None when it is the
    reference, not the catalog's, or a record this catalog cannot read."""
    source = state.base.source
    record = (records or RecordBook()).of(source)
    if record is None:
        return None
    return record.knobs, list(record.applied)


def _failed_without_base(state: StepView) -> bool:
    """Whether a step of the run failed to give a correct kernel (a generation that gave no
    candidate aside) while the run had none to build on."""
    return any(p.verdict not in (Verdict.OK, Verdict.NO_CANDIDATE) for p in state.path)


def _under(order: list[str], glob_id: str | None) -> list[str]:
    """The strategies of `order` under the global `glob_id` (all of them for None)."""
    prefix = f"{glob_id}." if glob_id is not None else ""
    return [sid for sid in order if sid.startswith(prefix)]


def _steps_since_best(state: StepView) -> int:
    best = state.base.step_index
    return state.step_index - (best + 1 if best is not None else 0)


def _tried_since_best(state: StepView) -> set[str]:
    best = state.base.step_index
    return {p.local_id for p in state.path if p.local_id and (best is None or p.index > best)}


def _draw(state: StepView, what: str) -> int:
    """A tie-break the run draws: the same for the same run, step and option."""
    key = f"{state.run_id}|{state.step_index}|{what}"
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16)


def _record(loc: Offer) -> float:
    """The strategy's mean reward shrunk toward 0, then, when the method conditions on the
    task's operator family (`family`, loop/state.LocalView), its mean on that family shrunk
    toward this: (R_f + SHRINK * pooled) / (n_f + SHRINK), the pooled record itself while the
    family has no steps (memory/scoring.shrink; docs/method.md, "Conditioning on the
    operator family")."""
    o = loc.outcomes
    attempts = o.attempts
    pooled = (o.mean_reward or 0.0) * attempts / (attempts + SHRINK)
    family = loc.family
    if family is None or not family.attempts:
        return pooled
    return (family.reward_sum + SHRINK * pooled) / (family.attempts + SHRINK)


def _describe(loc: Offer) -> str:
    o = loc.outcomes
    if not o.attempts:
        return "(not tried yet)"
    mean_reward = o.mean_reward if o.mean_reward is not None else 0.0  # never None once tried
    text = f"mean reward {mean_reward:+.2f} over {o.attempts} step(s)"
    family = loc.family
    if family is not None and family.attempts:
        mean = family.reward_sum / family.attempts
        text += f", {mean:+.2f} over {family.attempts} on {family.family} tasks"
    return f"({text})"


def _position(order: list[str], sid: str) -> int:
    return order.index(sid) if sid in order else len(order)


def _note(request: Request) -> str:
    what = request.local_id or request.global_id or "no strategy"
    verdict = request.feedback.verdict.value if request.feedback is not None else None
    return f"catalog: {what} on {request.task_id}: {verdict}"
