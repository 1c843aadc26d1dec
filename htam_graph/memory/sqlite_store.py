"""The embedded store: the HTG in one SQLite file (stdlib, transactional, no server).

Used when no Neo4j is configured and on GPU machines. Each record is kept as its
pydantic model's JSON next to the key columns it is looked up by; a step's read-modify-
write runs under `BEGIN IMMEDIATE`, so concurrent processes serialize and lose nothing.
An import is one transaction (all or nothing, also under kill -9); the file and its
journals are private to the user (0600).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from itertools import groupby, islice
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel, ValidationError

from htam_graph.config import ScoringParams
from htam_graph.errors import StoreError
from htam_graph.memory.models import (
    MAX_EVIDENCE,
    OTHER_WEIGHT,
    RECORD_TYPES,
    SAME_FAMILY_WEIGHT,
    SAME_PARENT_WEIGHT,
    SAME_TASK_WEIGHT,
    Counters,
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
from htam_graph.memory.outcome import COUNTER_NAMES
from htam_graph.memory.scoring import FamilyEvidence, check_prefix, score_globals
from htam_graph.memory.seed import SeedBank
from htam_graph.memory.store import (
    STATIC_EDGE,
    STATIC_GLOBAL,
    STATIC_LOCAL,
    TREND_DECAY,
    MemoryStore,
    SeedReport,
    StepEffects,
    check_finite,
    check_replay,
    check_step_refs,
    checked_items,
)

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")
R = TypeVar("R")
BATCH = 10_000  # rows per executemany while importing

SCHEMA = """
CREATE TABLE IF NOT EXISTS globals (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS locals (id TEXT PRIMARY KEY, global_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS transitions (
    source TEXT NOT NULL, target TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (source, target));
CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    id TEXT PRIMARY KEY, run_id TEXT NOT NULL, idx INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS steps_by_run ON steps (run_id, idx);
CREATE INDEX IF NOT EXISTS steps_by_task ON steps (json_extract(data, '$.task_id'));
CREATE INDEX IF NOT EXISTS tasks_by_family ON tasks (json_extract(data, '$.family'));
"""
TABLES = ("globals", "locals", "transitions", "tasks", "runs", "steps")
# Each section's rows: its table's key columns, then the record's JSON.
_INSERT: dict[Section, str] = {
    "globals": "INSERT INTO globals VALUES (?, ?)",
    "locals": "INSERT INTO locals VALUES (?, ?, ?)",
    "transitions": "INSERT INTO transitions VALUES (?, ?, ?)",
    "tasks": "INSERT INTO tasks VALUES (?, ?)",
    "runs": "INSERT INTO runs VALUES (?, ?)",
    "steps": "INSERT INTO steps VALUES (?, ?, ?, ?)",
}
_ROW: dict[Section, Callable[[Any], tuple]] = {
    "globals": lambda g: (g.id, g.model_dump_json()),
    "locals": lambda loc: (loc.id, loc.global_id, loc.model_dump_json()),
    "transitions": lambda t: (t.source, t.target, t.model_dump_json()),
    "tasks": lambda t: (t.id, t.model_dump_json()),
    "runs": lambda r: (r.id, r.model_dump_json()),
    "steps": lambda s: (s.id, s.run_id, s.index, s.model_dump_json()),
}
_ORDER: dict[Section, str] = {
    "globals": "id",
    "locals": "id",
    "transitions": "source, target",
    "tasks": "id",
    "runs": "id",
    "steps": "run_id, idx, id",
}


def _user_errors(method: Callable[P, R]) -> Callable[P, R]:
    """SQLite failures a user meets (locked, read-only, full, not a database) as one line;
    an IntegrityError or a misuse of the API stays a bug."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.Error as e:
            store = args[0]
            assert isinstance(store, SQLiteStore)
            raise StoreError(
                f"the local memory {store.path} failed: {e}; check the file or set HTAM_LOCAL_PATH",
                store=str(store.path),
            ) from e

    return wrapper


def _private_file(path: Path) -> None:
    """Create the store file readable by its owner only (SQLite gives its -wal and -shm
    journals the same mode), and tighten one that others could read."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    info = path.stat()
    mode = info.st_mode & 0o777
    if mode & 0o077 and info.st_uid == os.getuid():
        log.info("making %s private to its owner (mode %o -> 600)", path, mode)
        path.chmod(0o600)


def _add_counters(record: Counters, counters: Counters) -> None:
    for name in COUNTER_NAMES:
        setattr(record, name, getattr(record, name) + getattr(counters, name))


def _add_outcome(stats: Stats, step: StepUpdate, fx: StepEffects) -> None:
    stats.attempts += 1
    stats.reward_sum += step.reward
    _add_counters(stats, fx.outcome.counters)


class SQLiteStore(MemoryStore):
    kind = "local"

    def __init__(self, path: Path):
        self.path = Path(path).expanduser()
        self._created = not self.path.exists()
        try:
            _private_file(self.path)
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=60.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(
                f"cannot open the local memory {self.path}: {e}; set HTAM_LOCAL_PATH", store=str(self.path)
            ) from e

    def close(self) -> None:
        self._db.close()

    def __exit__(self, *exc: object) -> None:
        # A command that failed leaves no empty memory file behind where there was none.
        discard = exc[0] is not None and self._created and self._is_empty()
        self.close()
        if discard:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _is_empty(self) -> bool:
        try:
            tables = [r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return not any(self._db.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone() for t in tables)
        except sqlite3.Error:
            return False

    def describe(self) -> str:
        return str(self.path)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _parse(self, model: type[M], data: str) -> M:
        try:
            return model.model_validate_json(data)
        except ValidationError as e:
            raise StoreError(
                f"the local memory {self.path} holds a {model.__name__} that does not validate"
                f" ({e.errors()[0]['msg']}): it was edited or written by another version;"
                " restore it from an export or run `htam memory reset`",
                store=str(self.path),
            ) from e

    def _all(self, model: type[M], sql: str, args: tuple = ()) -> list[M]:
        return [self._parse(model, row[0]) for row in self._db.execute(sql, args)]

    def _one(self, model: type[M], sql: str, args: tuple) -> M | None:
        row = self._db.execute(sql, args).fetchone()
        return self._parse(model, row[0]) if row else None

    @_user_errors
    def init_schema(self) -> None:
        self._db.executescript(SCHEMA)

    # --- writes of static knowledge --------------------------------------------------

    def _put_global(self, g: GlobalNode) -> None:
        self._db.execute("INSERT OR REPLACE INTO globals VALUES (?, ?)", (g.id, g.model_dump_json()))

    def _put_local(self, loc: LocalNode) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO locals VALUES (?, ?, ?)", (loc.id, loc.global_id, loc.model_dump_json())
        )

    def _put_transition(self, t: Transition) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO transitions VALUES (?, ?, ?)", (t.source, t.target, t.model_dump_json())
        )

    def _put_step(self, s: StepUpdate) -> None:
        self._db.execute("INSERT INTO steps VALUES (?, ?, ?, ?)", (s.id, s.run_id, s.index, s.model_dump_json()))

    @_user_errors
    def seed(self, bank: SeedBank) -> SeedReport:
        with self._tx():
            for g in bank.global_nodes():
                old_g = self._one(GlobalNode, "SELECT data FROM globals WHERE id = ?", (g.id,))
                self._put_global(old_g.model_copy(update=g.model_dump(include=STATIC_GLOBAL)) if old_g else g)
            for loc in bank.local_nodes():
                old_l = self._one(LocalNode, "SELECT data FROM locals WHERE id = ?", (loc.id,))
                self._put_local(old_l.model_copy(update=loc.model_dump(include=STATIC_LOCAL)) if old_l else loc)
            for t in bank.transition_priors():
                old_t = self._get_transition(t.source, t.target)
                self._put_transition(old_t.model_copy(update=t.model_dump(include=STATIC_EDGE)) if old_t else t)
        return SeedReport(globals=len(bank.globals), locals=len(bank.locals), transitions=len(bank.transitions))

    # --- reads -----------------------------------------------------------------------

    @_user_errors
    def get_globals(self) -> list[GlobalNode]:
        return self._all(GlobalNode, "SELECT data FROM globals ORDER BY id")

    @_user_errors
    def get_locals(self, global_id: str | None = None) -> list[LocalNode]:
        return self._all(
            LocalNode,
            "SELECT data FROM locals WHERE ? IS NULL OR global_id = ? ORDER BY id",
            (global_id, global_id),
        )

    def _get_transition(self, source: str, target: str) -> Transition | None:
        return self._one(Transition, "SELECT data FROM transitions WHERE source = ? AND target = ?", (source, target))

    @_user_errors
    def get_transitions(self) -> list[Transition]:
        return self._all(Transition, "SELECT data FROM transitions ORDER BY source, target")

    @_user_errors
    def get_tasks(self) -> list[TaskRecord]:
        return self._all(TaskRecord, "SELECT data FROM tasks ORDER BY id")

    @_user_errors
    def get_runs(self) -> list[RunRecord]:
        return self._all(RunRecord, "SELECT data FROM runs ORDER BY id")

    @_user_errors
    def get_steps(self, run_id: str | None = None) -> list[StepUpdate]:
        return self._all(
            StepUpdate,
            "SELECT data FROM steps WHERE ? IS NULL OR run_id = ? ORDER BY run_id, idx, id",
            (run_id, run_id),
        )

    @_user_errors
    def similar_steps(
        self, task_id: str, family: str | None, parent_sha256: str | None, exclude_run: str, limit: int
    ) -> list[SimilarStep]:
        rows = self._db.execute(
            "SELECT s.data, CASE "
            "WHEN json_extract(s.data, '$.task_id') = ? AND ? IS NOT NULL "
            f"AND json_extract(s.data, '$.parent_sha256') = ? THEN {SAME_PARENT_WEIGHT} "
            f"WHEN json_extract(s.data, '$.task_id') = ? THEN {SAME_TASK_WEIGHT} "
            f"WHEN ? IS NOT NULL AND json_extract(t.data, '$.family') = ? THEN {SAME_FAMILY_WEIGHT} "
            f"ELSE {OTHER_WEIGHT} END AS w "
            "FROM steps s LEFT JOIN tasks t ON t.id = json_extract(s.data, '$.task_id') "
            "WHERE s.run_id != ? ORDER BY w DESC, s.run_id, s.idx, s.id LIMIT ?",
            (task_id, parent_sha256, parent_sha256, task_id, family, family, exclude_run, limit),
        ).fetchall()
        return [SimilarStep(step=self._parse(StepUpdate, data), weight=w) for data, w in rows]

    def iter_section(self, section: Section) -> Iterator[SnapshotRecord]:
        model = RECORD_TYPES[section]
        try:
            for (data,) in self._db.execute(f"SELECT data FROM {section} ORDER BY {_ORDER[section]}"):
                yield self._parse(model, data)
        except sqlite3.OperationalError as e:
            raise StoreError(
                f"the local memory {self.path} failed: {e}; check the file or set HTAM_LOCAL_PATH", store=str(self.path)
            ) from e

    def iter_records(self) -> Generator[SnapshotItem, None, None]:
        """In one read transaction: a consistent snapshot even while others write."""
        self._db.execute("BEGIN")
        try:
            yield from super().iter_records()
        finally:
            self._db.execute("COMMIT")

    @_user_errors
    def counts(self) -> dict[str, int]:
        return {t: self._db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}

    @_user_errors
    def score(
        self, prefix: list[str], params: ScoringParams, family: str | None = None, shape_class: str | None = None
    ) -> list[GlobalScore]:
        self._db.execute("BEGIN")  # the nodes, edges and steps of one moment
        try:
            globals_ = self.get_globals()
            check_prefix(prefix, (g.id for g in globals_))
            sources = sorted(set(prefix[: params.K]))
            marks = ",".join("?" * len(sources))
            edges = self._all(Transition, f"SELECT data FROM transitions WHERE source IN ({marks})", tuple(sources))
            evidence = self.family_evidence(family, shape_class)
        finally:
            self._db.execute("COMMIT")
        by_edge = {(e.source, e.target): e for e in edges}
        return check_finite(score_globals(globals_, by_edge, prefix, params, evidence), params)

    @_user_errors
    def family_evidence(self, family: str | None, shape_class: str | None = None) -> FamilyEvidence:
        evidence = FamilyEvidence(family=family)
        if family is None:
            return evidence
        shape = "" if shape_class is None else " AND json_extract(t.data, '$.shape_class') = ?"
        rows = self._db.execute(
            "SELECT json_extract(s.data, '$.global_id'), json_extract(s.data, '$.local_id'),"
            " json_extract(s.data, '$.prefix'), json_extract(s.data, '$.reward')"
            " FROM tasks t JOIN steps s ON json_extract(s.data, '$.task_id') = t.id"
            f" WHERE json_extract(t.data, '$.family') = ?{shape} ORDER BY s.run_id, s.idx, s.id",
            (family,) if shape_class is None else (family, shape_class),
        )
        for global_id, local_id, prefix, reward in rows:
            evidence.add(global_id, local_id, json.loads(prefix) if prefix else [], float(reward))
        return evidence

    # --- run records and step updates ------------------------------------------------

    @_user_errors
    def start_run(self, run: RunRecord, task: TaskRecord) -> None:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO tasks VALUES (?, ?)", (task.id, task.model_dump_json()))
            stored = self._one(TaskRecord, "SELECT data FROM tasks WHERE id = ?", (task.id,))
            if stored is not None and stored.family is None and task.family is not None:
                stored.family = task.family
                db.execute("UPDATE tasks SET data = ? WHERE id = ?", (stored.model_dump_json(), task.id))
            if stored is not None and stored.shape_class is None and task.shape_class is not None:
                stored.shape_class = task.shape_class
                db.execute("UPDATE tasks SET data = ? WHERE id = ?", (stored.model_dump_json(), task.id))
            db.execute("INSERT OR IGNORE INTO runs VALUES (?, ?)", (run.id, run.model_dump_json()))

    @_user_errors
    def record_step(self, step: StepUpdate) -> bool:
        fx = StepEffects.of(step)
        with self._tx() as db:
            if stored := self._one(StepUpdate, "SELECT data FROM steps WHERE id = ?", (step.id,)):
                check_replay(stored, step)
                return False
            ids = {row[0] for row in db.execute("SELECT id FROM globals")}
            loc = self._one(LocalNode, "SELECT data FROM locals WHERE id = ?", (step.local_id,))
            run = self._one(RunRecord, "SELECT data FROM runs WHERE id = ?", (step.run_id,))
            check_step_refs(step, ids, loc.global_id if loc else None, run.task_id if run else None)
            if step.global_id is not None:
                self._apply_to_htg(step, fx, loc)
            self._put_step(step)
        return True

    def _apply_to_htg(self, step: StepUpdate, fx: StepEffects, loc: LocalNode | None) -> None:
        """The chosen global's, local's and the prefix edges' statistics (inside the step's transaction)."""
        g = self._one(GlobalNode, "SELECT data FROM globals WHERE id = ?", (step.global_id,))
        assert g is not None and step.global_id is not None  # check_step_refs found it
        _add_outcome(g, step, fx)
        g.trend = TREND_DECAY * g.trend + (1.0 - TREND_DECAY) * step.reward
        self._put_global(g)
        if loc is not None:
            _add_outcome(loc, step, fx)
            side = "positive" if fx.positive else "negative"
            setattr(loc, side, [step.evidence(), *getattr(loc, side)][:MAX_EVIDENCE])
            self._put_local(loc)
        for ed in fx.edges:
            t = self._get_transition(ed.source, step.global_id) or Transition(source=ed.source, target=step.global_id)
            t.n += ed.count
            t.reward_sum += ed.reward
            t.gain_sum += ed.gain
            _add_counters(t, ed.counters)
            t.n_by_k = [a + b for a, b in zip(t.n_by_k, ed.dn, strict=True)]
            t.reward_by_k = [a + b for a, b in zip(t.reward_by_k, ed.dr, strict=True)]
            if step.note:
                t.notes = [step.note, *t.notes][:MAX_EVIDENCE]
            self._put_transition(t)

    @_user_errors
    def import_records(
        self, items: Iterable[SnapshotItem], source: str = "", counts: dict[Section, int] | None = None
    ) -> None:
        """One transaction, the emptiness check inside it: all or nothing, and a second
        import waits for the first and then finds the memory full."""
        with self._tx() as db:
            if any(db.execute(f"SELECT EXISTS (SELECT 1 FROM {t})").fetchone()[0] for t in TABLES):
                raise self.not_empty()
            for section, group in groupby(checked_items(items, counts), key=lambda item: item[0]):
                rows = (_ROW[section](record) for _, record in group)
                while batch := list(islice(rows, BATCH)):
                    db.executemany(_INSERT[section], batch)

    @_user_errors
    def reset(self) -> None:
        with self._tx() as db:
            for t in TABLES:
                db.execute(f"DELETE FROM {t}")
