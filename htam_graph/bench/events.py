"""What workers report while a bench runs: plain records that cross process boundaries
(pickled through a queue today, any transport later) and drive the progress view."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from htam_graph.vocab import Method, Verdict


class RunStarted(BaseModel):
    kind: Literal["run_started"] = "run_started"
    worker: str
    run_id: str
    task_id: str
    method: Method
    seed: int
    steps_done: int = Field(description="steps a resumed run had finished before")
    steps_planned: int


class StepFinished(BaseModel):
    kind: Literal["step_finished"] = "step_finished"
    worker: str
    run_id: str
    index: int
    verdict: Verdict
    best_speedup: float | None  # memory.models.best_step: the fastest correct candidate so far


class RunFinished(BaseModel):
    kind: Literal["run_finished"] = "run_finished"
    worker: str
    run_id: str
    task_id: str
    method: Method
    seed: int
    correct: bool
    best_speedup: float | None
    cost_usd: float | None


class WorkerFailed(BaseModel):
    """A worker stopped on an error; the runs it finished are kept, the one it was in resumes."""

    kind: Literal["worker_failed"] = "worker_failed"
    worker: str
    message: str
    user_error: bool = Field(description="the user can fix it (a key, a quota, a script): one line, exit 2-4")
    error: str | None = Field(
        default=None, description="the user error's type (htam_graph/errors.py: BadInput, BackendError, ...)"
    )


Event = RunStarted | StepFinished | RunFinished | WorkerFailed
