"""CatalogClient.directions: the globals under which some catalog strategy changes the run's
best kernel, the only ones the policy then draws (no nvcc: candidates are rendered, not
built)."""

from __future__ import annotations

from pathlib import Path

import pytest

from htam_graph.catalog.client import CATALOG_MODEL, CatalogClient, best_record
from htam_graph.catalog.families import recognize
from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.render import Header, render_candidate
from htam_graph.catalog.strategies import STRATEGIES
from htam_graph.llm.request import StepView
from htam_graph.loop.runs import task_context
from htam_graph.loop.state import Candidate, StepState
from htam_graph.memory.seed import load_seed_bank
from htam_graph.tasks import load_task, resolve_task
from htam_graph.vocab import Method

OWN = Path(__file__).with_name("tasks")
GLOBALS = {g.id for g in load_seed_bank().global_nodes()}


def state(task: str, best: str | None = None) -> StepView:
    """A step's state as directions() receives it."""
    resolved = load_task(OWN / f"{task}.py") if (OWN / f"{task}.py").exists() else resolve_task(task)
    step = StepState(
        method=Method.HTAM,
        task=task_context(resolved),
        step_index=0,
        steps=6,
        best=Candidate(step_index=None if best is None else 0, source=best, speedup=1.0, feedback=None),
        last=None,
        path=[],
    )
    return step.view()


def composing(client: CatalogClient, given: StepView) -> set[str]:
    """The globals with a strategy that changes the best kernel, strategy by strategy."""
    rec = recognize(given.task.source)
    knobs = client._start(rec, given)[0]  # the best kernel, or the family's first kernel before one
    return {sid.split(".", 1)[0] for sid in STRATEGIES if not client._apply(rec, knobs, sid).reason}


@pytest.mark.parametrize(
    ("task", "lacking"),
    [
        ("level2/2_Swish_Bias_Scale", {"reduction_sync", "algorithmic", "precision_tensor_cores", "data_reuse"}),
        ("level2/3_Gemm_Bias_ReLU", {"reduction_sync", "algorithmic"}),  # its base kernel takes 3xTF32 tiles
    ],
)
def test_the_directions_are_those_with_a_composing_template(task: str, lacking: set[str]) -> None:
    client = CatalogClient(CATALOG_MODEL)
    given = state(task)
    offered = client.directions(given)
    assert offered is not None and offered  # something composes with the base kernel
    assert offered < GLOBALS  # a strict subset: the family lacks templates for some directions
    assert not offered & lacking
    assert offered == composing(client, given)  # every offered one composes, and no other does
    assert client.directions(given) == offered  # deterministic


def test_a_direction_whose_templates_are_all_in_the_best_kernel_is_no_longer_offered() -> None:
    client = CatalogClient(CATALOG_MODEL)
    base = state("level1/19_ReLU")
    assert "memory_access" in (client.directions(base) or set())
    rec = recognize(base.task.source)
    applied = ["memory_access.vectorized_float4", "memory_access.streaming_cache_hints",
               "memory_access.readonly_ldg_restrict"]  # fmt: skip
    best = render_candidate(
        rec, Knobs(vec=True, streaming=True, ldg=True), Header(CATALOG_MODEL, rec.describe(), [], [], applied)
    )
    given = state("level1/19_ReLU", best)
    assert best_record(given)[1] == applied
    offered = client.directions(given)
    assert offered is not None and "memory_access" not in offered
    assert offered == composing(client, given)


def test_a_model_the_catalog_has_no_kernels_for_leaves_every_direction_open() -> None:
    assert CatalogClient(CATALOG_MODEL).directions(state("unsupported_attention")) is None
