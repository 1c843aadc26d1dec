"""A bench's run folders as tables: one row per run, one row per step (docs/bench.md,
"Tables"). Everything is read back from the folders the loop wrote, so the tables of a
bench that was interrupted and continued are those of one that never stopped."""

from __future__ import annotations

import functools
import hashlib
import logging
import math
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict

from htam_graph.bench.plan import TRAJECTORY, BenchManifest, Layout, RunSpec, Stream
from htam_graph.catalog.families import recognize
from htam_graph.catalog.ir import Unsupported
from htam_graph.files import atomic_file
from htam_graph.llm.base import Usage
from htam_graph.loop.optimizer import load_steps
from htam_graph.loop.records import RunManifest, RunSummary, StepRecord
from htam_graph.loop.runs import MANIFEST
from htam_graph.memory.models import best_step
from htam_graph.runner.models import EvalResult, Timing
from htam_graph.tasks import builtin_suite_dir, load_tasks
from htam_graph.vocab import Verdict

log = logging.getLogger(__name__)

# Verdicts a step can end with (CHECKED is `htam eval --no-run`'s, never a step's).
STEP_VERDICTS = [v for v in Verdict if v != Verdict.CHECKED]
USAGE = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd"]
_FLOATS = {"speedup": "float64", "speedup_compile": "float64", "cost_usd": "float64"}
UNSUPPORTED, UNKNOWN = "unsupported", "unknown"  # families of tasks the catalog has no kernel for, or not read
RUN_TYPES = {
    **_FLOATS,
    "family": "string",
    "level": "Int64",
    "best_step": "Int64",
    "candidate_ms": "float64",
    "eager_ms": "float64",
    "compile_ms": "float64",
    "candidate_gpu_ms": "float64",
    "eager_gpu_ms": "float64",
    "compile_gpu_ms": "float64",
}
STEP_TYPES = {
    **_FLOATS,
    "global_id": "string",
    "local_id": "string",
    "p_chosen": "float64",
    "draw_entropy": "float64",
    "score_spread": "float64",
}


class Results(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    runs: pd.DataFrame
    steps: pd.DataFrame


def collect(layout: Layout, manifest: BenchManifest, streams: list[Stream]) -> Results:
    """The finished runs of the grid (in grid order) and their steps."""
    levels = {t.id: t.level for t in manifest.config.tasks}
    families = {t.id: task_family(t.path, t.sha256) for t in manifest.config.tasks}
    runs: list[dict] = []
    steps: list[dict] = []
    for spec in (spec for stream in streams for spec in stream.runs):
        if not layout.run_done(spec):
            continue
        folder = layout.run(spec)
        records = load_steps(folder)
        runs.append(_run_row(spec, folder, records, manifest.tag, levels[spec.task_id], families[spec.task_id]))
        steps.extend(_step_row(spec, record) for record in records)
    return Results(runs=_typed(pd.DataFrame(runs), RUN_TYPES), steps=_typed(pd.DataFrame(steps), STEP_TYPES))


@functools.cache
def task_family(path: str, sha256: str) -> str:
    """The task's operator family as the strategy catalog recognises it from its graph
    (docs/catalog.md); `unsupported` when the catalog has no kernel for it. The source is
    the file the bench ran when it is still there, else the built-in task with the same
    hash (a bench reported on another machine), else the family is `unknown`."""
    source = _source(Path(path), sha256)
    if source is None:
        return UNKNOWN
    try:
        return recognize(source).family.value
    except Unsupported:
        return UNSUPPORTED
    except Exception as e:  # a task that does not even build on meta tensors here
        log.info("%s: no family (%s: %s)", path, type(e).__name__, e)
        return UNSUPPORTED


def _source(path: Path, sha256: str) -> str | None:
    try:
        source = path.read_text()
        if hashlib.sha256(source.encode("utf-8")).hexdigest() == sha256:
            return source
    except OSError:
        pass
    return _builtin_sources().get(sha256)


@functools.cache
def _builtin_sources() -> dict[str, str]:
    """The built-in tasks' sources by their sha256 (read once)."""
    return {t.sha256: t.source for t in load_tasks(builtin_suite_dir())}


def _typed(frame: pd.DataFrame, types: dict[str, str]) -> pd.DataFrame:
    """Nullable columns keep their type when every value is missing (no GPU timed torch.compile)."""
    return frame.astype(types) if not frame.empty else frame


def write_tables(layout: Layout, results: Results) -> list[Path]:
    """results/runs and results/steps, each as Parquet and CSV."""
    layout.results.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in (("runs", results.runs), ("steps", results.steps)):
        for suffix in ("parquet", "csv"):
            path = layout.results / f"{name}.{suffix}"
            with atomic_file(path) as tmp:
                if suffix == "parquet":
                    frame.to_parquet(tmp, index=False)
                else:
                    frame.to_csv(tmp, index=False)
            written.append(path)
    return written


def _best(records: list[StepRecord]) -> tuple[StepRecord, EvalResult] | None:
    """The run's best correct candidate (memory.models.best_step) and its judge's result."""
    best = best_step(records)
    result = _ok_result(best) if best is not None else None
    return (best, result) if best is not None and result is not None else None


def _ok_result(record: StepRecord) -> EvalResult | None:
    result = record.final.result
    return result if record.verdict == Verdict.OK and result is not None else None


def _usage(usage: Usage) -> dict[str, float | int | None]:
    return {name: getattr(usage, name) for name in USAGE}


def _run_row(spec: RunSpec, folder: Path, records: list[StepRecord], tag: str, level: int | None, family: str) -> dict:
    manifest = RunManifest.model_validate_json((folder / MANIFEST).read_text())
    summary = RunSummary.model_validate_json((folder / TRAJECTORY).read_text())
    best = _best(records)
    result = best[1] if best is not None else None
    verdicts = {f"n_{v.value}": sum(r.verdict == v for r in records) for v in STEP_VERDICTS}
    return {
        "bench": tag,
        "run_id": spec.run_id,
        "task_id": spec.task_id,
        "level": level,
        "family": family,
        "method": spec.method.value,
        "seed": spec.seed,
        "llm": manifest.llm,
        "evaluator": manifest.evaluator,
        "device": manifest.device,
        "steps_done": summary.steps_done,
        "steps_planned": summary.steps_planned,
        "stopped": summary.stopped,
        "correct": best is not None,
        "speedup": result.speedup_eager if result else None,
        "speedup_compile": result.speedup_compile if result else None,
        "best_step": best[0].index if best is not None else None,
        # What a call costs (the GPU's time, or the host's when larger): the speedups divide these.
        "candidate_ms": _cost(result.candidate if result else None),
        "eager_ms": _cost(result.reference_eager if result else None),
        "compile_ms": _cost(result.reference_compile if result else None),
        "candidate_gpu_ms": _gpu(result.candidate if result else None),
        "eager_gpu_ms": _gpu(result.reference_eager if result else None),
        "compile_gpu_ms": _gpu(result.reference_compile if result else None),
        **verdicts,
        **_usage(summary.usage),
        "seconds": sum(_seconds(r) for r in records),
    }


def _cost(timing: Timing | None) -> float | None:
    return timing.cost_ms if timing is not None else None


def _gpu(timing: Timing | None) -> float | None:
    return timing.median_ms if timing is not None else None


def _step_row(spec: RunSpec, record: StepRecord) -> dict:
    result = _ok_result(record)
    return {
        "run_id": spec.run_id,
        "task_id": spec.task_id,
        "method": spec.method.value,
        "seed": spec.seed,
        "index": record.index,
        "global_id": record.global_id,
        "local_id": record.local_id,
        "local_fallback": record.local_fallback,
        **_draw(record),
        "verdict": record.verdict.value,
        "attempts": len(record.attempts),
        "reused": any(a.result is not None and a.result.reused for a in record.attempts),
        "speedup": result.speedup_eager if result else None,
        "speedup_compile": result.speedup_compile if result else None,
        "best_before": record.best_before,
        "best_after": record.best_after,
        "base_before": record.update.base_before,
        "reward": record.update.reward,
        **_usage(record.usage),
        "seconds": _seconds(record),
    }


def _draw(record: StepRecord) -> dict[str, float | None]:
    """How the policy drew the step's global (docs/bench.md, "Tables"): the chosen global's
    probability, the entropy of the draw over the globals it could draw (P > 0), divided by
    its maximum log(n) (1.0: uniform; None below two), and the spread of their scores."""
    drawable = {g: p for g, p in record.probabilities.items() if p > 0}
    if not drawable or record.global_id is None:
        return {"p_chosen": None, "draw_entropy": None, "score_spread": None}
    scores = [record.scores[g] for g in drawable if g in record.scores]
    entropy = -sum(p * math.log(p) for p in drawable.values()) / math.log(len(drawable)) if len(drawable) > 1 else None
    return {
        "p_chosen": drawable.get(record.global_id, 0.0),
        "draw_entropy": entropy,
        "score_spread": max(scores) - min(scores) if scores else None,
    }


def _seconds(record: StepRecord) -> float:
    return (record.finished_at - record.started_at).total_seconds()
