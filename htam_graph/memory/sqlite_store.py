"""The embedded store: the HTG in one SQLite file (stdlib, transactional, no server).

Used when no Neo4j is configured and on GPU machines. Each record is kept as its
pydantic model's JSON next to the key columns it is looked up by; a step's read-modify-
write runs under `BEGIN IMMEDIATE`, so concurrent processes serialize and lose nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from htam_graph.config import ScoringParams
from htam_graph.errors import UserError
from htam_graph.memory.models import (
    MAX_EVIDENCE,
    Counters,
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
from htam_graph.memory.outcome import COUNTER_NAMES
from htam_graph.memory.scoring import check_prefix, score_globals
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

M = TypeVar("M", bound=BaseModel)

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
"""
TABLES = ("globals", "locals", "transitions", "tasks", "runs", "steps")


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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=60.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        except (OSError, sqlite3.Error) as e:
            raise UserError(f"cannot open the local memory {self.path}: {e}; set HTAM_LOCAL_PATH") from e
        self.init_schema()

    def close(self) -> None:
        self._db.close()

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

    def _all(self, model: type[M], sql: str, args: tuple = ()) -> list[M]:
        return [model.model_validate_json(row[0]) for row in self._db.execute(sql, args)]

    def _one(self, model: type[M], sql: str, args: tuple) -> M | None:
        row = self._db.execute(sql, args).fetchone()
        return model.model_validate_json(row[0]) if row else None

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

    def get_globals(self) -> list[GlobalNode]:
        return self._all(GlobalNode, "SELECT data FROM globals ORDER BY id")

    def get_locals(self, global_id: str | None = None) -> list[LocalNode]:
        return self._all(
            LocalNode,
            "SELECT data FROM locals WHERE ? IS NULL OR global_id = ? ORDER BY id",
            (global_id, global_id),
        )

    def _get_transition(self, source: str, target: str) -> Transition | None:
        return self._one(Transition, "SELECT data FROM transitions WHERE source = ? AND target = ?", (source, target))

    def get_transitions(self) -> list[Transition]:
        return self._all(Transition, "SELECT data FROM transitions ORDER BY source, target")

    def get_tasks(self) -> list[TaskRecord]:
        return self._all(TaskRecord, "SELECT data FROM tasks ORDER BY id")

    def get_runs(self) -> list[RunRecord]:
        return self._all(RunRecord, "SELECT data FROM runs ORDER BY id")

    def get_steps(self, run_id: str | None = None) -> list[StepUpdate]:
        return self._all(
            StepUpdate,
            "SELECT data FROM steps WHERE ? IS NULL OR run_id = ? ORDER BY run_id, idx, id",
            (run_id, run_id),
        )

    def counts(self) -> dict[str, int]:
        return {t: self._db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}

    def score(self, prefix: list[str], params: ScoringParams) -> list[GlobalScore]:
        globals_ = self.get_globals()
        check_prefix(prefix, (g.id for g in globals_))
        sources = sorted(set(prefix[: params.K]))
        marks = ",".join("?" * len(sources))
        edges = self._all(Transition, f"SELECT data FROM transitions WHERE source IN ({marks})", tuple(sources))
        return score_globals(globals_, {(e.source, e.target): e for e in edges}, prefix, params)

    # --- run records and step updates ------------------------------------------------

    def start_run(self, run: RunRecord, task: TaskRecord) -> None:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO tasks VALUES (?, ?)", (task.id, task.model_dump_json()))
            db.execute("INSERT OR IGNORE INTO runs VALUES (?, ?)", (run.id, run.model_dump_json()))

    def record_step(self, step: StepUpdate) -> bool:
        fx = StepEffects.of(step)
        with self._tx() as db:
            if stored := self._one(StepUpdate, "SELECT data FROM steps WHERE id = ?", (step.id,)):
                check_replay(stored, step)
                return False
            ids = {row[0] for row in db.execute("SELECT id FROM globals")}
            loc = self._one(LocalNode, "SELECT data FROM locals WHERE id = ?", (step.local_id,))
            run_exists = db.execute("SELECT 1 FROM runs WHERE id = ?", (step.run_id,)).fetchone()
            check_step_refs(step, ids, loc.global_id if loc else None, bool(run_exists))
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

    def import_snapshot(self, snap: MemorySnapshot) -> None:
        self.require_empty()
        with self._tx() as db:
            for g in snap.globals:
                self._put_global(g)
            for loc in snap.locals:
                self._put_local(loc)
            for t in snap.transitions:
                self._put_transition(t)
            db.executemany("INSERT INTO tasks VALUES (?, ?)", [(t.id, t.model_dump_json()) for t in snap.tasks])
            db.executemany("INSERT INTO runs VALUES (?, ?)", [(r.id, r.model_dump_json()) for r in snap.runs])
            for s in snap.steps:
                self._put_step(s)

    def reset(self) -> None:
        with self._tx() as db:
            for t in TABLES:
                db.execute(f"DELETE FROM {t}")
