"""What a backend that reads the run's state rather than the prompt's text (the strategy
catalog) is given with each call: `Prompt.context`, a `Request`, and the `StepView` its
`directions()` and `strategies()` hooks take.

The loop renders its prompts from its own views (loop/state.py: StepState, LocalView,
GlobalView, ...), which this layer may not import; a request holds the part of them such a
backend reads, validated from those views by attribute. So each field here has the name and
the meaning of the field it is read from, and a request's fields are named after the
template values they come from (`Request.of`). A request is not sent and not hashed
(Prompt.sha256): the text is what a language model reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from htam_graph.vocab import Verdict

# Frozen, strict about names, and read from the loop's views by attribute.
_VIEW = ConfigDict(frozen=True, extra="forbid", from_attributes=True)


class TaskRef(BaseModel):
    """The task (loop/state.TaskContext)."""

    model_config = _VIEW

    id: str
    source: str = Field(description="the KernelBench-format task file")
    family: str | None = Field(None, description="the operator family (catalog/families.py); None: unknown")


class KernelRef(BaseModel):
    """A kernel of the run a step may build on (loop/state.Candidate)."""

    model_config = _VIEW

    step_index: int | None = Field(None, description="the step that wrote it; None: the reference or the start kernel")
    source: str | None = Field(None, description="None: the PyTorch reference")


class PastStep(BaseModel):
    """An earlier step of the run (loop/state.PathEntry)."""

    model_config = _VIEW

    index: int
    local_id: str | None = Field(None, description="the strategy it applied; None: none")
    verdict: Verdict


class StepView(BaseModel):
    """The step's state (loop/state.StepState) as such a backend reads it."""

    model_config = _VIEW

    run_id: str = Field("", description="the run's id (with its seed): what a generator's own draws are seeded by")
    task: TaskRef
    step_index: int
    best: KernelRef = Field(KernelRef(), description="the run's best so far; the reference before any step beats it")
    fastest: KernelRef | None = Field(
        None, description="the run's fastest correct candidate while none beats the reference; else None"
    )
    path: tuple[PastStep, ...] = Field((), description="earlier steps, oldest first")

    @property
    def base(self) -> KernelRef:
        """The kernel the step builds on: the best, or while the reference is the best, the
        fastest correct kernel (as StepState.base)."""
        return self.fastest if self.best.source is None and self.fastest is not None else self.best


class Tally(BaseModel):
    """A strategy's record in the memory (loop/state.Outcomes)."""

    model_config = _VIEW

    attempts: int = 0
    mean_reward: float | None = None


class FamilyTally(BaseModel):
    """A strategy's steps on tasks of one operator family (loop/state.FamilyRecord)."""

    model_config = _VIEW

    family: str
    attempts: int
    reward_sum: float


class Offer(BaseModel):
    """A strategy offered to choose from (loop/state.LocalView)."""

    model_config = _VIEW

    id: str
    applies_to: tuple[str, ...] = Field((), description="the operator families it applies to ('any': all)")
    outcomes: Tally = Tally()
    family: FamilyTally | None = Field(
        None, description="its record on the task's operator family; None when the method does not condition"
    )


class Pick(BaseModel):
    """A direction (loop/state.GlobalView) or a strategy (LocalView) the step took."""

    model_config = _VIEW

    id: str


class Judged(BaseModel):
    """A judged candidate's outcome (runner/models.Feedback)."""

    model_config = _VIEW

    verdict: Verdict


class Request(BaseModel):
    """What one call gives such a backend. Each call fills the fields of the values its
    template is rendered from: generate (state, glob, local), repair (state), select_local
    (state, glob, locals), reflect (task_id, global_id, local_id, local, feedback)."""

    model_config = _VIEW

    state: StepView | None = None
    glob: Pick | None = Field(None, description="the step's direction; None: the method chose none")
    local: Pick | None = Field(None, description="the step's strategy; None: the method chose none")
    locals: tuple[Offer, ...] = Field((), description="the strategies offered to choose from")
    task_id: str | None = None
    global_id: str | None = None
    local_id: str | None = None
    feedback: Judged | None = Field(None, description="the judged candidate's outcome (a reflection)")

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Request:
        """The request of a call whose template is rendered from `values` (the loop's views):
        those named like its fields, read by attribute."""
        return cls.model_validate({name: value for name, value in values.items() if name in cls.model_fields})
