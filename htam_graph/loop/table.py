"""A tabular benchmark of the catalog's kernel space: every kernel of each task's space
(catalog/space.py) judged once on a GPU, one row per task x kernel, in a Parquet file
(`htam catalog record` writes it; docs/method.md "Comparing methods").

`TableEvaluator` replays such a table: a candidate is looked up by its kernel key (the
sha256 of its code without the header and the `# catalog:` record), so the result is the
GPU judge's own; its time is drawn from the recorded trials with a seeded generator (the
median of a resample of them), so runs see timing noise of the size the GPU showed, and
the same run id always draws the same. A kernel the table does not hold is a one-line
error naming the task and the kernel: nothing is invented.
"""

from __future__ import annotations

import hashlib
import random
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from htam_graph.catalog.record import read_provenance
from htam_graph.catalog.space import SPACE_VERSION, kernel_key
from htam_graph.errors import BadInput
from htam_graph.loop.evaluators import HoldsNothing, arch_of
from htam_graph.runner.hardware import unmeasured
from htam_graph.runner.models import EvalResult, Verdict
from htam_graph.tasks import Task

TABLE_FORMAT = "htam-table/1"
# Columns of a table, one row per task x kernel state (the rest of the judge's record is in `result`).
COLUMNS = [
    "format", "space_version", "task_id", "task_sha256", "family", "key", "knobs", "path", "depth",
    "moves", "blocked", "candidate_sha256", "verdict", "speedup_eager", "candidate_ms", "eager_ms",
    "compile_ms", "trials", "spread", "errors", "device", "result",
]  # fmt: skip


def spread(samples: list[float]) -> float | None:
    """Relative half-width of the middle 90% of a kernel's trials (None without trials)."""
    if len(samples) < 10:
        return None
    ordered = sorted(samples)
    lo, hi = ordered[len(ordered) // 20], ordered[-(len(ordered) // 20) - 1]
    return (hi - lo) / 2 / statistics.median(ordered)


def row_of(space_row: dict[str, Any], result: EvalResult) -> dict[str, Any]:
    """A table row: the state's place in its space and the judge's result for its kernel."""
    cand = result.candidate
    samples = cand.samples_ms if cand is not None else []
    return {
        "format": TABLE_FORMAT,
        "space_version": SPACE_VERSION,
        **space_row,
        "task_sha256": result.task_sha256,
        "candidate_sha256": result.candidate_sha256,
        "verdict": result.verdict.value,
        "speedup_eager": result.speedup_eager,
        "candidate_ms": cand.median_ms if cand is not None else None,
        "eager_ms": result.reference_eager.median_ms if result.reference_eager else None,
        "compile_ms": result.reference_compile.median_ms if result.reference_compile else None,
        "trials": len(samples),
        "spread": spread(samples),
        "errors": result.errors[:500],
        "device": result.device,
        "result": result.model_dump_json(),
    }


def read_table(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as e:
        raise BadInput(
            f"--replay {path}: not a table `htam catalog record` wrote ({e})", option="--replay", path=path
        ) from None
    missing = [c for c in ("format", "task_id", "key", "result") if c not in frame.columns]
    if missing or (len(frame) and set(frame["format"]) != {TABLE_FORMAT}):
        raise BadInput(
            f"--replay {path}: not an {TABLE_FORMAT} table (missing {missing or 'its format'})",
            option="--replay",
            path=path,
        )
    return frame


class TableEvaluator(HoldsNothing):
    """Replays a table (see the module docstring). `for_run(run_id)` gives the evaluator a
    run uses: its draws are seeded by the run id, so a run replays exactly."""

    label = "replay"

    def __init__(self, path: Path, frame: pd.DataFrame | None = None, salt: str = "") -> None:
        self.path, self.salt = path, salt
        self.frame = read_table(path) if frame is None else frame
        self._rows: dict[tuple[str, str], Any] = {
            (str(r.task_id), str(r.key)): r
            for r in self.frame[["task_id", "key", "task_sha256", "result"]].itertuples()
        }
        self._results: dict[tuple[str, str], EvalResult] = {}
        self._draws: Counter[tuple[str, str]] = Counter()
        devices = sorted(set(self.frame["device"].dropna())) if len(self.frame) else []
        self.device = f"replay of {', '.join(devices) or 'no'} results in {path.name} ({SPACE_VERSION} table)"
        self.target = f"an {devices[0]}" if devices else "a GPU"
        gpu = devices[0] if devices else None
        self.hardware = unmeasured(self.device, arch_of(gpu or ""), None, gpu=gpu)

    def for_run(self, run_id: str) -> TableEvaluator:
        return TableEvaluator(self.path, self.frame, salt=run_id)

    def evaluate(self, task: Task, source: str) -> EvalResult:
        key = kernel_key(source)
        row = self._rows.get((task.id, key))
        if row is None:
            raise BadInput(
                f"{self.path.name} holds no kernel {key} for {task.id} ({_knobs_of(source)}): the table holds "
                f"the catalog's {SPACE_VERSION} space from the base kernel; record it with `htam catalog record`",
                option="--replay",
                value=task.id,
                path=self.path,
            )
        if row.task_sha256 != task.sha256:
            raise BadInput(
                f"{self.path.name} was recorded for another version of {task.id}'s file; record it again",
                option="--replay",
                value=task.id,
                path=self.path,
            )
        result = self._results.get((task.id, key))
        if result is None:
            result = self._results[(task.id, key)] = EvalResult.model_validate_json(row.result)
        self._draws[(task.id, key)] += 1
        return self._drawn(result, f"{self.salt}|{task.id}|{key}|{self._draws[(task.id, key)]}")

    def _drawn(self, result: EvalResult, seed: str) -> EvalResult:
        """The result with the candidate's median replaced by the median of a resample of its
        recorded trials (the speedups scaled by the same factor)."""
        update: dict[str, Any] = {"device": self.device}
        cand = result.candidate
        if result.verdict == Verdict.OK and cand is not None and len(cand.samples_ms) >= 10:
            rng = random.Random(hashlib.sha256(seed.encode()).digest())
            drawn = statistics.median(rng.choices(cand.samples_ms, k=len(cand.samples_ms)))
            factor = cand.median_ms / drawn
            update["candidate"] = cand.model_copy(update={"median_ms": drawn})
            if result.speedup_eager is not None:
                update["speedup_eager"] = result.speedup_eager * factor
            if result.speedup_compile is not None:
                update["speedup_compile"] = result.speedup_compile * factor
        return result.model_copy(update=update)


def _knobs_of(source: str) -> str:
    record = read_provenance(source)
    if record is None:
        return "not a catalog kernel"
    changed = record.knobs.changed()
    return "knobs " + (", ".join(f"{k}={v}" for k, v in sorted(changed.items())) or "of the base kernel")
