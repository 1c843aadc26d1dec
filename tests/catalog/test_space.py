"""The catalog's kernel space (catalog/space.py) and the catalog in it (catalog-space-v1):
what a table must hold for a replay to be exact."""

from __future__ import annotations

from htam_graph.catalog.client import SPACE_MODEL, CatalogClient
from htam_graph.catalog.families import recognize
from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.space import build_space, kernel_key, knobs_key, space_strategies, task_space
from htam_graph.llm.request import Offer, Pick, Request, StepView, TaskRef
from htam_graph.tasks import resolve_task


def test_the_closure_holds_every_move_and_starts_at_the_base_kernel() -> None:
    task = resolve_task("level1/10_RMSNorm")
    space = build_space(recognize(task.source), task.id)
    assert space.base.knobs == Knobs() and space.base.depth == 0 and space.base.path == []
    assert 1 < len(space.states) <= 100
    assert space.strategies == space_strategies(recognize(task.source))[: len(space.strategies)]
    for state in space.states.values():
        assert set(state.moves) | set(state.blocked) == set(space.strategies)
        for target in state.moves.values():
            assert target in space.states  # closed: no move leaves the space
            assert space.states[target].depth <= state.depth + 1
            assert space.lookup(space.states[target].knobs) is space.states[target]
        assert kernel_key(space.candidates[state.key]) == state.key


def test_a_smaller_cap_narrows_the_strategies_not_the_closure() -> None:
    task = resolve_task("level1/7_Softmax")
    rec = recognize(task.source)
    wide, narrow = build_space(rec, task.id), build_space(rec, task.id, max_states=20)
    assert len(narrow.states) <= 20 < len(wide.states)
    assert narrow.strategies == wide.strategies[: len(narrow.strategies)]
    for state in narrow.states.values():
        assert all(target in narrow.states for target in state.moves.values())


def test_the_key_ignores_the_header_and_the_record() -> None:
    source = task_space(recognize(resolve_task("level1/19_ReLU").source)).candidates
    code = next(iter(source.values()))
    other = code.replace('"""Strategy-catalog', '"""Another header\n\nStrategy-catalog', 1)
    other = other.replace("# catalog: {", '# catalog: {"step": 3, ', 1)
    assert other != code and kernel_key(other) == kernel_key(code)
    assert kernel_key(code.replace("return t0", "return t0 + 0", 1)) != kernel_key(code)
    assert knobs_key(Knobs()) == "base" and knobs_key(Knobs(vec=True, block=128)) == "block=128,vec=True"


def _state(task_source: str, run_id: str) -> StepView:
    return StepView(run_id=run_id, task=TaskRef(id="t", source=task_source), step_index=0)


def test_the_catalog_in_the_space_starts_at_the_base_and_stays_in_the_space() -> None:
    task = resolve_task("level1/10_RMSNorm")
    space = task_space(recognize(task.source))
    client = CatalogClient(SPACE_MODEL)
    client.check()
    start = client.start_kernel(task.source)
    assert start is not None and kernel_key(start) == space.base.key
    offered = client.strategies(_state(task.source, "r1"))
    assert offered == list(space.base.moves)  # the strategies that change the base kernel, in the space's order
    for sid in offered:
        text = client.generate(Request(state=_state(task.source, "r1"), local=Pick(id=sid)))
        code = text.split("```python\n", 1)[1].rsplit("```", 1)[0]
        assert kernel_key(code) == space.base.moves[sid]


def test_the_catalog_in_the_space_draws_its_ties_by_run_not_by_the_expert_order() -> None:
    task = resolve_task("level1/10_RMSNorm")
    space = task_space(recognize(task.source))
    client = CatalogClient(SPACE_MODEL)
    offered = tuple(Offer(id=sid, applies_to=("any",)) for sid in space.base.moves)
    picks = {
        client.select_local(Request(state=_state(task.source, f"run-{i}"), locals=offered))["local_id"]
        for i in range(12)
    }
    assert len(picks) > 1  # untried strategies tie: each run draws its own
