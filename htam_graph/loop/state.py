"""What the LLM sees at a step: the state s_t and the memories, as plain models.

The prompt templates render these under StrictUndefined, so every field is always present
(None or empty when it does not apply). They are views built from the store's records
and the runner's feedback; nothing here talks to a database or a GPU.
"""

from __future__ import annotations

import difflib

from pydantic import BaseModel, Field

from htam_graph.llm.request import StepView
from htam_graph.memory.models import Evidence, GlobalNode, GlobalScore, LocalNode, SimilarStep, StepUpdate, Transition
from htam_graph.memory.outcome import COUNTER_NAMES, Counters
from htam_graph.memory.scoring import FamilyEvidence, shrink
from htam_graph.runner.models import EvalResult, Feedback, Roofline
from htam_graph.vocab import Method, Verdict, shape_class_of

EVIDENCE_SHOWN = 3  # newest evidence entries of each sign a prompt shows per local
DIFF_SHARE = 0.6  # a candidate is shown as a diff when that is under this share of its code


def code_diff(base: str | None, source: str | None) -> str | None:
    """`source` as a unified diff against `base`, when there is a base and the diff is
    shorter than DIFF_SHARE of the code (else the code itself reads better)."""
    if base is None or source is None:
        return None
    lines = difflib.unified_diff(
        base.strip().splitlines(), source.strip().splitlines(), "base", "candidate", n=3, lineterm=""
    )
    diff = "\n".join(lines)
    return diff if diff and len(diff) < DIFF_SHARE * len(source) else None


class TaskContext(BaseModel):
    """The task as the prompts describe it."""

    id: str
    name: str
    source: str = Field(description="the KernelBench-format task file")
    dtype: str = Field(description="dtype of the first floating-point input, e.g. float32")
    input_shapes: list[list[int]] = Field(description="shapes of get_inputs()'s tensors")
    bytes_moved: int | None = Field(
        None, description="as the judge's roofline counts them (runner/referee/roofline.moved_bytes); None: unknown"
    )
    flops: int | None = Field(None, description="of the reference forward, as the roofline counts them")
    family: str | None = Field(
        None, description="the operator family (catalog/families.py), as strategies' applies_to name it; None: unknown"
    )

    @property
    def shape_class(self) -> str | None:
        """The coarse problem size (vocab.shape_class_of of bytes_moved); None when unknown."""
        shape = shape_class_of(self.bytes_moved)
        return None if shape is None else shape.value

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte moved, as the roofline counts both; None when unknown."""
        if not self.flops or not self.bytes_moved:
            return None
        return self.flops / self.bytes_moved


class Outcomes(BaseModel):
    """A node's or an edge's statistics, as rates a reader takes in at a glance."""

    attempts: int
    success_rate: float | None
    mean_reward: float | None
    failures: dict[str, int] = Field(description="the failure counters that are not zero")

    @classmethod
    def of(cls, attempts: int, reward_sum: float, counters: Counters) -> Outcomes:
        failures = {k: n for k in COUNTER_NAMES if k != "successes" and (n := getattr(counters, k))}
        return cls(
            attempts=attempts,
            success_rate=counters.successes / attempts if attempts else None,
            mean_reward=reward_sum / attempts if attempts else None,
            failures=failures,
        )


class GlobalView(BaseModel):
    id: str
    name: str
    intent: str
    goals: list[str]
    triggers: list[str]
    risks: list[str]
    prior: float
    trend: float
    outcomes: Outcomes
    score: float | None = Field(None, description="S(g) for the run's prefix")
    probability: float | None = Field(None, description="P(g) under the policy")

    @classmethod
    def of(cls, g: GlobalNode, score: GlobalScore | None = None) -> GlobalView:
        return cls(
            id=g.id,
            name=g.name,
            intent=g.intent,
            goals=g.goals,
            triggers=g.triggers,
            risks=g.risks,
            prior=g.prior,
            trend=g.trend,
            outcomes=Outcomes.of(g.attempts, g.reward_sum, g),
            score=score.score if score else None,
            probability=score.probability if score else None,
        )


class FamilyRecord(BaseModel):
    """A strategy's steps on tasks of one operator family."""

    family: str
    attempts: int
    reward_sum: float


class LocalView(BaseModel):
    id: str
    global_id: str
    name: str
    pattern: str
    checks: list[str]
    pitfalls: list[str]
    applies_to: list[str]
    outcomes: Outcomes
    positive: list[Evidence] = Field(description="newest first")
    negative: list[Evidence] = Field(description="newest first")
    family: FamilyRecord | None = Field(
        None, description="its record on tasks of the run's operator family; None when the method does not condition"
    )

    @classmethod
    def of(cls, loc: LocalNode, family: FamilyEvidence | None = None) -> LocalView:
        tally = family.local_tally(loc.id) if family is not None and family.family is not None else None
        return cls(
            id=loc.id,
            global_id=loc.global_id,
            name=loc.name,
            pattern=loc.pattern,
            checks=loc.checks,
            pitfalls=loc.pitfalls,
            applies_to=[f.value for f in loc.applies_to],
            outcomes=Outcomes.of(loc.attempts, loc.reward_sum, loc),
            positive=loc.positive[:EVIDENCE_SHOWN],
            negative=loc.negative[:EVIDENCE_SHOWN],
            family=FamilyRecord(family=family.family, attempts=tally.n, reward_sum=tally.reward_sum)
            if family is not None and family.family is not None and tally is not None
            else None,
        )

    def fits(self, family: str | None) -> bool:
        """Whether the strategy applies to a task of `family` (unknown: every strategy does)."""
        return family is None or not self.applies_to or family in self.applies_to or "any" in self.applies_to

    def shrunk_mean_reward(self, alpha: float) -> float:
        """The local's own utility, shrunk toward 0 like B(g), then its record on the run's
        family shrunk toward that (docs/method.md, "Conditioning on the operator family"):
        the fallback's ranking."""
        attempts = self.outcomes.attempts
        pooled = (self.outcomes.mean_reward or 0.0) * attempts / (attempts + alpha)
        if self.family is None:
            return pooled
        return shrink(self.family.reward_sum, self.family.attempts, pooled, alpha)


class TransitionView(BaseModel):
    """An edge from a global of the recent path to the chosen global."""

    source: str
    target: str
    distance: int = Field(description="how many steps back the source stands in the path (1: the last step)")
    when: str
    rationale: str
    risks: list[str]
    prior: float
    outcomes: Outcomes

    @classmethod
    def of(cls, t: Transition, distance: int) -> TransitionView:
        return cls(
            source=t.source,
            target=t.target,
            distance=distance,
            when=t.when,
            rationale=t.rationale,
            risks=t.risks,
            prior=t.prior,
            outcomes=Outcomes.of(t.n, t.reward_sum, t),
        )


class PathEntry(BaseModel):
    """An earlier step of this run, as the next step's prompts show it."""

    index: int
    global_id: str | None
    local_id: str | None
    verdict: Verdict
    speedup: float | None
    reward: float
    note: str

    @classmethod
    def of(cls, step: StepUpdate) -> PathEntry:
        return cls(
            index=step.index,
            global_id=step.global_id,
            local_id=step.local_id,
            verdict=step.verdict,
            speedup=step.speedup,
            reward=step.reward,
            note=step.note,
        )


class RetrievedStep(BaseModel):
    """A past step of any run, shown by the flat-memory baseline (docs/method.md, "flat")
    with its similarity weight, what it changed (a diff against the kernel it modified) and
    the text of the strategy it applied."""

    task_id: str
    local_id: str | None
    verdict: Verdict
    speedup: float | None
    reward: float
    weight: float
    note: str
    change: str = ""
    strategy: str | None = Field(None, description="the applied strategy's name and pattern")

    @classmethod
    def of(cls, similar: SimilarStep, strategy: str | None = None) -> RetrievedStep:
        s = similar.step
        return cls(
            task_id=s.task_id, local_id=s.local_id, verdict=s.verdict, speedup=s.speedup, reward=s.reward,
            weight=similar.weight, note=s.note, change=s.change, strategy=strategy,
        )  # fmt: skip


class Candidate(BaseModel):
    """A candidate of the run: its best so far (the reference itself before any step beats
    it), or its fastest correct one."""

    step_index: int | None = Field(description="None: the PyTorch reference")
    source: str | None
    speedup: float = Field(description="against eager; 1.0 for the reference")
    feedback: Feedback | None


class LastCandidate(BaseModel):
    """The previous step's candidate when it did not become the code the step builds on: its
    code (or its diff against that code) beside the feedback that refers to it."""

    step_index: int
    source: str | None = Field(description="None: the answer held no code")
    diff: str | None = Field(description="the code as a diff against the base, when that is shorter")
    feedback: Feedback


class ReferenceTiming(BaseModel):
    """The PyTorch reference's own times and roofline: the time to beat, from step 1 on."""

    eager_ms: float
    compile_ms: float | None
    roofline: Roofline | None

    @classmethod
    def of(cls, result: EvalResult) -> ReferenceTiming | None:
        if result.reference_eager is None:
            return None
        compiled = result.reference_compile
        return cls(
            eager_ms=round(result.reference_eager.median_ms, 4),
            compile_ms=round(compiled.median_ms, 4) if compiled is not None else None,
            # a reference-only job's roofline is the reference's own; a candidate's is the candidate's
            roofline=result.roofline if result.verdict == Verdict.CHECKED else None,
        )


class StepState(BaseModel):
    """s_t: everything a step's prompts are rendered from."""

    method: Method
    run_id: str = Field("", description="the run's id (with its seed): what a generator's own draws are seeded by")
    task: TaskContext
    step_index: int
    steps: int
    best: Candidate
    fastest: Candidate | None = Field(
        None,
        description="the run's fastest correct candidate while none beats the reference (so the best is the "
        "reference); None once one does, or while none is correct",
    )
    last: Feedback | None = Field(description="the previous step's feedback, when that step did not set the best")
    last_candidate: LastCandidate | None = Field(
        None, description="the previous step's candidate and feedback, when it is not the base shown"
    )
    path: list[PathEntry] = Field(description="earlier steps, oldest first")
    reference: ReferenceTiming | None = Field(None, description="the reference's times, where the judge gave them")

    @property
    def base(self) -> Candidate:
        """The candidate the step builds on: the best, or while the reference is the best,
        the fastest correct kernel (a correct kernel slower than eager is still the start)."""
        return self.fastest if self.best.source is None and self.fastest is not None else self.best

    def view(self) -> StepView:
        """The state as a backend that reads it rather than the prompts' text is given it
        (LLMClient.directions and strategies; llm/request.py)."""
        return StepView.model_validate(self)
