"""The flat baseline with a language model (issue 34, item 10): the store's similar steps
(docs/method.md, "flat": same task and parent kernel 1, same task 1/2, same family 1/4,
other 1/8) are shown with what each changed (a diff against the kernel it modified), its
outcome, its note and the text of the strategy it applied."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.vocab import Method
from tests.llm.loop_harness import RecordingWriter, run_loop

GEMM = "level2/3_Gemm_Bias_ReLU"
SHOWN = re.compile(r"- (?P<task_id>\S+) \(similarity (?P<weight>[\d.]+)\)(?:, `(?P<local_id>[^`]+)`)?: ")


class Shown(NamedTuple):
    """A similar step as the prompt shows it (prompts/_retrieved.j2)."""

    task_id: str
    weight: float
    local_id: str | None
    strategy: str | None  # its strategy's text, up to the line's end


def shown_steps(user: str) -> list[Shown]:
    """The similar steps a prompt shows, most similar first."""
    shown: list[Shown] = []
    for line in user.split("## Similar steps from the memory", 1)[1].splitlines():
        if (m := SHOWN.match(line)) is not None:
            strategy = line.split("  Strategy: ", 1)[1] if "  Strategy: " in line else None
            shown.append(Shown(m["task_id"], float(m["weight"]), m["local_id"], strategy))
    return shown


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
    retrieved = shown_steps(first.user)
    # this task's steps first (the one that modified the reference, as this step does, at 1),
    # then the other task's at its tier
    assert [r.task_id for r in retrieved] == ["level1/19_ReLU"] * 3 + [GEMM] * 2
    assert [r.weight for r in retrieved][:3] == [1.0, 0.5, 0.5]
    assert {r.weight for r in retrieved[3:]} <= {0.25, 0.125}
    assert all(r.local_id is None and r.strategy is None for r in retrieved[:3])  # feedback applied none
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        locals_ = {loc.id: loc for loc in store.get_locals()}
    for r in retrieved[3:]:
        assert r.local_id is not None and r.strategy is not None
        loc = locals_[r.local_id]
        assert f"{loc.name}: {loc.pattern}".strip().startswith(r.strategy.removesuffix("..."))
        assert r.strategy.startswith(f"{loc.name}: ")
    assert "Past steps of other runs, most similar first" in first.user
    # reward_from = parent: 0.797x against its parent, the reference
    assert "- level1/19_ReLU (similarity 1.0): ok, 0.797x, reward -0.33" in first.user
    assert "```diff\n--- parent\n+++ candidate" in first.user
