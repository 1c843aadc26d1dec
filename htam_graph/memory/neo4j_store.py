"""The HTG natively in Neo4j: (:Global)-[:HAS_LOCAL]->(:Local),
(:Global)-[:TRANSITION {evidence}]->(:Global), and run records (:Task)<-[:ON_TASK]-(:Run)
-[:HAS_STEP]->(:Step)-[:CHOSE_GLOBAL|CHOSE_LOCAL]->..., (:Step)-[:NEXT]->(:Step).

Every query lives in cypher/*.cypher; values always travel as parameters.
"""

from __future__ import annotations

import json
from typing import Any

import neo4j

from htam_graph.config import ScoringParams, Settings
from htam_graph.db import connect, neo4j_uri, server_components
from htam_graph.errors import UserError
from htam_graph.memory.models import (
    MAX_DISTANCE,
    MAX_EVIDENCE,
    Evidence,
    GlobalNode,
    GlobalScore,
    LocalNode,
    MemorySnapshot,
    RunRecord,
    StepUpdate,
    TaskRecord,
    Transition,
)
from htam_graph.memory.queries import query, statements
from htam_graph.memory.seed import SeedBank
from htam_graph.memory.store import (
    STATIC_EDGE,
    STATIC_GLOBAL,
    STATIC_LOCAL,
    TREND_DECAY,
    MemoryStore,
    SeedReport,
    StepEffects,
    check_step_refs,
)
from htam_graph.policy.scoring import check_prefix, with_probabilities

MIN_VERSION = (5, 23)  # CALL (vars) { ... } scoped subqueries
ZEROS = {"zeros_int": [0] * MAX_DISTANCE, "zeros_float": [0.0] * MAX_DISTANCE}
BATCH = 2000


def server_version(driver: neo4j.Driver) -> tuple[int, ...]:
    version, _ = server_components(driver)
    return tuple(int(x) for x in version.split("-")[0].split(".")[:2])


def _native(value: Any) -> Any:
    return value.to_native() if hasattr(value, "to_native") else value


def _global_row(g: GlobalNode, full: bool) -> dict:
    return g.model_dump() if full else g.model_dump(include=STATIC_GLOBAL)


def _local_row(loc: LocalNode, full: bool) -> dict:
    if not full:
        return loc.model_dump(include=STATIC_LOCAL)
    row = loc.model_dump(exclude={"positive", "negative"})
    row["positive"] = [e.model_dump_json() for e in loc.positive]
    row["negative"] = [e.model_dump_json() for e in loc.negative]
    return row


def _local(p: dict) -> LocalNode:
    p = dict(p)
    for side in ("positive", "negative"):
        p[side] = [Evidence.model_validate_json(e) for e in p.get(side, [])]
    return LocalNode.model_validate(p)


def _run_row(run: RunRecord) -> dict:
    return {**run.model_dump(exclude={"config"}), "config": json.dumps(run.config, sort_keys=True)}


def _run(p: dict) -> RunRecord:
    return RunRecord.model_validate({**p, "config": json.loads(p["config"]), "started_at": _native(p["started_at"])})


def _step_row(s: StepUpdate) -> dict:
    row = s.model_dump(exclude={"scores"})
    row["scores"] = json.dumps(s.scores, sort_keys=True)
    return {k: v for k, v in row.items() if v is not None}


def _step(p: dict) -> StepUpdate:
    return StepUpdate.model_validate({**p, "scores": json.loads(p["scores"]), "created_at": _native(p["created_at"])})


class Neo4jStore(MemoryStore):
    kind = "neo4j"

    def __init__(self, settings: Settings):
        self.uri = neo4j_uri(settings)
        self.database = settings.neo4j_database
        self.driver = connect(settings)
        version = server_version(self.driver)
        if version < MIN_VERSION:
            self.driver.close()
            raise UserError(
                f"Neo4j at {self.uri} is {'.'.join(map(str, version))}; htam-graph needs 5.23 or newer "
                "(docker/compose.yml runs 5.26)"
            )

    def close(self) -> None:
        self.driver.close()

    def describe(self) -> str:
        return f"{self.uri} (database {self.database})"

    def _read(self, name: str, **params: Any) -> list[neo4j.Record]:
        records, _, _ = self.driver.execute_query(
            query(name), params, database_=self.database, routing_=neo4j.RoutingControl.READ
        )
        return records

    def _write(self, name: str, **params: Any) -> list[neo4j.Record]:
        records, _, _ = self.driver.execute_query(query(name), params, database_=self.database)
        return records

    def init_schema(self) -> None:
        # One statement at a time: concurrent schema creation can race.
        for stmt in statements("schema"):
            self.driver.execute_query(stmt, database_=self.database)

    def seed(self, bank: SeedBank) -> SeedReport:
        self.init_schema()
        snap = MemorySnapshot(
            globals=bank.global_nodes(), locals=bank.local_nodes(), transitions=bank.transition_priors()
        )
        with self.driver.session(database=self.database) as session:
            session.execute_write(_write_snapshot, snap, False)
        return SeedReport(globals=len(bank.globals), locals=len(bank.locals), transitions=len(bank.transitions))

    def get_globals(self) -> list[GlobalNode]:
        return [GlobalNode.model_validate(r["p"]) for r in self._read("read_globals")]

    def get_locals(self, global_id: str | None = None) -> list[LocalNode]:
        return [_local(r["p"]) for r in self._read("read_locals", global_id=global_id)]

    def get_transitions(self) -> list[Transition]:
        return [
            Transition.model_validate({**r["p"], "source": r["source"], "target": r["target"]})
            for r in self._read("read_transitions")
        ]

    def get_tasks(self) -> list[TaskRecord]:
        return [TaskRecord.model_validate(r["p"]) for r in self._read("read_tasks")]

    def get_runs(self) -> list[RunRecord]:
        return [_run(r["p"]) for r in self._read("read_runs")]

    def get_steps(self, run_id: str | None = None) -> list[StepUpdate]:
        return [_step(r["p"]) for r in self._read("read_steps", run_id=run_id)]

    def counts(self) -> dict[str, int]:
        return dict(self._read("count_nodes")[0])

    def score(self, prefix: list[str], params: ScoringParams) -> list[GlobalScore]:
        records = self._read(
            "score_globals",
            prefix=prefix[: params.K],
            lam=params.lam,
            alpha=params.alpha,
            beta=params.beta,
        )
        check_prefix(prefix, (r["global_id"] for r in records))
        return with_probabilities([GlobalScore.model_validate(dict(r)) for r in records], params.tau)

    def start_run(self, run: RunRecord, task: TaskRecord) -> None:
        self._write("start_run", run=_run_row(run), task=task.model_dump())

    def record_step(self, step: StepUpdate) -> bool:
        fx = StepEffects.of(step)
        with self.driver.session(database=self.database) as session:
            return session.execute_write(_apply_step, step, fx)

    def import_snapshot(self, snap: MemorySnapshot) -> None:
        """The HTG and run headers go in one transaction, steps in batches of their own (a
        single transaction of 10^5 steps outgrows a server's transaction memory). The store
        was empty, so on any failure it is emptied again: nothing half-imported stays."""
        self.require_empty()
        self.init_schema()
        steps = [_step_row(s) for s in snap.steps]
        try:
            with self.driver.session(database=self.database) as session:
                session.execute_write(_write_snapshot, snap.model_copy(update={"steps": []}), True)
                for i in range(0, len(steps), BATCH):
                    session.execute_write(_batches, "upsert_steps", steps[i : i + BATCH])
        except BaseException:
            self.reset()
            raise

    def reset(self) -> None:
        with self.driver.session(database=self.database) as session:
            session.run(query("reset")).consume()


def _batches(tx: neo4j.ManagedTransaction, name: str, rows: list[dict], **params: Any) -> None:
    for i in range(0, len(rows), BATCH):
        tx.run(query(name), rows=rows[i : i + BATCH], **params).consume()


def _write_snapshot(tx: neo4j.ManagedTransaction, snap: MemorySnapshot, full: bool) -> None:
    """Upsert a snapshot's records. full=False writes static knowledge only (seeding keeps
    runtime statistics); full=True writes everything as exported."""
    _batches(tx, "upsert_globals", [_global_row(g, full) for g in snap.globals])
    _batches(tx, "upsert_locals", [_local_row(loc, full) for loc in snap.locals])
    edges = [
        {
            "source": t.source,
            "target": t.target,
            "props": t.model_dump(exclude={"source", "target"}) if full else t.model_dump(include=STATIC_EDGE),
        }
        for t in snap.transitions
    ]
    _batches(tx, "upsert_transitions", edges, **ZEROS)
    for task in snap.tasks:
        tx.run(query("upsert_task"), task=task.model_dump()).consume()
    for run in snap.runs:
        tx.run(query("start_run"), run=_run_row(run), task={"id": run.task_id}).consume()
    _batches(tx, "upsert_steps", [_step_row(s) for s in snap.steps])


def _apply_step(tx: neo4j.ManagedTransaction, step: StepUpdate, fx: StepEffects) -> bool:
    """One step's writes in one transaction (retried by the driver on transient errors)."""
    ref = tx.run(
        query("step_check"),
        global_ids=sorted({step.global_id, *step.prefix}),
        local_id=step.local_id,
        run_id=step.run_id,
    ).single()
    check_step_refs(step, set(ref["known_globals"]), ref["local_parent"], ref["run_exists"])
    if not tx.run(query("step_claim"), id=step.id).single()["fresh"]:
        return False
    outcome = {
        "success": fx.success,
        "reward": step.reward,
        "compile_failure": fx.compile_failure,
        "incorrect": fx.incorrect,
    }
    tx.run(query("step_update_global"), global_id=step.global_id, decay=TREND_DECAY, **outcome).consume()
    tx.run(
        query("step_update_local"),
        local_id=step.local_id,
        positive=fx.positive,
        evidence=step.evidence().model_dump_json(),
        max_evidence=MAX_EVIDENCE,
        **outcome,
    ).consume()
    tx.run(query("step_update_transitions"), global_id=step.global_id, edges=fx.edges, **ZEROS).consume()
    tx.run(query("upsert_steps"), rows=[_step_row(step)]).consume()
    return True
