"""The flat baseline's retrieval (issue 34, item 10): past steps with what they changed
(code or diff) and their strategy's text, ranked by similarity to the step at hand, so the
list follows the run instead of being the same every step."""

from __future__ import annotations

from pathlib import Path

from htam_graph.loop.state import cosine, words
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.vocab import Method
from tests.llm.loop_harness import RecordingWriter, kernel, run_loop

GEMM = "level2/3_Gemm_Bias_ReLU"


def test_a_step_keeps_what_it_changed(tmp_path: Path) -> None:
    _, records = run_loop(Method.FEEDBACK, RecordingWriter(), tmp_path)
    first, second, _ = (r.update for r in records)
    assert first.change_kind == "code" and first.change == kernel(1)  # nothing to build on yet
    assert second.change_kind == "diff" and "+    if (i <= n) y[i]" in (second.change or "")
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        stored = store.get_steps(first.run_id)
    assert [s.change for s in stored] == [r.update.change for r in records]


def test_flat_shows_the_most_similar_steps_with_their_change_and_strategy(tmp_path: Path) -> None:
    run_loop(Method.HTAM, RecordingWriter(), tmp_path, task_id=GEMM)  # another task's steps, with strategies
    run_loop(Method.FEEDBACK, RecordingWriter(), tmp_path)  # this task's steps, without
    writer = RecordingWriter()
    run_loop(Method.FLAT, writer, tmp_path)
    generates = [p for p in writer.prompts if p.template == "generate"]
    first = generates[0]
    retrieved = first.context["retrieved"]
    assert len(retrieved) == 5 and retrieved[0]["task_id"] == "level1/19_ReLU"
    sims = [r["similarity"] for r in retrieved]
    assert sims == sorted(sims, reverse=True) and sims[0] > 0
    assert "Past steps of other runs, most similar to this one first" in first.user
    assert "### 1. level1/19_ReLU: ok, 0.797x, reward +0.00" in first.user
    assert "Its code:\n```python" in first.user or "Its change, as a diff" in first.user
    gemm_steps = [r for r in retrieved if r["task_id"] == GEMM]
    assert all(r["strategy"] and r["local_id"] for r in gemm_steps)
    if gemm_steps:
        assert f"Strategy: `{gemm_steps[0]['local_id']}`" in first.user
    # the ranking follows the step: the base's code and the last feedback change the query
    assert [r["similarity"] for r in generates[0].context["retrieved"]] != [
        r["similarity"] for r in generates[2].context["retrieved"]
    ]


def test_words_split_names_and_identifiers() -> None:
    assert words("Gemm_Bias_ReLU gemmKernel x 42")["gemm"] == 2
    assert cosine(words("relu_kernel fmaxf"), words("fmaxf relu")) > cosine(words("relu_kernel"), words("gemm tile"))
