"""What a run writes down, step by step: the run folder's records.

A run folder (`<out>/<run id>/`) holds `run.json` (the manifest), `steps/NNN.json` (one
record per completed step, written atomically before the step reaches the memory),
`candidates/NNN.py` (each step's code), `best.py` (the run's best, its fastest correct candidate: a ready-to-use
`ModelNew` file), `trajectory.json` (the run at a glance) and `responses.yaml` (every LLM
answer in the script backend's format, so `--llm script` replays the run exactly).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, computed_field, model_validator

from htam_graph.files import atomic_write as atomic_write  # the loop's writers import it from here
from htam_graph.llm.base import Completion, Prompt, Usage
from htam_graph.memory.models import RunRecord, StepUpdate, utcnow
from htam_graph.runner.models import EvalResult
from htam_graph.vocab import Method, Verdict


class CallRecord(BaseModel):
    """One LLM call: which templates (name, version, hash) made the prompt, what came back."""

    template: str
    templates: list[str] = Field(description="name@version of every template in the prompt")
    prompt_sha256: str
    text: str
    reasoning: str | None
    usage: Usage
    model: str
    error: str | None = Field(None, description="why the answer was not usable (then retried or fallen back)")
    stop_reason: str | None = Field(None, description="as the provider named it: stop, length, end_turn, ...")
    truncated: bool = Field(False, description="the answer hit its token limit")

    @classmethod
    def of(cls, prompt: Prompt, completion: Completion, error: str | None = None) -> CallRecord:
        return cls(
            template=prompt.template,
            templates=[f"{r.name}@v{r.version}" for r in prompt.rendered],
            prompt_sha256=prompt.sha256,
            text=completion.text,
            reasoning=completion.reasoning,
            usage=completion.usage,
            model=completion.model,
            error=error,
            stop_reason=completion.stop_reason,
            truncated=completion.truncated,
        )


class Attempt(BaseModel):
    """One candidate of a step and its judgement (a repair is a second attempt)."""

    source: str | None = Field(description="None: the answer held no code")
    result: EvalResult | None = Field(description="None when there was no candidate to judge")


# What a step record reads from its update (records written before held copies of them).
FROM_UPDATE = ("global_id", "local_id", "verdict", "speedup", "best_before", "best_after", "note")


class StepRecord(BaseModel):
    """Everything one step did, as persisted in steps/NNN.json: the step's StepUpdate (what
    the memory holds, written once) beside what the memory does not keep."""

    index: int
    started_at: datetime
    finished_at: datetime = Field(default_factory=utcnow)
    scores: dict[str, float] = Field(default_factory=dict, description="S(g) of every global at decision time")
    probabilities: dict[str, float] = Field(default_factory=dict)
    offered: list[str] | None = Field(
        None,
        description="the globals the backend said it could act on, the only ones the method could choose "
        "(P(g) = 0 for the others); None: all of them",
    )
    local_fallback: bool = Field(False, description="the local was taken by score after invalid answers")
    calls: list[CallRecord]
    attempts: list[Attempt]
    update: StepUpdate = Field(
        description="what the step wrote to the memory: its direction, verdict, speedup, the run's best before "
        "and after it, its reward and its note (the properties below read them there)"
    )

    @model_validator(mode="before")
    @classmethod
    def _from_update(cls, data: Any) -> Any:
        """A record written before these fields lived only in `update` (a resumed run's older
        steps) still loads: its copies must agree with `update`, and are dropped."""
        if not isinstance(data, dict) or not any(key in data for key in FROM_UPDATE):
            return data
        update = data.get("update")
        if update is None:
            return data  # the field validator says it is missing
        update = update if isinstance(update, StepUpdate) else StepUpdate.model_validate(update)
        for key in FROM_UPDATE:
            if key in data and data[key] != getattr(update, key):
                raise ValueError(
                    f"step {data.get('index')}: {key} {data[key]!r} disagrees with the step's update "
                    f"({getattr(update, key)!r}); the record was changed after it was written"
                )
        return {**{k: v for k, v in data.items() if k not in FROM_UPDATE}, "update": update}

    @model_validator(mode="after")
    def _bests(self) -> StepRecord:
        if self.update.best_before is None or self.update.best_after is None:
            raise ValueError("a step record's update holds the run's best speedup before and after the step")
        return self

    @property
    def global_id(self) -> str | None:
        return self.update.global_id

    @property
    def local_id(self) -> str | None:
        return self.update.local_id

    @property
    def verdict(self) -> Verdict:
        return self.update.verdict

    @property
    def speedup(self) -> float | None:
        return self.update.speedup

    @property
    def best_before(self) -> float:
        best = self.update.best_before
        assert best is not None  # _bests
        return best

    @property
    def best_after(self) -> float:
        best = self.update.best_after
        assert best is not None  # _bests
        return best

    @property
    def note(self) -> str:
        return self.update.note

    @property
    def usage(self) -> Usage:
        total = Usage()
        for call in self.calls:
            total = total + call.usage
        return total

    @property
    def final(self) -> Attempt:
        return self.attempts[-1]

    def events(self) -> dict[str, int]:
        """What did not go as asked, counted (never silent): `select_local.invalid` /
        `.truncated` (an unusable strategy choice, retried), `select_local.fallback` (the
        strategy taken by the memory's record), `reflect.fallback` (no note: the template's
        was stored), `<template>.truncated` (an answer cut off at its token limit),
        `<template>.refusal` (the model refused: a kernel call then has no candidate)."""
        counts: dict[str, int] = {}

        def add(kind: str) -> None:
            counts[kind] = counts.get(kind, 0) + 1

        for call in self.calls:
            if call.template == "reflect" and call.error:
                add("reflect.fallback")
            elif call.error:
                add(f"{call.template}.{'truncated' if call.truncated else 'invalid'}")
            elif call.truncated:
                add(f"{call.template}.truncated")
            elif call.stop_reason == "refusal":
                add(f"{call.template}.refusal")
        if self.local_fallback:
            add("select_local.fallback")
        return dict(sorted(counts.items()))


class RunManifest(BaseModel):
    """run.json: the run's identity and full configuration."""

    run: RunRecord
    task_path: str
    task_sha256: str
    llm: str = Field(description="backend:model")
    evaluator: str = Field(description="gpu, stand-in or replay")
    device: str = Field(description="what judged the candidates, as every output shows it")
    target: str = Field(description="the GPU the kernels are written for, as the prompts name it")
    sandbox: bool | None = Field(
        None,
        description="True: generated code and its builds ran confined (--sandbox); False: unconfined, with the "
        "user's privileges (--no-sandbox); None: none ran here (a replay) or the run predates the field",
    )
    htam_version: str


class TrajectoryStep(BaseModel):
    index: int
    global_id: str | None
    local_id: str | None
    verdict: Verdict
    speedup: float | None
    reward: float
    best_after: float
    cost_usd: float | None
    note: str
    input_tokens: int = Field(0, description="billed at the base input rate (cache reads and writes apart)")
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = Field(0, description="reasoning included")
    events: dict[str, int] = Field(default_factory=dict, description="StepRecord.events")


class RunSummary(BaseModel):
    """trajectory.json, and what `htam optimize --json` prints."""

    run_id: str
    task_id: str
    method: Method
    evaluator: str
    device: str
    folder: str
    steps_done: int
    steps_planned: int
    best_speedup: float | None = Field(
        description="the fastest correct candidate's speedup over eager (memory.models.best_step); None: none correct"
    )
    best_step: int | None = Field(description="its step (from 0)")
    correct: bool = Field(description="some candidate was judged ok")
    usage: Usage
    stopped: str = Field(description="why the run ended: done, max cost, ...")
    trajectory: list[TrajectoryStep]
    events: dict[str, int] = Field(default_factory=dict, description="the steps' events, summed")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cached_share(self) -> float | None:
        """The share of input tokens read from the prompt cache; None before any input."""
        u = self.usage
        total = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
        return u.cache_read_tokens / total if total else None
