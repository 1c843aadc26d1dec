"""Prompt.context (llm/request.py): what a backend that reads the state rather than the text
is given, read from the loop's own views by attribute; neither sent nor hashed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from htam_graph.llm.base import Prompt
from htam_graph.llm.request import KernelRef, PastStep, Pick, Request, StepView, TaskRef
from htam_graph.loop.runs import task_context
from htam_graph.loop.state import Candidate, GlobalView, LocalView, PathEntry, StepState
from htam_graph.memory.models import StepUpdate
from htam_graph.memory.seed import load_seed_bank
from htam_graph.tasks import resolve_task
from htam_graph.templating import Rendered
from htam_graph.vocab import Method, Verdict


def _state() -> StepState:
    task = task_context(resolve_task("level1/19_ReLU"))
    step = StepUpdate(
        id="r:0", run_id="r", task_id=task.id, index=0, global_id="fusion", local_id="fusion.elementwise_chain",
        verdict=Verdict.OK, speedup=0.8, best_before=1.0, best_after=1.0, note="slower",
    )  # fmt: skip
    return StepState(
        method=Method.HTAM,
        run_id="r",
        task=task,
        step_index=1,
        steps=4,
        best=Candidate(step_index=None, source=None, speedup=1.0, feedback=None),
        fastest=Candidate(step_index=0, source="fastest", speedup=0.8, feedback=None),
        last=None,
        path=[PathEntry.of(step)],
    )


def test_a_request_reads_the_values_it_names_from_the_loops_views() -> None:
    bank = load_seed_bank()
    glob = GlobalView.of(bank.global_nodes()[0])
    offered = [LocalView.of(loc) for loc in bank.local_nodes() if loc.global_id == glob.id]
    state = _state()
    request = Request.of({"state": state, "glob": glob, "locals": offered, "transitions": [], "retrieved": []})
    assert request.state == StepView(
        run_id="r",
        task=TaskRef(id=state.task.id, source=state.task.source, family="elementwise"),
        step_index=1,
        best=KernelRef(),
        fastest=KernelRef(step_index=0, source="fastest"),
        path=(PastStep(index=0, local_id="fusion.elementwise_chain", verdict=Verdict.OK),),
    )
    assert request.state == state.view() and request.state.base == KernelRef.model_validate(state.base)
    assert request.glob == Pick(id=glob.id) and request.local is None
    assert [o.id for o in request.locals] == [v.id for v in offered]
    assert all(
        o.applies_to == tuple(v.applies_to) and o.outcomes.attempts == 0 for o, v in zip(request.locals, offered)
    )
    with pytest.raises(ValidationError):
        request.model_copy().__setattr__("glob", None)  # frozen


def test_the_request_is_neither_sent_nor_hashed() -> None:
    user = Rendered(name="generate", version=1, text="write the kernel", sha256="0" * 64)
    bare = Prompt.build(user=user)
    given = Prompt.build(user=user, context=Request(state=_state().view(), local=Pick(id="x")))
    assert bare.context is None and given.context is not None
    assert given.sha256 == bare.sha256 and given.user == bare.user
