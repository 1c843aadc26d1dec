"""The store interface every HTG backend implements (Neo4j, embedded SQLite).

A store holds the HTG (globals, locals, transitions) and the run records (tasks, runs,
steps). Writes of one optimization step are atomic and idempotent by step id; scoring is
computed where the data lives (Cypher in Neo4j, the Python reference for SQLite).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Generator, Iterable, Iterator
from datetime import datetime
from typing import ClassVar, Literal

from pydantic import BaseModel

from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput, ConfigError, StoreStateError, UserError
from htam_graph.memory.models import (
    SECTIONS,
    Counters,
    GlobalNode,
    GlobalScore,
    LocalNode,
    MemorySnapshot,
    Outcome,
    RunRecord,
    Section,
    SimilarStep,
    SnapshotChecker,
    SnapshotItem,
    SnapshotRecord,
    StepUpdate,
    TaskRecord,
    Transition,
)
from htam_graph.memory.scoring import FamilyEvidence
from htam_graph.memory.seed import SeedBank

# Weight of the old value in a global's reward trend (an exponential moving average).
TREND_DECAY = 0.8

# The properties a seed bank owns; everything else is runtime evidence that seeding keeps.
STATIC_GLOBAL = {"id", "name", "intent", "goals", "triggers", "risks", "prior"}
STATIC_LOCAL = {"id", "global_id", "name", "pattern", "checks", "pitfalls", "applies_to"}
STATIC_EDGE = {"when", "rationale", "risks", "prior", "prior_n"}


class SeedReport(BaseModel):
    globals: int
    locals: int
    transitions: int


class EdgeDelta(BaseModel):
    """What one step adds to the edge source -> chosen global (the source may stand at
    several distances of the prefix: `count` of them)."""

    source: str
    dn: list[int]
    dr: list[float]
    count: int
    reward: float
    gain: float
    counters: Counters


class StepEffects(BaseModel):
    """The increments one step applies, derived once so both stores add the same numbers."""

    outcome: Outcome
    positive: bool
    edges: list[EdgeDelta]

    @classmethod
    def of(cls, step: StepUpdate) -> StepEffects:
        outcome = step.outcome()
        edges = [
            EdgeDelta(
                source=source,
                dn=dn,
                dr=dr,
                count=sum(dn),
                reward=sum(dr),
                gain=sum(dn) * max(outcome.reward, 0.0),
                counters=outcome.counters.scaled(sum(dn)),
            )
            for source, (dn, dr) in step.edge_deltas().items()
        ]
        return cls(outcome=outcome, positive=outcome.reward > 0, edges=edges)


class StepConflict(BadInput):
    """A step id was recorded before with a different payload."""


def check_replay(stored: StepUpdate, step: StepUpdate) -> None:
    """A replayed step id must carry the same step: anything else is a bug or two runs
    sharing ids, and is refused rather than silently dropped."""
    if not stored.same_payload(step):
        old, new = stored.model_dump(exclude={"created_at"}), step.model_dump(exclude={"created_at"})
        fields = sorted(k for k in old if old[k] != new[k])
        raise StepConflict(
            f"step {step.id!r} was recorded before with other values ({', '.join(fields)}); "
            "give the new step its own id"
        )


def check_step_refs(step: StepUpdate, global_ids: set[str], local_parent: str | None, run_task: str | None) -> None:
    """Reject a step that names unknown globals, locals or runs (or another task than its
    run's) before anything is written: the same rules an import checks (SnapshotChecker)."""
    for g in [step.global_id, *step.prefix] if step.global_id is not None else []:
        if g not in global_ids:
            raise BadInput(f"step {step.id}: unknown global {g!r}; seed the memory or fix the id", value=g)
    if step.local_id is not None and local_parent is None:
        raise BadInput(
            f"step {step.id}: unknown local {step.local_id!r}; seed the memory or fix the id", value=step.local_id
        )
    if step.local_id is not None and local_parent != step.global_id:
        raise BadInput(
            f"step {step.id}: local {step.local_id!r} belongs to {local_parent!r}, not {step.global_id!r}",
            value=step.local_id,
        )
    if run_task is None:
        raise BadInput(f"step {step.id}: unknown run {step.run_id!r}; start the run first", value=step.run_id)
    if run_task != step.task_id:
        raise BadInput(f"step {step.id}: task {step.task_id!r} is not its run's task {run_task!r}", value=step.task_id)


def check_finite(scores: list[GlobalScore], params: ScoringParams) -> list[GlobalScore]:
    """Finite parameters can still overflow (alpha = 1e308): refuse rather than rank NaNs."""
    if not all(math.isfinite(s.score) and math.isfinite(s.base) for s in scores):
        raise ConfigError(
            f"scoring parameters {params.model_dump()} give non-finite scores; use smaller values"
            " (HTAM_SCORING__* or the flags of `htam memory score`)",
            setting="HTAM_SCORING",
            value=params.model_dump(),
        )
    return scores


class PendingOperation(BaseModel):
    """An import or reset that began and has not finished (its process died, or still runs)."""

    kind: Literal["import", "reset"]
    since: datetime
    source: str = ""


class UnfinishedOperation(StoreStateError):
    """The memory holds an unfinished import or reset: nothing in it can be trusted."""

    def __init__(self, where: str, pending: PendingOperation) -> None:
        of = f" of {pending.source}" if pending.source else ""
        fix = "to discard it, then import again" if pending.kind == "import" else "to finish it"
        since = f"{pending.since:%Y-%m-%d %H:%M:%S %Z}"
        super().__init__(
            f"the memory at {where} has an unfinished {pending.kind}{of} (started {since}):"
            f" unless it is still running, run `htam memory reset` {fix}",
            store=where,
        )
        self.pending = pending


def checked_items(items: Iterable[SnapshotItem], counts: dict[Section, int] | None = None) -> Iterator[SnapshotItem]:
    """The items again, each checked (SnapshotChecker) before it is handed on; at the end
    the totals must be `counts` when given (a file changed between check and import)."""
    checker = SnapshotChecker()
    for section, record in items:
        try:
            checker.add(section, record)
        except ValueError as e:
            raise BadInput(f"refusing the import: {e}") from e
        yield section, record
    try:
        found = checker.finish()
    except ValueError as e:
        raise BadInput(f"refusing the import: {e}") from e
    if counts is not None and found != counts:
        raise BadInput(f"refusing the import: the file changed while it was imported ({found} != {counts})")


class MemoryStore(ABC):
    """One HTG memory. Use as a context manager; every method is safe across processes.

    Imports and resets are all-or-nothing as every method sees them: a store whose import
    or reset did not finish (its process was killed, its server died) refuses every
    operation but `reset` with UnfinishedOperation, which names `htam memory reset`."""

    kind: ClassVar[str]

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def describe(self) -> str:
        """Where this memory lives, for messages (a file path or a Neo4j URI)."""

    @abstractmethod
    def init_schema(self) -> None:
        """Create tables or constraints. Idempotent."""

    @abstractmethod
    def seed(self, bank: SeedBank) -> SeedReport:
        """Upsert the bank's static knowledge; runtime statistics are kept. Idempotent."""

    @abstractmethod
    def get_globals(self) -> list[GlobalNode]: ...

    @abstractmethod
    def get_locals(self, global_id: str | None = None) -> list[LocalNode]: ...

    @abstractmethod
    def get_transitions(self) -> list[Transition]: ...

    @abstractmethod
    def get_tasks(self) -> list[TaskRecord]: ...

    @abstractmethod
    def get_runs(self) -> list[RunRecord]: ...

    @abstractmethod
    def get_steps(self, run_id: str | None = None) -> list[StepUpdate]: ...

    @abstractmethod
    def similar_steps(
        self, task_id: str, family: str | None, parent_sha256: str | None, exclude_run: str, limit: int
    ) -> list[SimilarStep]:
        """The flat baseline's retrieval (docs/method.md, "flat"): up to `limit` steps of other
        runs than `exclude_run`, each with its similarity weight (`similarity_weight`), the
        highest weight first, then in (run, index, id) order; the store does the weighting and
        ranking, so it never reads every step."""

    @abstractmethod
    def iter_section(self, section: Section) -> Iterator[SnapshotRecord]:
        """One section's records in export order, streamed (bounded client memory)."""

    def iter_records(self) -> Generator[SnapshotItem, None, None]:
        """The whole memory, section by section in SECTIONS order (what export writes)."""
        for section in SECTIONS:
            for record in self.iter_section(section):
                yield section, record

    def pending_operation(self) -> PendingOperation | None:
        """The import or reset that began and did not finish, if any."""
        return None

    @abstractmethod
    def counts(self) -> dict[str, int]:
        """Number of globals, locals, tasks, runs and steps."""

    @abstractmethod
    def score(
        self, prefix: list[str], params: ScoringParams, family: str | None = None, shape_class: str | None = None
    ) -> list[GlobalScore]:
        """Transition-attended scores S(g) of every global (memory/scoring.py), by id,
        conditioned on the evidence of the tasks of operator family `family` (None: pooled),
        and of shape class `shape_class` among those when given (family_evidence)."""

    @abstractmethod
    def family_evidence(self, family: str | None, shape_class: str | None = None) -> FamilyEvidence:
        """The evidence of the steps of the tasks whose family is `family` (scoring.py), and,
        when `shape_class` is given, whose shape class is that too; empty for None or a
        family no task has."""

    @abstractmethod
    def start_run(self, run: RunRecord, task: TaskRecord) -> None:
        """Record a run of a task. Idempotent: a resumed run keeps its first record, and a
        task keeps its first record too, except that a family or a shape class is filled in
        where it had none."""

    @abstractmethod
    def record_step(self, step: StepUpdate) -> bool:
        """Apply one step in one transaction. False (and no change) if the same step was
        applied before; StepConflict if its id was applied with other values."""

    @abstractmethod
    def import_records(
        self, items: Iterable[SnapshotItem], source: str = "", counts: dict[Section, int] | None = None
    ) -> None:
        """Write a memory's records (SECTIONS order; checked again as they stream past)
        into this store, which must be empty; `source` names them in messages and
        `counts` are the totals a checked file announced. All or nothing as every method
        sees it, also when this process or the server is killed midway."""

    @abstractmethod
    def reset(self) -> None:
        """Delete the whole memory (also one whose import or reset did not finish)."""

    def import_snapshot(self, snap: MemorySnapshot) -> None:
        """Write an exported memory as it is into this (empty) store."""
        self.import_records(snap.items(), "a snapshot")

    def export(self) -> MemorySnapshot:
        return MemorySnapshot(**{section: list(self.iter_section(section)) for section in SECTIONS})

    def require_empty(self) -> None:
        if any(self.counts().values()):
            raise self.not_empty()

    def not_empty(self) -> UserError:
        return StoreStateError(
            f"memory at {self.describe()} is not empty; run `htam memory reset` first or import into another store",
            store=self.describe(),
        )
