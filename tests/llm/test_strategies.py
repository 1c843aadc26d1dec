"""Strategies that fit (issue 34, item 6): the directions and strategies a language model
is offered fit the task's operator family and boundedness; the model may decline them with
a reason, which the memory keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from htam_graph.llm.base import Completion, Prompt, T
from htam_graph.loop.optimizer import DECLINE, MEMORY_BOUND_DIRECTIONS
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.vocab import Method
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


def offered_locals(writer: RecordingWriter) -> list[list[dict[str, Any]]]:
    return [p.context["locals"] for p in writer.prompts if p.template == "select_local"]


def test_a_compute_bound_gemm_is_offered_no_memory_access_and_no_conv_only_strategy(tmp_path: Path) -> None:
    writer = SchemaWriter()
    _, records = run_loop(Method.HTAM, writer, tmp_path, task_id=GEMM)
    for record in records:
        assert record.offered is not None and not MEMORY_BOUND_DIRECTIONS & set(record.offered)
        assert record.global_id not in MEMORY_BOUND_DIRECTIONS
    for offered in offered_locals(writer):
        assert offered and all({"gemm_epilogue", "any"} & set(loc["applies_to"]) for loc in offered)
        assert "algorithmic.implicit_gemm_conv" not in {loc["id"] for loc in offered}


def test_a_memory_bound_elementwise_task_keeps_memory_access_and_drops_tiling(tmp_path: Path) -> None:
    writer = SchemaWriter()
    _, records = run_loop(Method.HTAM_NO_HIERARCHY, writer, tmp_path)
    assert records[0].offered is None or "memory_access" in records[0].offered
    for offered in offered_locals(writer):
        ids = {loc["id"] for loc in offered}
        assert "data_reuse.smem_tiling" not in ids and "fusion.conv_epilogue" not in ids
        assert all({"elementwise", "any"} & set(loc["applies_to"]) for loc in offered)


def test_the_model_may_decline_and_the_memory_keeps_its_reason(tmp_path: Path) -> None:
    reason = "The kernel is already at the bandwidth floor; none of these changes the bytes moved."
    writer = SchemaWriter(decline=reason)
    _, records = run_loop(Method.HTAM, writer, tmp_path, steps=2)
    first = records[0]
    assert first.global_id is not None and first.local_id is None and not first.local_fallback
    assert first.update.choice_reason == reason and first.update.declined
    assert set(first.update.declined) == {loc["id"] for loc in offered_locals(writer)[0]}
    assert first.events() == {}  # a decline is an answer, not a fallback
    generate = next(p for p in writer.prompts if p.template == "generate")
    assert "## The strategy to apply" not in generate.user and "## The direction for this step" in generate.user
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        (stored, *_) = store.get_steps(first.update.run_id)
    assert stored.choice_reason == reason and stored.declined == first.update.declined
    select = next(p for p in writer.prompts if p.template == "select_local")
    assert "answer `decline` with the\nreason instead" in select.user
