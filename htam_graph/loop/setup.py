"""One run, assembled: the one builder `htam optimize`, `htam demo` and a bench's workers use.

A run needs a memory store, a generator (an LLM backend or the strategy catalog), a judge
(an evaluator), a run folder and its manifest. The callers differ in how long those live,
and say so by what they pass: `htam optimize` opens all three for one run, the demo keeps
one store, generator and judge for all its runs, a bench worker keeps a store per stream
and a judge per worker and makes a generator per run. What a run *is* (its manifest, the
judge scoped to it, the optimizer's wiring) is written once, here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from htam_graph.config import ScoringParams
from htam_graph.llm.base import LLMClient
from htam_graph.loop.evaluators import CandidateEvaluator, for_run, sandbox_of
from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.records import RunManifest, RunSummary, StepRecord
from htam_graph.loop.runs import create_run
from htam_graph.loop.state import TaskContext
from htam_graph.memory.models import RunConfig
from htam_graph.memory.store import MemoryStore
from htam_graph.tasks import Task
from htam_graph.vocab import Method

RunFolder = tuple[RunManifest, Path]  # a run's manifest (run.json) and its folder
Observer = Callable[[StepRecord, RunSummary], None]


@dataclass(frozen=True)
class RunSetup:
    """The store, generator and judge that runs are assembled from (entered by the caller,
    who owns their lifetimes)."""

    store: MemoryStore
    client: LLMClient
    judge: CandidateEvaluator

    def start(
        self,
        out: Path,
        task: Task,
        method: Method,
        seed: int,
        steps: int,
        scoring: ScoringParams,
        run_id: str | None = None,
    ) -> RunFolder:
        """A new run folder under `out`; its manifest names this generator (backend:model)
        and this judge. `run_id`: the caller's name for it (else a fresh one)."""
        return create_run(
            out=out,
            task=task,
            method=method,
            seed=seed,
            config=RunConfig(steps=steps, scoring=scoring),
            llm=f"{self.client.name}:{self.client.model}",
            evaluator=self.judge.label,
            device=self.judge.device,
            target=self.judge.target,
            run_id=run_id,
            sandbox=sandbox_of(self.judge),
        )

    def optimizer(
        self,
        task: Task,
        run: RunFolder,
        *,
        max_cost: float | None = None,
        observe: Observer | None = None,
        context: TaskContext | None = None,
    ) -> Optimizer:
        """The loop over a started (or resumed, loop/runs.open_run) run folder, judged by the
        judge scoped to the run (a table's replay draws its timings by the run's id)."""
        manifest, folder = run
        return Optimizer(
            store=self.store,
            client=self.client,
            evaluator=for_run(self.judge, manifest.run.id),
            task=task,
            manifest=manifest,
            folder=folder,
            max_cost=max_cost,
            observe=observe,
            context=context,
        )
