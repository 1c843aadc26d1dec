"""The task's coarse shape class (docs/method.md, "Conditioning on the shape class"):
computed without a GPU from the bytes the reference moves, kept on the task record by both
stores (export and import included), and, with `by_shape`, narrowing the family's evidence
to the tasks of the same shape class."""

from __future__ import annotations

from pathlib import Path

import pytest

from htam_graph.config import ScoringParams
from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.runs import create_run, task_context
from htam_graph.memory.export_file import ExportFile, write_export
from htam_graph.memory.models import MemorySnapshot, RunConfig, RunRecord, TaskRecord
from htam_graph.memory.scoring import FamilyEvidence, score_globals
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.tasks import resolve_task
from htam_graph.vocab import L2_BYTES, Method, ShapeClass, shape_class_of
from tests.loop.test_reward_base import Scripted, Writer
from tests.memory.test_family_scoring import PARAMS, PREFIXES, assert_same_scores, fill, make
from tests.memory.test_store_conformance import BANK, STARTED, G


def test_the_thresholds_are_one_and_ten_l2_caches():
    assert shape_class_of(None) is None and shape_class_of(0) is None
    assert shape_class_of(1) == ShapeClass.SMALL
    assert shape_class_of(L2_BYTES) == ShapeClass.SMALL
    assert shape_class_of(L2_BYTES + 1) == ShapeClass.MEDIUM
    assert shape_class_of(10 * L2_BYTES) == ShapeClass.MEDIUM
    assert shape_class_of(10 * L2_BYTES + 1) == ShapeClass.LARGE


@pytest.mark.parametrize(
    ("task", "shape"),
    [
        ("level2/3_Gemm_Bias_ReLU", "medium"),  # 100.7 MB
        ("level1/1_Square_matmul", "medium"),  # 201.3 MB
        ("level1/3_Matrix_vector", "large"),  # 1073.9 MB
        ("level1/19_ReLU", "large"),  # 1073.7 MB
        ("level1/10_RMSNorm", "large"),  # 536.9 MB
    ],
)
def test_suite_tasks_get_their_shape_class_without_a_gpu(task: str, shape: str):
    first = task_context(resolve_task(task))
    assert first.shape_class == shape
    assert task_context(resolve_task(task)).shape_class == first.shape_class  # deterministic


def test_older_task_records_without_a_shape_class_still_load():
    assert TaskRecord.model_validate_json('{"id": "t", "family": "norm"}').shape_class is None


def test_both_stores_keep_the_shape_class_and_round_trip_it(store, tmp_path: Path):
    store.seed(BANK)
    store.start_run(RunRecord(id="r1", task_id="t", started_at=STARTED), TaskRecord(id="t", family="norm"))
    store.start_run(
        RunRecord(id="r2", task_id="t", started_at=STARTED), TaskRecord(id="t", family="norm", shape_class="large")
    )
    store.start_run(  # filled in once, then kept
        RunRecord(id="r3", task_id="t", started_at=STARTED), TaskRecord(id="t", family="norm", shape_class="small")
    )
    store.start_run(
        RunRecord(id="r4", task_id="u", started_at=STARTED), TaskRecord(id="u", family="conv", shape_class="medium")
    )
    assert [(t.id, t.shape_class) for t in store.get_tasks()] == [("t", "large"), ("u", "medium")]
    snap = store.export()
    with SQLiteStore(tmp_path / "copy.sqlite") as copy:
        copy.import_snapshot(snap)
        assert copy.get_tasks() == store.get_tasks()
    path = tmp_path / "memory.jsonl"
    with path.open("w") as fh:
        counts = write_export(snap.items(), fh)
    read = ExportFile(path)
    assert read.check() == counts
    store.reset()
    store.import_snapshot(MemorySnapshot(**{k: [r for s, r in read.items() if s == k] for k in counts}))
    assert [(t.id, t.family, t.shape_class) for t in store.get_tasks()] == [
        ("t", "norm", "large"),
        ("u", "conv", "medium"),
    ]


def shape_memory():
    """Two tasks of one family and different shape classes, and one of another family."""
    tasks = [
        TaskRecord(id="mm-medium", family="matmul", shape_class="medium"),
        TaskRecord(id="mm-large", family="matmul", shape_class="large"),
        TaskRecord(id="ew-medium", family="elementwise", shape_class="medium"),
    ]
    runs = [RunRecord(id=f"run-{t.id}", task_id=t.id, config=RunConfig(steps=12), started_at=STARTED) for t in tasks]
    steps = [
        make(i, runs[i % 3], [G[(i + 1) % len(G)]] if i % 2 else [], G[i % 4], [1.0, 0.5, 0.0, -1.0][i % 4])
        for i in range(12)
    ]
    return tasks, runs, steps


def test_by_shape_narrows_the_evidence_to_the_tasks_of_the_shape_class(store):
    tasks, runs, steps = shape_memory()
    fill(store, tasks, runs, steps)
    family = FamilyEvidence.of_steps("matmul", [s for s in steps if s.task_id.startswith("mm-")])
    medium = FamilyEvidence.of_steps("matmul", [s for s in steps if s.task_id == "mm-medium"])
    assert store.family_evidence("matmul").rounded() == family.rounded()
    assert store.family_evidence("matmul", None).rounded() == family.rounded()
    assert store.family_evidence("matmul", "medium").rounded() == medium.rounded()
    assert medium.rounded() != family.rounded()
    assert store.family_evidence("matmul", "small").globals == {}  # an empty cell
    globals_, edges = store.get_globals(), {(e.source, e.target): e for e in store.get_transitions()}
    for prefix in PREFIXES:
        for params in PARAMS:
            got = store.score(prefix, params, "matmul", shape_class="medium")
            assert_same_scores(got, score_globals(globals_, edges, prefix, params, medium))
            assert store.score(prefix, params, "matmul", shape_class=None) == store.score(prefix, params, "matmul")
    assert store.score([G[0]], ScoringParams(), "matmul", "medium") != store.score([G[0]], ScoringParams(), "matmul")


def optimizer(tmp: Path, store: SQLiteStore, by_shape: bool, method: Method = Method.HTAM) -> Optimizer:
    task = resolve_task("level1/19_ReLU")  # elementwise, large
    config = RunConfig(steps=1, scoring=ScoringParams(by_shape=by_shape))
    manifest, folder = create_run(
        out=tmp / "runs", task=task, method=method, seed=0, config=config, llm="writer:fake",
        evaluator="scripted", device=Scripted.device, target=Scripted.target, run_id=f"shape-{by_shape}-{method}",
    )  # fmt: skip
    return Optimizer(store=store, client=Writer(), task=task, evaluator=Scripted(), manifest=manifest, folder=folder)


def test_the_loop_records_the_shape_class_and_conditions_on_its_cell_when_asked(tmp_path: Path):
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        fill(store, *shape_memory())
        off, on = optimizer(tmp_path, store, False), optimizer(tmp_path, store, True)
        assert off.shape_class == on.shape_class == "large"
        assert off._shape_cell() is None  # default: the family's evidence, as before
        assert on._shape_cell() is None  # no elementwise task is large yet: the family's evidence
        assert optimizer(tmp_path, store, True, Method.HTAM_NO_FAMILY)._shape_cell() is None
        on.run()
        [task] = [t for t in store.get_tasks() if t.id == "level1/19_ReLU"]
        assert (task.family, task.shape_class) == ("elementwise", "large")
        assert on._shape_cell() == "large"  # its own step now fills the cell
        assert off._shape_cell() is None
