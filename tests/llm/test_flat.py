"""The flat baseline with a language model (issue 34, item 10): the store's similar steps
(docs/method.md, "flat": same task and parent kernel 1, same task 1/2, same family 1/4,
other 1/8) are shown with what each changed (a diff against the kernel it modified), its
outcome, its note and the text of the strategy it applied."""

from __future__ import annotations

from pathlib import Path

from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.vocab import Method
from tests.llm.loop_harness import RecordingWriter, run_loop

GEMM = "level2/3_Gemm_Bias_ReLU"


def test_a_step_keeps_what_it_changed(tmp_path: Path) -> None:
    _, records = run_loop(Method.FEEDBACK, RecordingWriter(), tmp_path)
    first, second, _ = (r.update for r in records)
    assert first.change.startswith("--- parent\n+++ candidate")  # against the reference
    assert "+    if (i <= n) y[i]" in second.change and "-    if (i < n) y[i]" in second.change
    assert first.parent_sha256 != second.parent_sha256
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        stored = store.get_steps(first.run_id)
    assert [s.change for s in stored] == [r.update.change for r in records]


def test_flat_shows_the_similar_steps_with_their_strategy_and_change(tmp_path: Path) -> None:
    run_loop(Method.HTAM, RecordingWriter(), tmp_path, task_id=GEMM)  # another task's steps, with strategies
    run_loop(Method.FEEDBACK, RecordingWriter(), tmp_path)  # this task's steps, without
    writer = RecordingWriter()
    run_loop(Method.FLAT, writer, tmp_path)
    first = next(p for p in writer.prompts if p.template == "generate")
    retrieved = first.context["retrieved"]
    # this task's steps first (the one that modified the reference, as this step does, at 1),
    # then the other task's at its tier
    assert [r["task_id"] for r in retrieved] == ["level1/19_ReLU"] * 3 + [GEMM] * 2
    assert [r["weight"] for r in retrieved][:3] == [1.0, 0.5, 0.5]
    assert {r["weight"] for r in retrieved[3:]} <= {0.25, 0.125}
    assert all(r["strategy"] is None for r in retrieved[:3])  # feedback applied none
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        locals_ = {loc.id: loc for loc in store.get_locals()}
    for r in retrieved[3:]:
        loc = locals_[r["local_id"]]
        assert r["strategy"] == f"{loc.name}: {loc.pattern}"
        assert f"  Strategy: {loc.name}: " in first.user
    assert "Past steps of other runs, most similar first" in first.user
    # reward_from = parent: 0.797x against its parent, the reference
    assert "- level1/19_ReLU (similarity 1.0): ok, 0.797x, reward -0.33" in first.user
    assert "```diff\n--- parent\n+++ candidate" in first.user
