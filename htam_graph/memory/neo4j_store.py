"""The HTG natively in Neo4j: (:Global)-[:HAS_LOCAL]->(:Local),
(:Global)-[:TRANSITION {evidence}]->(:Global), and run records (:Task)<-[:ON_TASK]-(:Run)
-[:HAS_STEP]->(:Step)-[:CHOSE_GLOBAL|CHOSE_LOCAL]->..., (:Step)-[:NEXT]->(:Step).

Every query lives in cypher/*.cypher; values always travel as parameters. A step is one
query that the server commits on its own (one round trip; its locks are taken in one
order, so concurrent writers never deadlock). Imports, exports and resets run in bounded
transactions and pages; an import or reset marks itself pending on the (:MemoryState)
node while it runs, so one that is cut short leaves a memory every command refuses until
`htam memory reset`.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from itertools import groupby, islice
from operator import itemgetter
from typing import Any

import neo4j
from neo4j.exceptions import ServiceUnavailable, SessionExpired, TransientError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_delay, wait_random_exponential

from htam_graph.config import ScoringParams, Settings
from htam_graph.errors import StoreStateError, UserError
from htam_graph.memory.models import (
    MAX_DISTANCE,
    MAX_EVIDENCE,
    OTHER_WEIGHT,
    SAME_FAMILY_WEIGHT,
    SAME_PARENT_WEIGHT,
    SAME_TASK_WEIGHT,
    SECTIONS,
    Evidence,
    GlobalNode,
    GlobalScore,
    LocalNode,
    RunRecord,
    Section,
    SimilarStep,
    SnapshotItem,
    SnapshotRecord,
    Stats,
    StepUpdate,
    TaskRecord,
    Transition,
)
from htam_graph.memory.neo4j_driver import (
    RETRY_S,
    connect,
    neo4j_uri,
    require_version,
    server_failure,
    server_gone,
    streamed_user_errors,
    user_errors,
)
from htam_graph.memory.queries import checked, checked_statements
from htam_graph.memory.scoring import FamilyEvidence, Tally, check_prefix
from htam_graph.memory.seed import SeedBank
from htam_graph.memory.store import (
    STATIC_EDGE,
    STATIC_GLOBAL,
    STATIC_LOCAL,
    TREND_DECAY,
    MemoryStore,
    PendingOperation,
    SeedReport,
    StepEffects,
    UnfinishedOperation,
    check_finite,
    check_replay,
    check_step_refs,
    checked_items,
)

log = logging.getLogger(__name__)

BATCH = 2000  # rows per import transaction, nodes per reset transaction
PAGE = 5000  # tasks or runs per export read
RUN_PAGE = 500  # runs whose steps one export read fetches
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


def _local_row(loc: LocalNode) -> dict:
    row = loc.model_dump(exclude={"positive", "negative"})
    row["positive"] = [e.model_dump_json() for e in loc.positive]
    row["negative"] = [e.model_dump_json() for e in loc.negative]
    return row


def _local(p: dict) -> LocalNode:
    p = dict(p)
    for side in ("positive", "negative"):
        p[side] = [Evidence.model_validate_json(e) for e in p.get(side, [])]
    return LocalNode.model_validate(p)


def _transition_row(t: Transition) -> dict:
    return {"source": t.source, "target": t.target, "props": t.model_dump(exclude={"source", "target"})}


def _transition(r: neo4j.Record) -> Transition:
    return Transition.model_validate({**r["p"], "source": r["source"], "target": r["target"]})


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


# How an import writes each section: its query and the rows that query takes.
_IMPORT: dict[Section, tuple[str, Callable[[Any], dict]]] = {
    "globals": ("import_globals", lambda g: g.model_dump()),
    "locals": ("import_locals", _local_row),
    "transitions": ("import_transitions", _transition_row),
    "tasks": ("import_tasks", lambda t: t.model_dump()),
    "runs": ("import_runs", _run_row),
    "steps": ("import_steps", _step_row),
}


def _pending(row: neo4j.Record) -> PendingOperation | None:
    if row["pending"] is None:
        return None
    return PendingOperation(kind=row["pending"], since=_native(row["since"]), source=row["source"] or "")


def _now() -> datetime:
    return datetime.now(UTC)


class Neo4jStore(MemoryStore):
    kind = "neo4j"

    def __init__(self, settings: Settings, allow_pending: bool = False):
        """Connect; refuse a memory whose import or reset did not finish unless
        `allow_pending` (what `htam memory reset` needs to discard or finish it)."""
        self.uri = neo4j_uri(settings)
        self.database = settings.neo4j_database
        self.driver = connect(settings)
        self._schema_ready = False
        try:
            self._require_version()
            if not allow_pending and (pending := self.pending_operation()):
                raise UnfinishedOperation(self.describe(), pending)
        except BaseException:
            self.driver.close()
            raise

    @user_errors("connecting")
    def _require_version(self) -> None:
        require_version(self.driver, self.uri)

    def close(self) -> None:
        self.driver.close()

    def describe(self) -> str:
        return f"{self.uri} (database {self.database})"

    def _read(self, name: str, **params: Any) -> list[neo4j.Record]:
        return self._autocommit(checked(name, params), params)[0]

    def _autocommit(self, query: str, params: dict[str, Any]) -> tuple[list[neo4j.Record], int]:
        """One query in a transaction the server commits by itself: one round trip, and
        locks held only while the server runs it. Retried (logged) while the server is busy
        or unreachable, so only idempotent queries come here: reads, and record_step (a
        replay of a committed step is recognised). Returns the records and the attempts."""
        attempts = 0
        for attempt in Retrying(
            retry=retry_if_exception_type((TransientError, ServiceUnavailable, SessionExpired)),
            stop=stop_after_delay(RETRY_S),
            wait=wait_random_exponential(multiplier=0.05, max=2.0),
            before_sleep=self._log_retry,
            reraise=True,
        ):
            with attempt, self._session() as session:
                attempts += 1
                records = list(session.run(query, params))
        return records, attempts

    def _write(self, name: str, **params: Any) -> list[neo4j.Record]:
        records, _, _ = self.driver.execute_query(checked(name, params), params, database_=self.database)
        return records

    def _session(self) -> neo4j.Session:
        return self.driver.session(database=self.database)

    @user_errors("creating the schema")
    def init_schema(self) -> None:
        # One statement at a time: concurrent schema creation can race.
        for stmt, _ in checked_statements("schema", ()):
            self.driver.execute_query(stmt, database_=self.database)
        self._schema_ready = True

    def _ensure_schema(self) -> None:
        if not self._schema_ready:
            self.init_schema()

    @user_errors("reading the memory")
    def pending_operation(self) -> PendingOperation | None:
        return _pending(self._read("memory_state")[0])

    @user_errors("seeding the memory")
    def seed(self, bank: SeedBank) -> SeedReport:
        self._ensure_schema()
        with self._session() as session:
            session.execute_write(_seed, bank, self.describe())
        return SeedReport(globals=len(bank.globals), locals=len(bank.locals), transitions=len(bank.transitions))

    @user_errors("reading the memory")
    def get_globals(self) -> list[GlobalNode]:
        return [GlobalNode.model_validate(r["p"]) for r in self._read("read_globals")]

    @user_errors("reading the memory")
    def get_locals(self, global_id: str | None = None) -> list[LocalNode]:
        return [_local(r["p"]) for r in self._read("read_locals", global_id=global_id)]

    @user_errors("reading the memory")
    def get_transitions(self) -> list[Transition]:
        return [_transition(r) for r in self._read("read_transitions")]

    def get_tasks(self) -> list[TaskRecord]:
        return [t for t in self.iter_section("tasks") if isinstance(t, TaskRecord)]

    def get_runs(self) -> list[RunRecord]:
        return [r for r in self.iter_section("runs") if isinstance(r, RunRecord)]

    @user_errors("reading the memory")
    def get_steps(self, run_id: str | None = None) -> list[StepUpdate]:
        if run_id is None:
            return [s for s in self.iter_section("steps") if isinstance(s, StepUpdate)]
        return [_step(r["p"]) for r in self._read("read_steps", run_ids=[run_id])]

    @user_errors("reading steps")
    def similar_steps(
        self, task_id: str, family: str | None, parent_sha256: str | None, exclude_run: str, limit: int
    ) -> list[SimilarStep]:
        rows = self._read(
            "similar_steps",
            task_id=task_id,
            family=family,
            parent_sha256=parent_sha256,
            exclude_run=exclude_run,
            limit=limit,
            weights=[SAME_PARENT_WEIGHT, SAME_TASK_WEIGHT, SAME_FAMILY_WEIGHT, OTHER_WEIGHT],
        )
        return [SimilarStep(step=_step(r["p"]), weight=r["w"]) for r in rows]

    def iter_section(self, section: Section) -> Iterator[SnapshotRecord]:
        return streamed_user_errors(self._section(section), self.uri, "reading the memory")

    def _section(self, section: Section) -> Iterator[SnapshotRecord]:
        if section == "globals":
            yield from self.get_globals()
        elif section == "locals":
            yield from self.get_locals()
        elif section == "transitions":
            yield from self.get_transitions()
        elif section == "tasks":
            for page in self._pages("read_tasks"):
                yield from (TaskRecord.model_validate(p) for p in page)
        elif section == "runs":
            for page in self._pages("read_runs"):
                yield from (_run_record(p) for p in page)
        else:
            for page in self._pages("read_runs", RUN_PAGE):
                for r in self._read("read_steps", run_ids=[p["id"] for p in page]):
                    yield _step(r["p"])

    def _pages(self, name: str, limit: int = PAGE) -> Iterator[list[dict]]:
        """Records in id order, one page per read (a read of 10^5 records at once would
        hold them all in the server's and the client's memory)."""
        after = ""
        while page := [r["p"] for r in self._read(name, after=after, limit=limit)]:
            yield page
            after = page[-1]["id"]

    @user_errors("reading the memory")
    def counts(self) -> dict[str, int]:
        return dict(self._read("count_nodes")[0])

    @user_errors("scoring")
    def score(
        self, prefix: list[str], params: ScoringParams, family: str | None = None, shape_class: str | None = None
    ) -> list[GlobalScore]:
        records = self._read(
            "score_globals",
            prefix=prefix[: params.K],
            lam=params.lam,
            alpha=params.alpha,
            beta=params.beta,
            family=family,
            shape_class=shape_class,
        )
        check_prefix(prefix, (r["global_id"] for r in records))
        return check_finite([GlobalScore.model_validate(dict(r)) for r in records], params)

    @user_errors("reading the memory")
    def family_evidence(self, family: str | None, shape_class: str | None = None) -> FamilyEvidence:
        evidence = FamilyEvidence(family=family)
        if family is None:
            return evidence
        for r in self._read("family_steps", family=family, shape_class=shape_class):
            tally = Tally(n=r["n"], reward_sum=r["reward_sum"])
            if r["kind"] == "global":
                evidence.globals[r["id"]] = tally
            elif r["kind"] == "local":
                evidence.locals[r["id"]] = tally
            else:
                evidence.edges.setdefault(r["source"], {})[r["id"]] = tally
        return evidence

    @user_errors("starting a run")
    def start_run(self, run: RunRecord, task: TaskRecord) -> None:
        self._ensure_schema()
        with self._session() as session:
            session.execute_write(_start_run, run, task, self.describe())

    @user_errors("recording a step")
    def record_step(self, step: StepUpdate) -> bool:
        fx = StepEffects.of(step)
        sources = sorted(ed.source for ed in fx.edges)
        params = {
            "step": _step_row(step),
            "global_ids": sorted({step.global_id, *sources}) if step.global_id is not None else [],
            "sources": sources,
            "edges": [ed.model_dump() for ed in fx.edges],
            "c": fx.outcome.counters.model_dump(),
            "reward": step.reward,
            "positive": fx.positive,
            "evidence": step.evidence().model_dump_json(),
            "max_evidence": MAX_EVIDENCE,
            "decay": TREND_DECAY,
            "zero_edge": ZERO_EDGE,
            "note": step.note,
        }
        records, attempts = self._autocommit(checked("record_step", params), params)
        if not records:
            raise self._why_not_recorded(step)
        [row] = records
        if row["fresh"]:
            return True
        stored = _step(row["stored"])
        check_replay(stored, step)
        # A retry after a commit whose answer was lost finds its own step (same timestamp).
        return attempts > 1 and stored.created_at == step.created_at

    def _log_retry(self, state: RetryCallState) -> None:
        # INFO: a retry that then succeeds is no failure, and one that fails ends in the
        # command's one-line error; `logging` at INFO shows them all.
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.info("Neo4j at %s: %s; retry %d in %.2f s", self.uri, error, state.attempt_number, wait)

    def _why_not_recorded(self, step: StepUpdate) -> Exception:
        row = self._read(
            "step_check",
            global_ids=sorted({step.global_id, *step.prefix}) if step.global_id is not None else [],
            local_id=step.local_id,
            run_id=step.run_id,
        )[0]
        if pending := _pending(row):
            return UnfinishedOperation(self.describe(), pending)
        check_step_refs(step, set(row["known_globals"]), row["local_parent"], row["run_task"])
        return RuntimeError(f"record_step wrote nothing for step {step.id!r} though its references resolve")

    @user_errors("importing")
    def import_records(
        self, items: Iterable[SnapshotItem], source: str = "", counts: dict[Section, int] | None = None
    ) -> None:
        """Marked pending first (under the memory's lock, with the emptiness check), then
        written in transactions of BATCH rows that each check the mark, then unmarked: a
        memory whose import was cut short is refused by every command. A failure in this
        process discards what was written; a dead process or server leaves the mark for
        `htam memory reset`."""
        self._ensure_schema()
        token = secrets.token_hex(16)
        self._begin_import(token, source)
        try:
            written = self._write_batches(checked_items(items, counts), token)
            if (stored := self.counts()) != written:
                raise RuntimeError(f"the import wrote {written} but the memory holds {stored}")
            if not self._write("import_finish", token=token)[0]["finished"]:
                raise _MarkReplaced()
        except _MarkReplaced:
            raise StoreStateError(
                f"the import into {self.describe()} was stopped: a reset took the memory over while it ran",
                store=self.describe(),
            ) from None
        except BaseException as e:
            discarded = not (server_gone(e) or server_gone(e.__cause__)) and self._discard(e)
            failure = e if isinstance(e, UserError) else server_failure(e, self.uri, "importing")
            if failure is None:
                raise  # a bug (or an interrupt): its traceback, after the discard
            if not discarded:
                raise failure.with_message(
                    f"{failure}; the import did not finish: run `htam memory reset` to discard it"
                ) from e
            raise failure from e
        log.info("imported %s into %s", source or "records", self.describe())

    def _begin_import(self, token: str, source: str) -> None:
        row = self._write("import_begin", token=token, since=_now(), source=source)[0]
        if pending := _pending(row):
            raise UnfinishedOperation(self.describe(), pending)
        if row["records"]:
            raise self.not_empty()

    def _write_batches(self, items: Iterator[SnapshotItem], token: str) -> dict[str, int]:
        written: dict[str, int] = dict.fromkeys(SECTIONS, 0)
        with self._session() as session:
            for section, group in groupby(items, key=itemgetter(0)):
                query, row = _IMPORT[section]
                rows = (row(record) for _, record in group)
                while batch := list(islice(rows, BATCH)):
                    n = session.execute_write(_import_batch, query, batch, token)
                    if n != len(batch):
                        raise _MarkReplaced()
                    written[section] += n
        return written

    def _discard(self, cause: BaseException) -> bool:
        """Delete what a failed import wrote. When that fails too (the server is gone), the
        mark stays and every command names `htam memory reset`."""
        try:
            self.reset()
        except Exception as e:
            log.warning("could not discard the unfinished import in %s: %s", self.describe(), e)
            return False
        log.warning("discarded the unfinished import in %s after: %r", self.describe(), cause)
        return True

    @user_errors("resetting the memory")
    def reset(self) -> None:
        """Marked pending first, then deleted in transactions of BATCH nodes (steps first),
        then unmarked by its last statement: a reset cut short is finished by the next."""
        self._ensure_schema()
        token = secrets.token_hex(16)
        self._write("reset_begin", token=token, since=_now())
        params = {"batch": BATCH, "token": token}
        with self._session() as session:
            for stmt, names in checked_statements("reset", params):
                session.run(stmt, {k: params[k] for k in names}).consume()


class _MarkReplaced(Exception):
    """An import batch found its mark gone: a reset (or `htam memory reset`) took over."""


def _import_batch(tx: neo4j.ManagedTransaction, query: str, rows: list[dict], token: str) -> int:
    return int(_exec(tx, query, rows=rows, token=token).single(strict=True)["n"])


def _guard(tx: neo4j.ManagedTransaction, where: str) -> None:
    """Take the memory's lock and refuse a memory with an unfinished import or reset."""
    if pending := _pending(_exec(tx, "memory_guard").single(strict=True)):
        raise UnfinishedOperation(where, pending)


def _seed(tx: neo4j.ManagedTransaction, bank: SeedBank, where: str) -> None:
    """Upsert the bank's static knowledge; runtime statistics are kept. Globals go in id
    order, the order in which steps lock them."""
    _guard(tx, where)
    globals_ = sorted(bank.global_nodes(), key=lambda g: g.id)
    rows = [g.model_dump(include=STATIC_GLOBAL) for g in globals_]
    _exec(tx, "upsert_globals", rows=rows, zero_stats=ZERO_STATS).consume()
    locals_ = [loc.model_dump(include=STATIC_LOCAL) for loc in bank.local_nodes()]
    _exec(tx, "upsert_locals", rows=locals_, zero_stats=ZERO_STATS).consume()
    edges = [
        {"source": t.source, "target": t.target, "props": t.model_dump(include=STATIC_EDGE)}
        for t in bank.transition_priors()
    ]
    _exec(tx, "upsert_transitions", rows=edges, zero_edge=ZERO_EDGE).consume()


def _start_run(tx: neo4j.ManagedTransaction, run: RunRecord, task: TaskRecord, where: str) -> None:
    _guard(tx, where)
    _exec(tx, "start_run", run=_run_row(run), task=task.model_dump()).consume()
