"""Strategies that fit (item 6), and evidence that says something (issue 34, item 7): the
directions and strategies a language model is offered fit the task's operator family and
boundedness; the model may decline them with a reason, which the memory keeps; the choice's
schema has an enum and a description written for the model; the reason for a choice is
kept and shown to the reflection; negative evidence keeps its numbers; a seeded transition
states its prior."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from htam_graph.llm.base import Completion, Prompt, T
from htam_graph.llm.request import Offer
from htam_graph.loop.optimizer import DECLINE, MEMORY_BOUND_DIRECTIONS, choice_schema
from htam_graph.loop.state import GlobalView, LocalView, Outcomes, TransitionView
from htam_graph.memory.models import Evidence
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.templating import prompts
from htam_graph.vocab import Method, Verdict
from tests.llm.loop_harness import RecordingWriter, run_loop

GEMM = "level2/3_Gemm_Bias_ReLU"  # gemm_epilogue, 341 FLOP per byte: compute-bound


class SchemaWriter(RecordingWriter):
    """Keeps the schema of every structured call; declines when told to."""

    def __init__(self, decline: str | None = None) -> None:
        super().__init__()
        self.schemas: list[type[Any]] = []
        self.decline = decline

    def structured(self, prompt: Prompt, schema: type[T], max_tokens: int | None = None) -> tuple[T, Completion]:
        self.schemas.append(schema)
        if self.decline is None:
            return super().structured(prompt, schema, max_tokens)
        self.prompts.append(prompt)
        answer = {"local_id": DECLINE, "reason": self.decline}
        return schema.model_validate(answer), Completion(text=str(answer), model=self.model)


def offered_locals(writer: RecordingWriter) -> list[tuple[Offer, ...]]:
    return [p.context.locals for p in writer.prompts if p.template == "select_local" and p.context is not None]


def test_a_compute_bound_gemm_is_offered_no_memory_access_and_no_conv_only_strategy(tmp_path: Path) -> None:
    writer = SchemaWriter()
    _, records = run_loop(Method.HTAM, writer, tmp_path, task_id=GEMM)
    for record in records:
        assert record.offered is not None and not MEMORY_BOUND_DIRECTIONS & set(record.offered)
        assert record.global_id not in MEMORY_BOUND_DIRECTIONS
    for offered in offered_locals(writer):
        assert offered and all({"gemm_epilogue", "any"} & set(loc.applies_to) for loc in offered)
        assert not {"algorithmic.implicit_gemm_conv", "fusion.conv_epilogue"} & {loc.id for loc in offered}


def test_a_memory_bound_elementwise_task_keeps_memory_access_and_drops_tiling(tmp_path: Path) -> None:
    writer = SchemaWriter()
    _, records = run_loop(Method.HTAM_NO_HIERARCHY, writer, tmp_path)
    assert records[0].offered is None or "memory_access" in records[0].offered
    for offered in offered_locals(writer):
        ids = {loc.id for loc in offered}
        assert "data_reuse.smem_tiling" not in ids and "fusion.conv_epilogue" not in ids
        assert all({"elementwise", "any"} & set(loc.applies_to) for loc in offered)


def test_the_model_may_decline_and_the_memory_keeps_its_reason(tmp_path: Path) -> None:
    reason = "The kernel is already at the bandwidth floor; none of these changes the bytes moved."
    writer = SchemaWriter(decline=reason)
    _, records = run_loop(Method.HTAM, writer, tmp_path, steps=2)
    first = records[0]
    assert first.global_id is not None and first.local_id is None and not first.local_fallback
    assert first.update.choice_reason == reason and first.update.declined
    assert set(first.update.declined) == {loc.id for loc in offered_locals(writer)[0]}
    assert first.events() == {}  # a decline is an answer, not a fallback
    generate = next(p for p in writer.prompts if p.template == "generate")
    assert "## The strategy to apply" not in generate.user and "## The direction for this step" in generate.user
    reflect = next(p for p in writer.prompts if p.template == "reflect")
    assert f"The strategies offered were declined: {reason}" in reflect.user
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        (stored, *_) = store.get_steps(first.update.run_id)
    assert stored.choice_reason == reason and stored.declined == first.update.declined
    select = next(p for p in writer.prompts if p.template == "select_local")
    assert "answer `decline` with the\nreason instead" in select.user


def test_the_reason_for_a_choice_is_kept_and_shown_to_the_reflection(tmp_path: Path) -> None:
    writer = SchemaWriter()
    _, records = run_loop(Method.HTAM, writer, tmp_path, steps=1)
    assert records[0].local_id is not None and records[0].update.choice_reason == "first offered"
    reflect = next(p for p in writer.prompts if p.template == "reflect")
    assert "Chosen because: first offered" in reflect.user and records[0].local_id in reflect.user


def test_the_choice_schema_has_an_enum_and_a_description_for_the_model(tmp_path: Path) -> None:
    schema = choice_schema(["memory_access.vectorized_float4", "fusion.elementwise_chain"])
    body = schema.model_json_schema()
    assert schema.__name__ == "LocalChoice"
    assert body["properties"]["local_id"]["enum"] == [
        "memory_access.vectorized_float4",
        "fusion.elementwise_chain",
        DECLINE,
    ]
    assert body["description"].startswith("Choose the one strategy to apply") and "LLM" not in body["description"]
    assert "why none does" in body["properties"]["reason"]["description"]
    with pytest.raises(ValidationError):
        schema.model_validate({"local_id": "data_reuse.smem_tiling", "reason": "not offered"})
    writer = SchemaWriter()
    run_loop(Method.HTAM, writer, tmp_path, steps=1)
    (sent,) = writer.schemas
    offered = [loc.id for loc in offered_locals(writer)[0]]
    assert sent.model_json_schema()["properties"]["local_id"]["enum"] == [*offered, DECLINE]


def render_partial(name: str, **values: Any) -> str:
    return " ".join(prompts()._env.get_template(f"{name}.j2").render(**values).split())


def seeded(tmp: Path) -> SQLiteStore:
    store = SQLiteStore(tmp / "memory.sqlite")
    store.seed(load_seed_bank())
    return store


def test_negative_evidence_keeps_its_numbers(tmp_path: Path) -> None:
    with seeded(tmp_path) as store:
        (loc,) = [v for v in store.get_locals() if v.id == "memory_access.vectorized_float4"]
    view = LocalView.of(loc).model_copy(
        update={
            "negative": [
                Evidence(step_id="r:1", task_id="level1/23_Softmax", verdict=Verdict.OK, reward=-0.2, speedup=0.91),
                Evidence(step_id="r:2", task_id="level1/19_ReLU", verdict=Verdict.INCORRECT, reward=-1.0, note="off"),
            ]
        }
    )
    text = render_partial("_local", loc=view)
    assert "did not help on level1/23_Softmax: ok, 0.91x, reward -0.20" in text
    assert "did not help on level1/19_ReLU: incorrect, reward -1.00. off" in text


def test_a_seeded_transition_states_its_prior(tmp_path: Path) -> None:
    with seeded(tmp_path) as store:
        (glob,) = [g for g in store.get_globals() if g.id == "fusion"]
    edge = TransitionView(
        source="memory_access", target="fusion", distance=1, when="after coalescing", rationale="fewer passes",
        risks=[], prior=0.3, outcomes=Outcomes(attempts=0, success_rate=None, mean_reward=None, failures={}),
    )  # fmt: skip
    text = render_partial("_direction", glob=GlobalView.of(glob), transitions=[edge])
    assert "not tried yet" not in text.split("Experience of moving here")[1]
    assert "no step has taken it yet; its seeded prior utility is +0.30 (rewards run from -1 to +1)" in text
