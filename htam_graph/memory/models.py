"""The HTG's records as plain pydantic models: no database code in here.

Both stores (Neo4j and the embedded SQLite file) read and write exactly these shapes, and
`htam memory export|import` moves them as JSON.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from htam_graph.config import ScoringParams
from htam_graph.memory.outcome import Counters, Outcome, step_outcome
from htam_graph.vocab import MAX_DISTANCE, Method, OperatorFamily, Verdict

__all__ = ["MAX_DISTANCE", "Counters", "Outcome"]

# Local nodes keep only the newest evidence entries of each sign.
MAX_EVIDENCE = 20

ID_PATTERN = r"^[a-z][a-z0-9_]*$"
LOCAL_ID_PATTERN = r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$"


def utcnow() -> datetime:
    return datetime.now(UTC)


class Record(BaseModel):
    """Base of every stored record: numbers are finite (a NaN would poison every score)."""

    model_config = ConfigDict(allow_inf_nan=False)


class Stats(Counters):
    """Runtime statistics of a global or local node: attempts, summed reward, and one
    counter per outcome (memory/outcome.py says which verdict moves which)."""

    attempts: int = Field(0, ge=0)
    reward_sum: float = 0.0


class GlobalNode(Stats):
    """A coarse optimization direction (V_G)."""

    id: str = Field(pattern=ID_PATTERN)
    name: str
    intent: str
    goals: list[str] = Field(default_factory=list)
    triggers: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)
    prior: float = Field(0.0, ge=-1.0, le=1.0, description="static prior utility")
    trend: float = Field(0.0, description="exponential moving average of recent rewards")


class Evidence(Record):
    """One past application of a local strategy and what came of it."""

    step_id: str
    task_id: str
    verdict: Verdict
    reward: float
    speedup: float | None = None
    error_class: str | None = None
    note: str = ""


class LocalNode(Stats):
    """A concrete strategy under one global direction (V_GL)."""

    id: str = Field(pattern=LOCAL_ID_PATTERN)
    global_id: str = Field(pattern=ID_PATTERN)
    name: str
    pattern: str
    checks: list[str] = Field(default_factory=list)
    pitfalls: list[str] = Field(default_factory=list)
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

    source: str = Field(pattern=ID_PATTERN)
    target: str = Field(pattern=ID_PATTERN)
    when: str = ""
    rationale: str = ""
    risks: list[str] = Field(default_factory=list)
    prior: float = Field(0.0, ge=-1.0, le=1.0, description="prior utility of this move (seed bank)")
    prior_n: float = Field(0.0, ge=0.0, description="pseudo-observations the prior is worth")
    n: int = Field(0, ge=0)
    reward_sum: float = 0.0
    gain_sum: float = Field(0.0, description="sum of positive rewards (log2 speedup gains)")
    n_by_k: list[int] = Field(default_factory=_zeros_int)
    reward_by_k: list[float] = Field(default_factory=_zeros_float)
    notes: list[str] = Field(default_factory=list, description="reflections of the steps that took it, newest first")

    @field_validator("n_by_k", "reward_by_k")
    @classmethod
    def _distance_length(cls, v: list) -> list:
        if len(v) != MAX_DISTANCE:
            raise ValueError(f"per-distance evidence must have {MAX_DISTANCE} entries, got {len(v)}")
        return v


class TaskRecord(Record):
    id: str
    name: str = ""
    sha256: str = ""


class RunConfig(Record):
    """Everything that decides how a run chooses and judges its steps, recorded with it."""

    model_config = ConfigDict(allow_inf_nan=False, extra="allow")  # the loop adds its own settings

    steps: int = Field(6, ge=1, description="T: optimization steps")
    scoring: ScoringParams = Field(default_factory=ScoringParams)


class RunRecord(Record):
    """One optimization run of one task, with its method and full configuration."""

    id: str
    task_id: str
    method: Method = Method.HTAM
    seed: int = 0
    config: RunConfig = Field(default_factory=RunConfig)
    started_at: datetime = Field(default_factory=utcnow)


class StepUpdate(Record):
    """Everything one optimization step writes back, applied atomically and idempotently by id.

    `prefix` is the path of globals chosen before this step, most recent first (p_1 first);
    the step updates the edge prefix[k-1] -> global_id at distance k for every k. The
    reward and the counters that move follow from the verdict and the run's best speedup
    before and after the step (memory/outcome.py); a given reward must agree with them.
    """

    id: str
    run_id: str
    task_id: str
    index: int = Field(ge=0)
    prefix: list[str] = Field(default_factory=list, max_length=MAX_DISTANCE)
    global_id: str | None = Field(None, description="the chosen direction; None for methods that choose none")
    local_id: str | None = Field(None, description="the chosen strategy (under global_id); None when none was chosen")
    verdict: Verdict
    candidate_sha256: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="content hash of the candidate: links to its EvalResult"
    )
    parent_id: str | None = Field(None, description="the step whose candidate this one evolved from")
    speedup: float | None = Field(None, gt=0, description="this candidate's speedup (ok verdicts only)")
    best_before: float | None = Field(None, gt=0, description="the run's best speedup before this step")
    best_after: float | None = Field(None, gt=0, description="the run's best speedup after this step")
    reward: float = Field(0.0, ge=-1.0, le=1.0, description="always the verdict's (filled in when not given)")
    error_class: str | None = None
    note: str = ""
    scores: dict[str, float] = Field(default_factory=dict, description="S(g) at decision time")
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
        outcome = step_outcome(verdict, data.get("best_before"), data.get("best_after"), data.get("speedup"))
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
        return step_outcome(self.verdict, self.best_before, self.best_after, self.speedup)

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


class GlobalScore(BaseModel):
    """Transition-attended score of one candidate global for a given prefix; the policy
    adds its probability."""

    global_id: str
    name: str = ""
    base: float = Field(description="B(g): the node's own shrunk mean reward")
    transition: float = Field(description="sum_k a_k * U_k(p_k -> g)")
    score: float = Field(description="S(g) = beta * B(g) + transition")
    probability: float | None = Field(None, description="P(g) under the policy, once it has been applied")


class MemorySnapshot(Record):
    """A whole memory, as `htam memory export` writes it and `import` reads it."""

    format: str = "htam-graph/memory"
    version: int = 2
    globals: list[GlobalNode] = Field(default_factory=list)
    locals: list[LocalNode] = Field(default_factory=list)
    transitions: list[Transition] = Field(default_factory=list)
    tasks: list[TaskRecord] = Field(default_factory=list)
    runs: list[RunRecord] = Field(default_factory=list)
    steps: list[StepUpdate] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> MemorySnapshot:
        """Every reference resolves, so an import never writes half a memory."""
        globals_ = {g.id for g in self.globals}
        locals_ = {loc.id for loc in self.locals}
        runs = {r.id for r in self.runs}
        tasks = {t.id for t in self.tasks}
        for i, loc in enumerate(self.locals):
            if loc.global_id not in globals_:
                raise ValueError(f"locals[{i}] {loc.id!r}: unknown global {loc.global_id!r}")
        for i, t in enumerate(self.transitions):
            if t.source not in globals_ or t.target not in globals_:
                raise ValueError(f"transitions[{i}]: unknown global in {t.source!r} -> {t.target!r}")
        for i, r in enumerate(self.runs):
            if r.task_id not in tasks:
                raise ValueError(f"runs[{i}] {r.id!r}: unknown task {r.task_id!r}")
        for i, st in enumerate(self.steps):
            missing = [
                x
                for x, known in ((st.run_id, runs), (st.global_id, globals_), (st.local_id, locals_))
                if x is not None and x not in known
            ]
            if missing:
                raise ValueError(f"steps[{i}] {st.id!r}: unknown reference {missing[0]!r}")
        return self
