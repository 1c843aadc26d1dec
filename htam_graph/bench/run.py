"""A whole bench from Python (the CLI and notebooks): the unfinished streams through an
executor. Nothing here imports pandas or matplotlib: the grid runs wherever the loop
runs, and the report (htam_graph/bench/report.py, report_bench) can be written on
another machine from the folder alone."""

from __future__ import annotations

import logging
from collections.abc import Callable

from htam_graph.bench.events import Event
from htam_graph.bench.executor import Executor
from htam_graph.bench.plan import Layout, streams
from htam_graph.bench.worker import BenchJob

log = logging.getLogger(__name__)


def run_bench(job: BenchJob, executor: Executor, emit: Callable[[Event], None]) -> None:
    """Run what is not finished yet (all of it for a new bench). Hold the folder's lock
    (plan.exclusive) around it."""
    layout = Layout(job.out)
    grid = streams(job.manifest.config, job.manifest.tag)
    pending = [s for s in grid if not layout.stream_done(s)]
    log.info("%d of %d streams to run", len(pending), len(grid))
    if pending:
        executor.run(job, pending, emit)
