"""A whole bench from Python (the CLI and notebooks): the unfinished streams through an
executor, then the tables and the report from what the run folders hold."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict

from htam_graph.bench.events import Event
from htam_graph.bench.executor import Executor
from htam_graph.bench.plan import Layout, streams
from htam_graph.bench.report import write_report
from htam_graph.bench.results import collect, write_tables
from htam_graph.bench.worker import BenchJob

log = logging.getLogger(__name__)


class Outcome(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    report: Path
    tables: list[Path]
    runs: pd.DataFrame


def run_bench(job: BenchJob, executor: Executor, emit: Callable[[Event], None]) -> Outcome:
    """Run what is not finished yet (all of it for a new bench), then write the tables and
    the report. Hold the folder's lock (plan.exclusive) around it."""
    layout = Layout(job.out)
    grid = streams(job.manifest.config, job.tasks)
    pending = [s for s in grid if not layout.stream_done(s)]
    log.info("%d of %d streams to run", len(pending), len(grid))
    if pending:
        executor.run(job, pending, emit)
    results = collect(layout, job.manifest, grid)
    tables = write_tables(layout, results)
    return Outcome(report=write_report(layout, job.manifest, results), tables=tables, runs=results.runs)
