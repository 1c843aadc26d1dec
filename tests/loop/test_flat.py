"""The flat-memory baseline through the real loop, on the H200 table's replay (no GPU):
it records each step's parent kernel and change, and under the catalog its strategy is the
one the retrieved steps value highest (docs/method.md, "flat")."""

from __future__ import annotations

from pathlib import Path

from htam_graph.catalog.client import SPACE_MODEL, CatalogClient
from htam_graph.catalog.families import family_of
from htam_graph.config import ScoringParams
from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.records import StepRecord
from htam_graph.loop.runs import create_run
from htam_graph.loop.table import TableEvaluator
from htam_graph.memory.models import RunConfig, RunRecord, StepUpdate, TaskRecord
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.tasks import resolve_task
from htam_graph.vocab import Method, Verdict

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "bench/results/table-2026-12-04-h200-suite/table.parquet"
TASK = "level1/10_RMSNorm"


def _run(store: SQLiteStore, table: TableEvaluator, tmp: Path, run_id: str) -> list[StepRecord]:
    task = resolve_task(TASK)
    evaluator = table.for_run(run_id)
    manifest, folder = create_run(
        out=tmp / "runs", task=task, method=Method.FLAT, seed=0,
        config=RunConfig(steps=3, scoring=ScoringParams(reward_from="parent")), llm=f"catalog:{SPACE_MODEL}",
        evaluator=evaluator.label, device=evaluator.device, target=evaluator.target, run_id=run_id,
    )  # fmt: skip
    Optimizer(
        store=store, client=CatalogClient(SPACE_MODEL), evaluator=evaluator, task=task, manifest=manifest, folder=folder
    ).run()
    return [StepRecord.model_validate_json(p.read_text()) for p in sorted((folder / "steps").glob("*.json"))]


def test_flat_records_its_parents_and_chooses_what_its_memory_values(tmp_path: Path) -> None:
    table = TableEvaluator(H200)
    task = resolve_task(TASK)
    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        store.seed(load_seed_bank())
        first = _run(store, table, tmp_path, "flat-a")
        assert [t.family for t in store.get_tasks()] == [family_of(task.source)] and family_of(task.source)
        for record in first:
            u = record.update
            assert u.local_id is not None and u.parent_sha256 is not None
            assert (u.change != "") == (record.final.source is not None) and len(u.change) <= 3000
        # prior runs of the same task from the same start kernel (weight 1): first the first run's
        # step-0 strategy doubled the speed five times (flat's next run takes it), then it failed
        # twelve times (V < 0: the next run takes an untried strategy, V = 0, instead)
        start = first[0].update.parent_sha256
        offered = first[0].update.local_id
        local = next(loc for loc in store.get_locals() if loc.id == offered)
        for run, n, ok in (("prior-good", 5, True), ("prior-bad", 12, False)):
            store.start_run(RunRecord(id=run, task_id=task.id, config=RunConfig(steps=n)), TaskRecord(id=task.id))
            for i in range(n):
                prior = StepUpdate(
                    id=f"{run}:{i}", run_id=run, task_id=task.id, index=i, global_id=local.global_id,
                    local_id=local.id, verdict=Verdict.OK if ok else Verdict.INCORRECT, parent_sha256=start,
                    speedup=2.0 if ok else None, best_before=1.0, best_after=2.0 if ok else 1.0,
                )  # fmt: skip
                assert store.record_step(prior)
            again = _run(store, table, tmp_path, f"flat-after-{run}")
            assert (again[0].update.local_id == offered) == ok
