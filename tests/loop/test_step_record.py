"""One step record (issue 32): steps/NNN.json keeps what the memory does not (timings, the
draw, the calls, the attempts) beside the step's StepUpdate, and reads the rest from it. A
record written before, with copies of the update's fields, still loads when they agree."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from htam_graph.loop.optimizer import load_steps
from htam_graph.loop.records import FROM_UPDATE, StepRecord
from htam_graph.memory.models import StepUpdate
from htam_graph.vocab import Verdict


def record() -> StepRecord:
    update = StepUpdate(
        id="run-1:0", run_id="run-1", task_id="level1_19_relu", index=0, global_id="memory", local_id="memory.tiling",
        verdict=Verdict.OK, speedup=1.5, best_before=1.0, best_after=1.5, note="tiled the loads",
    )  # fmt: skip
    return StepRecord(index=0, started_at=datetime(2026, 12, 5, tzinfo=UTC), calls=[], attempts=[], update=update)


def old_format(step: StepRecord) -> dict:
    """The record as it was written before: the update's fields repeated at the top."""
    data = json.loads(step.model_dump_json())
    assert not set(FROM_UPDATE) & set(data)  # written once, in the update
    return {**data, **{key: data["update"][key] for key in FROM_UPDATE}}


def test_the_record_reads_the_step_from_its_update() -> None:
    step = record()
    assert (step.global_id, step.local_id, step.verdict) == ("memory", "memory.tiling", Verdict.OK)
    assert (step.speedup, step.best_before, step.best_after, step.note) == (1.5, 1.0, 1.5, "tiled the loads")
    assert StepRecord.model_validate_json(step.model_dump_json()) == step


def test_a_record_written_before_the_change_still_loads(tmp_path: Path) -> None:
    steps = tmp_path / "steps"
    steps.mkdir()
    written = record()
    (steps / "000.json").write_text(json.dumps(old_format(written), indent=1))
    (loaded,) = load_steps(tmp_path)
    assert loaded.model_dump_json() == written.model_dump_json()
    assert loaded.verdict == Verdict.OK and loaded.best_after == 1.5
    assert not set(FROM_UPDATE) & set(json.loads(loaded.model_dump_json()))


@pytest.mark.parametrize(
    "key, value",
    [("verdict", "incorrect"), ("speedup", 2.0), ("best_after", 1.0), ("note", "another"), ("global_id", None)],
)
def test_an_old_record_that_disagrees_with_its_update_is_refused(key: str, value: object) -> None:
    data = {**old_format(record()), key: value}
    with pytest.raises(ValidationError, match=f"{key} .* disagrees with the step's update"):
        StepRecord.model_validate_json(json.dumps(data))


def test_a_record_needs_the_runs_best_before_and_after() -> None:
    update = record().update.model_copy(update={"best_before": None, "best_after": None, "speedup": None})
    with pytest.raises(ValidationError, match="best speedup before and after"):
        StepRecord(index=0, started_at=datetime(2026, 12, 5, tzinfo=UTC), calls=[], attempts=[], update=update)
