"""The HTG natively in Neo4j: (:Global)-[:HAS_LOCAL]->(:Local),
(:Global)-[:TRANSITION {evidence}]->(:Global), and run records (:Task)<-[:ON_TASK]-(:Run)
-[:HAS_STEP]->(:Step)-[:CHOSE_GLOBAL|CHOSE_LOCAL]->..., (:Step)-[:NEXT]->(:Step).

Every query lives in cypher/*.cypher; values always travel as parameters.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import neo4j

from htam_graph.config import ScoringParams, Settings
from htam_graph.memory.models import (
    MAX_DISTANCE,
    MAX_EVIDENCE,
    Evidence,
    GlobalNode,
    GlobalScore,
    LocalNode,
    MemorySnapshot,
    RunRecord,
    Stats,
    StepUpdate,
    TaskRecord,
    Transition,
)
from htam_graph.memory.neo4j_driver import connect, neo4j_uri, require_version
from htam_graph.memory.queries import checked, statements
from htam_graph.memory.scoring import check_prefix
from htam_graph.memory.seed import SeedBank
from htam_graph.memory.store import (
    STATIC_EDGE,
    STATIC_GLOBAL,
    STATIC_LOCAL,
    TREND_DECAY,
    MemoryStore,
    SeedReport,
    StepEffects,
    check_replay,
    check_step_refs,
)

log = logging.getLogger(__name__)

BATCH = 2000
# A new node's statistics and a new edge's properties, written ON CREATE (one definition:
# the pydantic models' defaults).
ZERO_STATS = Stats().model_dump()
ZERO_EDGE = Transition(source="a", target="b").model_dump(exclude={"source", "target"})
assert len(ZERO_EDGE["n_by_k"]) == MAX_DISTANCE


def _exec(tx: neo4j.ManagedTransaction, name: str, **params: Any) -> neo4j.Result:
    """Run cypher/<name>.cypher in a transaction, its parameters checked against the file."""
    return tx.run(checked(name, params), params)


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
    return {**run.model_dump(exclude={"config"}), "config": run.config.model_dump_json()}


def _run_record(p: dict) -> RunRecord:
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
        try:
            require_version(self.driver, self.uri)
        except BaseException:
            self.driver.close()
            raise

    def close(self) -> None:
        self.driver.close()

    def describe(self) -> str:
        return f"{self.uri} (database {self.database})"

    def _read(self, name: str, **params: Any) -> list[neo4j.Record]:
        records, _, _ = self.driver.execute_query(
            checked(name, params), params, database_=self.database, routing_=neo4j.RoutingControl.READ
        )
        return records

    def _write(self, name: str, **params: Any) -> list[neo4j.Record]:
        records, _, _ = self.driver.execute_query(checked(name, params), params, database_=self.database)
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
        return [_run_record(r["p"]) for r in self._read("read_runs")]

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
        return [GlobalScore.model_validate(dict(r)) for r in records]

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
            session.run(checked("reset", ())).consume()


def _batches(tx: neo4j.ManagedTransaction, name: str, rows: list[dict], **params: Any) -> None:
    for i in range(0, len(rows), BATCH):
        _exec(tx, name, rows=rows[i : i + BATCH], **params).consume()


def _write_snapshot(tx: neo4j.ManagedTransaction, snap: MemorySnapshot, full: bool) -> None:
    """Upsert a snapshot's records. full=False writes static knowledge only (seeding keeps
    runtime statistics); full=True writes everything as exported."""
    _batches(tx, "upsert_globals", [_global_row(g, full) for g in snap.globals], zero_stats=ZERO_STATS)
    _batches(tx, "upsert_locals", [_local_row(loc, full) for loc in snap.locals], zero_stats=ZERO_STATS)
    edges = [
        {
            "source": t.source,
            "target": t.target,
            "props": t.model_dump(exclude={"source", "target"}) if full else t.model_dump(include=STATIC_EDGE),
        }
        for t in snap.transitions
    ]
    _batches(tx, "upsert_transitions", edges, zero_edge=ZERO_EDGE)
    for task in snap.tasks:
        _exec(tx, "upsert_task", task=task.model_dump()).consume()
    for run in snap.runs:
        _exec(tx, "start_run", run=_run_row(run), task={"id": run.task_id}).consume()
    _batches(tx, "upsert_steps", [_step_row(s) for s in snap.steps])


def _apply_step(tx: neo4j.ManagedTransaction, step: StepUpdate, fx: StepEffects) -> bool:
    """One step's writes in one transaction (retried by the driver on transient errors)."""
    ref = _exec(
        tx,
        "step_check",
        global_ids=sorted({step.global_id, *step.prefix}) if step.global_id is not None else [],
        local_id=step.local_id,
        run_id=step.run_id,
    ).single(strict=True)
    check_step_refs(step, set(ref["known_globals"]), ref["local_parent"], ref["run_exists"])
    claim = _exec(tx, "step_claim", id=step.id).single(strict=True)
    if not claim["fresh"]:
        check_replay(_step(claim["stored"]), step)
        return False
    if step.global_id is not None:
        _apply_to_htg(tx, step, fx)
    _exec(tx, "upsert_steps", rows=[_step_row(step)]).consume()
    return True


def _apply_to_htg(tx: neo4j.ManagedTransaction, step: StepUpdate, fx: StepEffects) -> None:
    """The chosen global's, local's and the prefix edges' statistics, in the step's transaction."""
    outcome = {"reward": step.reward, "c": fx.outcome.counters.model_dump()}
    _exec(tx, "step_update_global", global_id=step.global_id, decay=TREND_DECAY, **outcome).consume()
    if step.local_id is not None:
        _exec(
            tx,
            "step_update_local",
            local_id=step.local_id,
            positive=fx.positive,
            evidence=step.evidence().model_dump_json(),
            max_evidence=MAX_EVIDENCE,
            **outcome,
        ).consume()
    edges = [ed.model_dump() for ed in fx.edges]
    _exec(
        tx,
        "step_update_transitions",
        global_id=step.global_id,
        edges=edges,
        zero_edge=ZERO_EDGE,
        note=step.note,
        max_notes=MAX_EVIDENCE,
    ).consume()
