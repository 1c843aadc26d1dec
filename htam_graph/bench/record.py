"""Record the catalog's kernel space of each task as a table (`htam catalog record`).

For every task: its space (catalog/space.py), then every kernel of it not yet recorded,
judged once by the evaluator (the GPU judge: references timed once per task by the
referee, builds in parallel ahead of the judging). Each result is appended to
`rows.jsonl` as it arrives, so a killed recording continues where it stopped; after each
task `table.parquet` is rewritten from all rows (loop/table.py has the columns) and
`meta.json` says what was recorded where, with which commit and command, and how much
judge time each task took.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
from pydantic import BaseModel, Field

from htam_graph.catalog.families import recognize
from htam_graph.catalog.ir import Unsupported
from htam_graph.catalog.space import MAX_STATES, SPACE_VERSION, Space, build_space
from htam_graph.errors import BadInput
from htam_graph.files import atomic_file, atomic_write
from htam_graph.loop.evaluators import CandidateEvaluator, GpuEvaluator
from htam_graph.loop.table import COLUMNS, row_of
from htam_graph.runner.models import EvalResult
from htam_graph.runner.sandbox import NO_SANDBOX_FLAG
from htam_graph.tasks import Task

log = logging.getLogger(__name__)

ROWS = "rows.jsonl"
TABLE = "table.parquet"
META = "meta.json"


class TaskRecord(BaseModel):
    task_id: str
    family: str | None = None
    states: int = 0
    strategies: list[str] = Field(default_factory=list)
    recorded: int = 0
    judge_seconds: float = 0.0
    unsupported: str | None = None


class TableMeta(BaseModel):
    space_version: str = SPACE_VERSION
    max_states: int
    device: str
    sandbox: bool = Field(
        False,
        description="generated code and its builds judged confined (--sandbox); False: unconfined, with the "
        "user's privileges (so were tables before the field)",
    )
    command: str
    commit: str
    started_at: datetime
    updated_at: datetime
    tasks: list[TaskRecord]

    @property
    def judge_seconds(self) -> float:
        return sum(t.judge_seconds for t in self.tasks)


def space_rows(space: Space) -> dict[str, dict[str, Any]]:
    """The columns of each state that come from the space, not from the judge."""
    return {
        key: {
            "task_id": space.task_id,
            "family": space.family,
            "key": key,
            "knobs": json.dumps(state.knobs.changed(), sort_keys=True),
            "path": json.dumps(state.path),
            "depth": state.depth,
            "moves": json.dumps(state.moves, sort_keys=True),
            "blocked": json.dumps(state.blocked, sort_keys=True),
        }
        for key, state in space.states.items()
    }


Progress = Callable[[str, int, int], None]  # task id, done, total


def record(
    tasks: list[Task],
    out: Path,
    evaluator: CandidateEvaluator,
    command: str,
    commit: str,
    max_states: int = MAX_STATES,
    progress: Progress | None = None,
    sandbox: bool = False,
) -> TableMeta:
    """Judge every kernel of every task's space not yet in `out`; returns the table's meta.
    `sandbox`: whether `evaluator` confines generated code (--sandbox), as meta.json says."""
    meta = check_continues(out, sandbox)
    out.mkdir(parents=True, exist_ok=True)
    rows = _read_rows(out / ROWS)
    started = meta.started_at if meta is not None else datetime.now(UTC)
    earlier = {t.task_id: t for t in meta.tasks} if meta is not None else {}
    records: list[TaskRecord] = []
    lock = threading.Lock()
    with (out / ROWS).open("a") as sink:
        for task in tasks:
            entry = earlier.get(task.id, TaskRecord(task_id=task.id))
            try:
                space = build_space(recognize(task.source), task.id, max_states)
            except Unsupported as e:
                records.append(entry.model_copy(update={"unsupported": str(e)}))
                log.info("%s: not in the catalog (%s)", task.id, e)
                continue
            began = time.monotonic()
            _record_task(task, space, evaluator, rows, sink, lock, progress)
            records.append(
                entry.model_copy(
                    update={
                        "family": space.family,
                        "states": len(space.states),
                        "strategies": space.strategies,
                        "recorded": sum(1 for key in space.states if (task.id, key, task.sha256) in rows),
                        "judge_seconds": entry.judge_seconds + (time.monotonic() - began),
                    }
                )
            )
            meta = TableMeta(
                max_states=max_states, device=evaluator.device, sandbox=sandbox, command=command, commit=commit,
                started_at=started, updated_at=datetime.now(UTC), tasks=_merged(earlier, records),
            )  # fmt: skip
            write_table(out, rows, meta)
    assert meta is not None
    return meta


def _record_task(
    task: Task,
    space: Space,
    evaluator: CandidateEvaluator,
    rows: dict[tuple[str, str, str], dict[str, Any]],
    sink: TextIO,
    lock: threading.Lock,
    progress: Progress | None,
) -> None:
    """The task's kernels not in `rows` judged, each appended to `sink` and `rows` as it comes."""
    described = space_rows(space)
    todo = [key for key in space.states if (task.id, key, task.sha256) not in rows]
    done = len(space.states) - len(todo)

    def keep(key: str, result: EvalResult) -> None:
        nonlocal done
        row = row_of(described[key], result)
        with lock:
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            rows[(row["task_id"], row["key"], row["task_sha256"])] = row
            done += 1
        if progress is not None:
            progress(task.id, done, len(space.states))

    _judge(evaluator, task, [(key, space.candidates[key]) for key in todo], keep)


def _judge(
    evaluator: CandidateEvaluator, task: Task, todo: list[tuple[str, str]], keep: Callable[[str, EvalResult], None]
) -> None:
    """Every kernel of `todo` judged; the GPU judge builds them all ahead, in parallel."""
    if isinstance(evaluator, GpuEvaluator):
        by_sha = {_sha(source): key for key, source in todo}
        evaluator.evaluate_many(
            [(task, source) for _, source in todo], lambda result: keep(by_sha[result.candidate_sha256], result)
        )
        return
    for key, source in todo:
        keep(key, evaluator.evaluate(task, source))


def _sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _merged(earlier: dict[str, TaskRecord], records: list[TaskRecord]) -> list[TaskRecord]:
    now = {r.task_id: r for r in records}
    return [*(r for tid, r in earlier.items() if tid not in now), *records]


def write_table(out: Path, rows: dict[tuple[str, str, str], dict[str, Any]], meta: TableMeta) -> None:
    frame = pd.DataFrame(list(rows.values()), columns=COLUMNS)
    frame = frame.sort_values(["task_id", "depth", "key"], kind="stable").reset_index(drop=True)
    with atomic_file(out / TABLE) as tmp:
        frame.to_parquet(tmp, index=False, compression="zstd")
    atomic_write(out / META, meta.model_dump_json(indent=1))


def _read_rows(path: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:  # the last line of a recording killed mid-write
            continue
        rows[(row["task_id"], row["key"], row["task_sha256"])] = row
    return rows


def check_continues(out: Path, sandbox: bool) -> TableMeta | None:
    """The meta of the recording in `out` (None: a new one), which this one may continue only
    judging as it did: a table is confined throughout or not at all."""
    meta = _read_meta(out / META)
    if meta is not None and meta.sandbox != sandbox:
        was, now = ("--sandbox", NO_SANDBOX_FLAG) if meta.sandbox else (NO_SANDBOX_FLAG, "--sandbox")
        raise BadInput(
            f"{out} was recorded with {was}: continue it with {was}, or record with {now} in another --out",
            option=now,
            path=out,
        )
    return meta


def _read_meta(path: Path) -> TableMeta | None:
    return TableMeta.model_validate_json(path.read_text()) if path.exists() else None
