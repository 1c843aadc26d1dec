"""The export file formats in process: version 3 written and read back exactly, version 2
read piece by piece (tiny chunks: every value straddles a chunk boundary), and a memory's
references checked by the same rules whichever way it arrives."""

from __future__ import annotations

import json

import pytest

from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput, ConfigError
from htam_graph.memory import export_file
from htam_graph.memory.export_file import ExportFile, write_export
from htam_graph.memory.models import GlobalScore, MemorySnapshot
from htam_graph.memory.store import check_finite
from tests.memory.test_store_conformance import G, make_step, seeded


@pytest.fixture
def snapshot(local_store) -> MemorySnapshot:
    seeded(local_store)
    for i in range(4):
        local_store.record_step(make_step(i, [G[0], G[2]][: min(i, 2)], G[i + 1], [0.5, -1.0][i % 2]))
    return local_store.export()


def test_version_3_round_trips_exactly(snapshot, tmp_path):
    path = tmp_path / "m.jsonl"
    with path.open("w") as fh:
        counts = write_export(snapshot.items(), fh)
    exported = ExportFile(path)
    assert exported.check() == counts == {k: len(getattr(snapshot, k)) for k in counts}
    assert MemorySnapshot(**{k: [r for s, r in exported.items() if s == k] for k in counts}) == snapshot


def test_version_2_is_read_in_chunks(snapshot, tmp_path, monkeypatch):
    monkeypatch.setattr(export_file, "_CHUNK", 7)
    path = tmp_path / "v2.json"
    path.write_text(
        json.dumps({"format": "htam-graph/memory", "version": 2, **snapshot.model_dump(mode="json")}, indent=1)
    )
    exported = ExportFile(path)
    assert exported.check()["steps"] == 4
    assert [r for _, r in exported.items()] == [r for _, r in snapshot.items()]


def test_a_version_2_record_longer_than_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(export_file, "MAX_LINE", 100)
    path = tmp_path / "v2.json"
    path.write_text(
        json.dumps({"format": "htam-graph/memory", "version": 2, "tasks": [{"id": "t", "name": "x" * 500}]})
    )
    with pytest.raises(BadInput, match="a record longer than 100 characters") as err:
        ExportFile(path).check()
    assert err.value.path == path


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["steps"].append(d["steps"][0]), "duplicate step id"),
        (lambda d: d["globals"].append(d["globals"][0]), "duplicate global id"),
        (lambda d: d["steps"][1].update(prefix=["nowhere"]), "unknown global 'nowhere'"),
        (lambda d: d["runs"][0].update(task_id="other"), "unknown task 'other'"),
        (lambda d: d["locals"][0]["positive"].append(d["locals"][1]["positive"][0] | {"step_id": "ghost"}), "ghost"),
    ],
)
def test_a_snapshot_in_memory_is_checked_like_a_file(snapshot, change, message):
    data = snapshot.model_dump(mode="json")
    data["locals"][0]["positive"] = data["locals"][1]["positive"] = [
        {"step_id": "run-1:0", "task_id": "level1/1_Toy", "verdict": "ok", "reward": 0.5}
    ]
    MemorySnapshot.model_validate(data)  # the evidence above names a real step
    change(data)
    with pytest.raises(ValueError, match=message):
        MemorySnapshot.model_validate(data)


def test_non_finite_scores_are_refused():
    ok = GlobalScore(global_id="a", base=0.5, transition=0.1, score=0.35)
    assert check_finite([ok], ScoringParams()) == [ok]
    with pytest.raises(ConfigError, match="give non-finite scores"):
        check_finite([ok, ok.model_copy(update={"score": float("inf")})], ScoringParams())
