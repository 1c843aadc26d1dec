"""The HTG's records as plain pydantic models: no database code in here.

Both stores (Neo4j and the embedded SQLite file) read and write exactly these shapes, and
`htam memory export|import` moves them as JSON.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from htam_graph.config import ScoringParams
from htam_graph.memory.outcome import MAX_COUNT, Count, Counters, Outcome, step_outcome
from htam_graph.vocab import MAX_DISTANCE, Method, OperatorFamily, Verdict

__all__ = ["MAX_COUNT", "MAX_DISTANCE", "Count", "Counters", "Outcome"]

# Local nodes keep only the newest evidence entries of each sign.
MAX_EVIDENCE = 20

ID_PATTERN = r"^[a-z][a-z0-9_]*$"
LOCAL_ID_PATTERN = r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$"

# Limits both stores accept: Neo4j indexes a string of at most ~8 KB (an id of 1024
# characters is at most 4 KB in UTF-8, also inside the composite (run_id, index) index);
# free text is capped so that one record stays small enough to stream.
MAX_ID_LENGTH = 1024
MAX_TEXT_LENGTH = 100_000
# Ids name things in messages, logs and the Browser: no control characters.
Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=r"^[^\x00-\x1f\x7f]+$")]
GlobalId = Annotated[str, StringConstraints(max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]
LocalId = Annotated[str, StringConstraints(max_length=MAX_ID_LENGTH, pattern=LOCAL_ID_PATTERN)]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_LENGTH)]
# Sums of rewards in [-1, 1] stay within their counts; float rounding may add a little.
_SUM_SLACK = 1e-9


def utcnow() -> datetime:
    return datetime.now(UTC)


class Record(BaseModel):
    """Base of every stored record: numbers are finite (a NaN would poison every score)."""

    model_config = ConfigDict(allow_inf_nan=False)


def _within(total: float, count: int) -> bool:
    return abs(total) <= count * (1 + _SUM_SLACK) + _SUM_SLACK


def _finite_json(value: Any, where: str) -> None:
    """Free-form settings (a run's extra config) are JSON with finite numbers only."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value} is not a finite number")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_COUNT:
        raise ValueError(f"{where}: {value} is out of the 64-bit range")
    if isinstance(value, str):
        if len(value) > MAX_TEXT_LENGTH:
            raise ValueError(f"{where}: text longer than {MAX_TEXT_LENGTH} characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where}: not valid Unicode text") from None
    if isinstance(value, dict):
        for k, v in value.items():
            _finite_json(k, f"{where} (a key)")
            _finite_json(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _finite_json(v, f"{where}[{i}]")


class Stats(Counters):
    """Runtime statistics of a global or local node: attempts, summed reward, and one
    counter per outcome (memory/outcome.py says which verdict moves which)."""

    attempts: Count = 0
    reward_sum: float = 0.0

    @model_validator(mode="after")
    def _sums_within_counts(self) -> Stats:
        # Each reward lies in [-1, 1], so the sum is bounded by the attempts: a record
        # outside that was not written by a store (and could make scores overflow).
        if not _within(self.reward_sum, self.attempts):
            raise ValueError(f"reward_sum {self.reward_sum} exceeds what {self.attempts} attempts can add up to")
        return self


class GlobalNode(Stats):
    """A coarse optimization direction (V_G)."""

    id: GlobalId
    name: Text
    intent: Text
    goals: list[Text] = Field(default_factory=list)
    triggers: list[Text] = Field(default_factory=list)
    risks: list[Text] = Field(default_factory=list)
    prior: float = Field(0.0, ge=-1.0, le=1.0, description="static prior utility")
    trend: float = Field(0.0, description="exponential moving average of recent rewards")


class Evidence(Record):
    """One past application of a local strategy and what came of it."""

    step_id: Id
    task_id: Id
    verdict: Verdict
    reward: float = Field(ge=-1.0, le=1.0)
    speedup: float | None = None
    error_class: Text | None = None
    note: Text = ""


class LocalNode(Stats):
    """A concrete strategy under one global direction (V_GL)."""

    id: LocalId
    global_id: GlobalId
    name: Text
    pattern: Text
    checks: list[Text] = Field(default_factory=list)
    pitfalls: list[Text] = Field(default_factory=list)
    applies_to: list[OperatorFamily] = Field(default_factory=list)
    positive: list[Evidence] = Field(default_factory=list, description="newest first")
    negative: list[Evidence] = Field(default_factory=list, description="newest first")

    @model_validator(mode="after")
    def _id_under_parent(self) -> LocalNode:
        if self.id.split(".", 1)[0] != self.global_id:
            raise ValueError(f"local id {self.id!r} must start with its global '{self.global_id}.'")
        return self


def _zeros_int() -> list[int]:
    return [0] * MAX_DISTANCE


def _zeros_float() -> list[float]:
    return [0.0] * MAX_DISTANCE


class Transition(Counters):
    """Path-dependent knowledge of moving from one global direction to the next (E_G).

    Evidence is pooled (n, reward_sum, the outcome counters) and kept per prefix distance:
    n_by_k[k-1] and reward_by_k[k-1] count the steps that chose `target` while `source`
    stood k back in the prefix. Pooled counts are the sums over distances. A seeded edge
    also carries a prior utility worth `prior_n` pseudo-observations (docs/method.md).
    """

    source: GlobalId
    target: GlobalId
    when: Text = ""
    rationale: Text = ""
    risks: list[Text] = Field(default_factory=list)
    prior: float = Field(0.0, ge=-1.0, le=1.0, description="prior utility of this move (seed bank)")
    prior_n: float = Field(0.0, ge=0.0, le=1e6, description="pseudo-observations the prior is worth")
    n: Count = 0
    reward_sum: float = 0.0
    gain_sum: float = Field(0.0, ge=0.0, description="sum of positive rewards (log2 speedup gains)")
    n_by_k: list[Count] = Field(default_factory=_zeros_int)
    reward_by_k: list[float] = Field(default_factory=_zeros_float)
    notes: list[str] = Field(default_factory=list, description="reflections of the steps that took it, newest first")

    @field_validator("n_by_k", "reward_by_k")
    @classmethod
    def _distance_length(cls, v: list) -> list:
        if len(v) != MAX_DISTANCE:
            raise ValueError(f"per-distance evidence must have {MAX_DISTANCE} entries, got {len(v)}")
        return v

    @model_validator(mode="after")
    def _sums_within_counts(self) -> Transition:
        """Pooled evidence is the sum over distances, and reward sums stay within counts."""
        if self.n != sum(self.n_by_k):
            raise ValueError(f"n {self.n} is not the sum of n_by_k {self.n_by_k}")
        if not _within(self.reward_sum, self.n) or not _within(self.gain_sum, self.n):
            raise ValueError(f"reward_sum or gain_sum exceeds what {self.n} observations can add up to")
        for k, (nk, rk) in enumerate(zip(self.n_by_k, self.reward_by_k, strict=True)):
            if not _within(rk, nk):
                raise ValueError(f"reward_by_k[{k}] {rk} exceeds what n_by_k[{k}] = {nk} observations can add up to")
        return self


CHANGE_MAX = 3000  # characters of a step's `change` kept


class TaskRecord(Record):
    id: Id
    name: Text = ""
    sha256: Text = ""
    family: str | None = Field(
        None, description="the task's operator family (the catalog's recognition; None when unknown)"
    )
    shape_class: str | None = Field(
        None, description="the task's coarse problem size (vocab.shape_class_of: small, medium, large; None: unknown)"
    )


class RunConfig(Record):
    """Everything that decides how a run chooses and judges its steps, recorded with it."""

    model_config = ConfigDict(allow_inf_nan=False, extra="allow")  # the loop adds its own settings

    steps: int = Field(6, ge=1, le=MAX_COUNT, description="T: optimization steps")
    scoring: ScoringParams = Field(default_factory=ScoringParams)
    llm: str | None = Field(
        None,
        description="backend:model that wrote the candidates, as the run's manifest names it; with --llm catalog it "
        "says the run's start: catalog-space-v1 the task's base kernel (the default), catalog-v1 the family's tuned "
        "first kernel. None in runs recorded before it was kept",
    )

    @model_validator(mode="after")
    def _extras_finite(self) -> RunConfig:
        for name, value in (self.model_extra or {}).items():
            _finite_json(value, name)
        return self


class RunRecord(Record):
    """One optimization run of one task, with its method and full configuration."""

    id: Id
    task_id: Id
    method: Method = Method.HTAM
    seed: int = Field(0, ge=-MAX_COUNT, le=MAX_COUNT)
    config: RunConfig = Field(default_factory=RunConfig)
    started_at: datetime = Field(default_factory=utcnow)


class JudgedStep(Protocol):
    @property
    def verdict(self) -> Verdict: ...
    @property
    def speedup(self) -> float | None: ...


S = TypeVar("S", bound=JudgedStep)


def best_step(steps: Iterable[S]) -> S | None:
    """A run's best, as every output reports it (the run's summary and its JSON, the bench's
    progress and report, `htam stats`): its fastest correct candidate, the ok step with the
    highest speedup over eager (below 1.0 too); None when no candidate was correct, which
    aggregates count as the reference's 1.0 (KernelBench's convention). The reward's base
    (best_before/best_after) starts at the reference's 1.0 instead (docs/method.md)."""
    correct = [s for s in steps if s.verdict == Verdict.OK and s.speedup is not None]
    return max(correct, key=lambda s: s.speedup or 0.0, default=None)


class StepUpdate(Record):
    """Everything one optimization step writes back, applied atomically and idempotently by id.

    `prefix` is the path of globals chosen before this step, most recent first (p_1 first);
    the step updates the edge prefix[k-1] -> global_id at distance k for every k. The
    reward and the counters that move follow from the verdict and the run's best speedup
    before and after the step (memory/outcome.py); a given reward must agree with them.
    """

    id: Id
    run_id: Id
    task_id: Id
    index: int = Field(ge=0, le=MAX_COUNT)
    prefix: list[GlobalId] = Field(default_factory=list, max_length=MAX_DISTANCE)
    global_id: GlobalId | None = Field(None, description="the chosen direction; None for methods that choose none")
    local_id: LocalId | None = Field(
        None, description="the chosen strategy (under global_id); None when none was chosen"
    )
    verdict: Verdict
    candidate_sha256: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="content hash of the candidate: links to its EvalResult"
    )
    parent_id: Id | None = Field(None, description="the step whose candidate this one evolved from")
    parent_sha256: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="content hash of the kernel this step modified (flat retrieval)"
    )
    change: str = Field("", max_length=CHANGE_MAX, description="what the step changed: a diff against its parent")
    speedup: float | None = Field(None, gt=0, description="this candidate's speedup (ok verdicts only)")
    best_before: float | None = Field(None, gt=0, description="the run's best speedup before this step")
    best_after: float | None = Field(None, gt=0, description="the run's best speedup after this step")
    base_before: float | None = Field(
        None,
        gt=0,
        description="the speedup the reward is measured against when it is not best_before: the run's fastest "
        "correct kernel, slower than the reference, that this step built on (scoring.reward_from = fastest), or "
        "the kernel this step modified (scoring.reward_from = parent)",
    )
    deadband: float | None = Field(
        None,
        ge=0,
        description="scoring.reward_from = parent: the reward is the signed log2 gain over base_before, 0 within "
        "this dead-band (docs/method.md)",
    )
    reward: float = Field(0.0, ge=-1.0, le=1.0, description="always the verdict's (filled in when not given)")
    error_class: Text | None = None
    note: Text = ""
    choice_reason: Text = Field("", description="the model's reason for its strategy choice, or for declining")
    declined: list[LocalId] = Field(
        default_factory=list, description="the strategies offered that the model declined (none fitted, it said)"
    )
    scores: dict[GlobalId, float] = Field(default_factory=dict, description="S(g) at decision time")
    created_at: datetime = Field(default_factory=utcnow)

    @model_validator(mode="before")
    @classmethod
    def _reward_from_verdict(cls, data: Any) -> Any:
        """Fill in the reward the verdict gives; refuse one that disagrees with it."""
        if not isinstance(data, dict) or "verdict" not in data:
            return data
        try:
            verdict = Verdict(data["verdict"])
        except ValueError:
            return data  # the field validator names the bad verdict
        outcome = step_outcome(
            verdict,
            data.get("best_before"),
            data.get("best_after"),
            data.get("speedup"),
            data.get("base_before"),
            data.get("deadband"),
        )
        given = data.get("reward")
        if given is not None and abs(float(given) - outcome.reward) > 1e-9:
            raise ValueError(f"reward {given} disagrees with verdict {verdict.value}: it gives {outcome.reward}")
        return {**data, "reward": outcome.reward}

    @model_validator(mode="after")
    def _direction(self) -> StepUpdate:
        if self.global_id is None and (self.local_id is not None or self.prefix):
            raise ValueError("a step without a global has no local and no prefix")
        return self

    def outcome(self) -> Outcome:
        return step_outcome(
            self.verdict, self.best_before, self.best_after, self.speedup, self.base_before, self.deadband
        )

    def same_payload(self, other: StepUpdate) -> bool:
        """Whether a replay of this step id carries the same step (its timestamp aside)."""
        return self.model_dump(exclude={"created_at"}) == other.model_dump(exclude={"created_at"})

    def evidence(self) -> Evidence:
        return Evidence(
            step_id=self.id,
            task_id=self.task_id,
            verdict=self.verdict,
            reward=self.reward,
            speedup=self.speedup,
            error_class=self.error_class,
            note=self.note,
        )

    def edge_deltas(self) -> dict[str, tuple[list[int], list[float]]]:
        """Per source global: (count, reward) added at each distance by this step."""
        deltas: dict[str, tuple[list[int], list[float]]] = {}
        for k, source in enumerate(self.prefix):
            dn, dr = deltas.setdefault(source, (_zeros_int(), _zeros_float()))
            dn[k] += 1
            dr[k] += self.reward
        return deltas


# The flat baseline's similarity tiers (docs/method.md, "flat"): a past step's weight.
SAME_PARENT_WEIGHT = 1.0  # same task, same parent kernel
SAME_TASK_WEIGHT = 0.5
SAME_FAMILY_WEIGHT = 0.25
OTHER_WEIGHT = 0.125


def similarity_weight(
    step_task: str, step_parent: str | None, step_family: str | None, task_id: str, family: str | None,
    parent_sha256: str | None,
) -> float:  # fmt: skip
    """The weight of a past step (its task, parent kernel and task family) for a step of
    `task_id` (of `family`) that modifies the kernel `parent_sha256`; what the stores compute."""
    if step_task == task_id:
        return SAME_PARENT_WEIGHT if parent_sha256 is not None and step_parent == parent_sha256 else SAME_TASK_WEIGHT
    if family is not None and step_family == family:
        return SAME_FAMILY_WEIGHT
    return OTHER_WEIGHT


class SimilarStep(BaseModel):
    """A past step retrieved by the flat baseline with its similarity weight (docs/method.md)."""

    step: StepUpdate
    weight: float


class GlobalScore(BaseModel):
    """Transition-attended score of one candidate global for a given prefix; the policy
    adds its probability."""

    global_id: str
    name: str = ""
    base: float = Field(description="B_f(g): the node's own shrunk mean reward, shrunk again to the task's family")
    transition: float = Field(description="sum_k a_k * U_k(p_k -> g)")
    score: float = Field(description="S(g) = beta * B(g) + transition")
    probability: float | None = Field(None, description="P(g) under the policy, once it has been applied")


Section = Literal["globals", "locals", "transitions", "tasks", "runs", "steps"]
# A memory's records in dependency order: each section refers only to sections before it,
# which is the order exports write them and imports check and write them.
SECTIONS: tuple[Section, ...] = ("globals", "locals", "transitions", "tasks", "runs", "steps")
SnapshotRecord = GlobalNode | LocalNode | Transition | TaskRecord | RunRecord | StepUpdate
SnapshotItem = tuple[Section, SnapshotRecord]
RECORD_TYPES: dict[Section, type[SnapshotRecord]] = {
    "globals": GlobalNode,
    "locals": LocalNode,
    "transitions": Transition,
    "tasks": TaskRecord,
    "runs": RunRecord,
    "steps": StepUpdate,
}


class SnapshotChecker:
    """Checks a memory's records as they stream past in SECTIONS order: every id unique
    within its kind, every reference resolved by a record seen before. It keeps ids only,
    so 10^6 steps are checked in a few hundred MB at most; `add` raises ValueError naming
    the record and the problem. The stores' own step checks (store.check_step_refs) refuse
    the same things, so whatever a store holds passes here."""

    def __init__(self) -> None:
        self.counts: dict[Section, int] = dict.fromkeys(SECTIONS, 0)
        self._at = 0
        self._globals: set[str] = set()
        self._locals: dict[str, str] = {}  # id -> its global
        self._edges: set[tuple[str, str]] = set()
        self._tasks: set[str] = set()
        self._runs: dict[str, str] = {}  # id -> its task
        self._steps: set[str] = set()
        self._indexes: dict[str, set[int]] = {}  # run id -> its steps' indexes
        self._evidence: dict[str, str] = {}  # step id -> the local whose evidence names it

    def add(self, section: Section, record: SnapshotRecord) -> None:
        at = SECTIONS.index(section)
        if at < self._at:
            raise ValueError(f"{section} must come before {SECTIONS[self._at]}")
        self._at = at
        if isinstance(record, GlobalNode):
            self._unique(self._globals, record.id, "global")
        elif isinstance(record, LocalNode):
            self._local(record)
        elif isinstance(record, Transition):
            self._transition(record)
        elif isinstance(record, TaskRecord):
            self._unique(self._tasks, record.id, "task")
        elif isinstance(record, RunRecord):
            self._run(record)
        else:
            self._step(record)
        self.counts[section] += 1

    def finish(self) -> dict[Section, int]:
        """The number of records in each section, once every deferred reference resolved."""
        for step_id, local_id in self._evidence.items():
            if step_id not in self._steps:
                raise ValueError(f"local {local_id!r}: evidence names unknown step {step_id!r}")
        return dict(self.counts)

    @staticmethod
    def _unique(seen: set[str], id_: str, kind: str) -> None:
        if id_ in seen:
            raise ValueError(f"duplicate {kind} id {id_!r}")
        seen.add(id_)

    def _local(self, loc: LocalNode) -> None:
        if loc.id in self._locals:
            raise ValueError(f"duplicate local id {loc.id!r}")
        if loc.global_id not in self._globals:
            raise ValueError(f"local {loc.id!r}: unknown global {loc.global_id!r}")
        self._locals[loc.id] = loc.global_id
        for evidence in (*loc.positive, *loc.negative):
            self._evidence.setdefault(evidence.step_id, loc.id)

    def _transition(self, t: Transition) -> None:
        if (t.source, t.target) in self._edges:
            raise ValueError(f"duplicate transition {t.source!r} -> {t.target!r}")
        for end in (t.source, t.target):
            if end not in self._globals:
                raise ValueError(f"transition {t.source!r} -> {t.target!r}: unknown global {end!r}")
        self._edges.add((t.source, t.target))

    def _run(self, run: RunRecord) -> None:
        if run.id in self._runs:
            raise ValueError(f"duplicate run id {run.id!r}")
        if run.task_id not in self._tasks:
            raise ValueError(f"run {run.id!r}: unknown task {run.task_id!r}")
        self._runs[run.id] = run.task_id

    def _step(self, step: StepUpdate) -> None:
        self._unique(self._steps, step.id, "step")
        where = f"step {step.id!r}"
        run_task = self._runs.get(step.run_id)
        if run_task is None:
            raise ValueError(f"{where}: unknown run {step.run_id!r}")
        if step.task_id != run_task:
            raise ValueError(f"{where}: task {step.task_id!r} is not its run's task {run_task!r}")
        indexes = self._indexes.setdefault(step.run_id, set())
        if step.index in indexes:  # two steps at one index: the run's order and NEXT chain would break
            raise ValueError(f"{where}: field index: run {step.run_id!r} already has a step at index {step.index}")
        indexes.add(step.index)
        for g in (step.global_id, *step.prefix) if step.global_id is not None else ():
            if g not in self._globals:
                raise ValueError(f"{where}: unknown global {g!r}")
        if step.local_id is None:
            return
        parent = self._locals.get(step.local_id)
        if parent is None:
            raise ValueError(f"{where}: unknown local {step.local_id!r}")
        if parent != step.global_id:
            raise ValueError(f"{where}: local {step.local_id!r} belongs to {parent!r}, not {step.global_id!r}")


class MemorySnapshot(Record):
    """A whole memory in memory (small ones: tests, seeding); `htam memory export|import`
    stream the same records through memory/export_file.py instead."""

    globals: list[GlobalNode] = Field(default_factory=list)
    locals: list[LocalNode] = Field(default_factory=list)
    transitions: list[Transition] = Field(default_factory=list)
    tasks: list[TaskRecord] = Field(default_factory=list)
    runs: list[RunRecord] = Field(default_factory=list)
    steps: list[StepUpdate] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> MemorySnapshot:
        """Unique ids and resolved references, so an import never writes half a memory."""
        checker = SnapshotChecker()
        for section, record in self.items():
            checker.add(section, record)
        checker.finish()
        return self

    def items(self) -> Iterator[SnapshotItem]:
        """Every record with its section, in SECTIONS order."""
        for section in SECTIONS:
            for record in getattr(self, section):
                yield section, record
