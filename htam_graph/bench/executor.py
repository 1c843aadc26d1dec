"""Who runs a bench's streams: today a process per GPU on this machine (or per worker
where there is no GPU); the interface is what a cluster executor (Ray, later) implements.

Each worker process sees one GPU (CUDA_VISIBLE_DEVICES, set before anything imports
torch), pulls streams from a shared queue until it is empty, and sends its events and
its log records back on one queue; the parent turns them into the progress view and
its own log. A worker dies with the bench (PR_SET_PDEATHSIG): a killed bench leaves no
worker running a stream that the next bench would run again.
"""

from __future__ import annotations

import logging
import logging.handlers
import multiprocessing
import os
import queue
import signal
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from htam_graph.bench.events import Event, WorkerFailed
from htam_graph.bench.plan import Stream
from htam_graph.bench.worker import BenchJob, run_worker
from htam_graph.errors import ERROR_TYPES, BackendError, UserError
from htam_graph.llm.base import LLMError
from htam_graph.runner.proc import die_with_parent

log = logging.getLogger(__name__)

POLL_S = 0.2


class Slot(BaseModel):
    """A place a worker runs: `gpu` is the device index it sees as its only GPU (None:
    no GPU, e.g. the stand-in evaluator)."""

    model_config = ConfigDict(frozen=True)

    name: str
    gpu: int | None = None


class BenchFailed(Exception):
    """A worker stopped on an error; `user_error` when the user can fix it (a key, a
    quota, a script), `error` its type's name (htam_graph/errors.py)."""

    def __init__(self, message: str, user_error: bool, error: str | None = None) -> None:
        super().__init__(message)
        self.user_error = user_error
        self.error = error


class Executor(Protocol):
    def run(self, job: BenchJob, streams: list[Stream], emit: Callable[[Event], None]) -> None:
        """Run every stream, calling `emit` (in this process) for each event; raise
        BenchFailed when a worker fails."""


class ProcessExecutor:
    """A process per slot on this machine, each running the streams it pulls one by one."""

    def __init__(self, slots: list[Slot]) -> None:
        if not slots:
            raise ValueError("an executor needs at least one slot")
        self.slots = slots

    def run(self, job: BenchJob, streams: list[Stream], emit: Callable[[Event], None]) -> None:
        context = multiprocessing.get_context("spawn")  # no fork: the parent may hold CUDA or threads
        slots = self.slots[: len(streams)]
        todo: Queue[Stream | None] = context.Queue()
        for stream in [*streams, *[None] * len(slots)]:  # one None per worker: its signal to stop
            todo.put(stream)
        events: Queue[Event | logging.LogRecord] = context.Queue()
        level = logging.getLogger().getEffectiveLevel()
        workers = [
            context.Process(
                target=_worker_main,
                args=(slot, os.getpid(), level, job, todo, events),
                name=f"htam-bench-{slot.name}",
            )
            for slot in slots
        ]
        try:
            for worker in workers:
                worker.start()
            failure = _serve(workers, events, emit)
        finally:
            for worker in workers:
                if worker.is_alive():
                    worker.kill()
                worker.join()
        if failure is not None:
            raise BenchFailed(failure.message, failure.user_error, failure.error)


def _serve(
    workers: Sequence[BaseProcess], events: Queue[Event | logging.LogRecord], emit: Callable[[Event], None]
) -> WorkerFailed | None:
    """Pass events on until every worker has ended or one has failed."""
    while True:
        alive = any(w.is_alive() for w in workers)
        try:
            item = events.get(timeout=POLL_S) if alive else events.get_nowait()
        except queue.Empty:
            if alive:
                continue
            break
        if isinstance(item, logging.LogRecord):
            logging.getLogger(item.name).handle(item)
        elif isinstance(item, WorkerFailed):
            return item
        else:
            emit(item)
    died = [w for w in workers if w.exitcode]
    if died:
        names = ", ".join(f"{w.name} (exit code {w.exitcode})" for w in died)
        return WorkerFailed(worker=died[0].name, message=f"worker {names} died", user_error=False)
    return None


def user_failure(worker: str, e: UserError | LLMError) -> WorkerFailed:
    """The event for a worker stopped by a user's error, naming its type for the parent's
    exit code; an LLMError (the backend kept failing) is a BackendError's."""
    error = type(e) if isinstance(e, UserError) else BackendError
    name = next(c.__name__ for c in error.__mro__ if c.__name__ in ERROR_TYPES)
    return WorkerFailed(worker=worker, message=str(e), user_error=True, error=name)


def _worker_main(
    slot: Slot,
    parent: int,
    level: int,
    job: BenchJob,
    todo: Queue[Stream | None],
    events: Queue[Event | logging.LogRecord],
) -> None:
    if slot.gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(slot.gpu)
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the bench's to handle: it ends the workers
    if os.getppid() != parent:
        return  # the bench died before this worker was tied to it
    root = logging.getLogger()
    root.handlers = [logging.handlers.QueueHandler(events)]
    root.setLevel(level)
    try:
        run_worker(job, slot.name, todo.get, events.put)
    except (UserError, LLMError) as e:
        events.put(user_failure(slot.name, e))
    except Exception as e:
        log.exception("worker %s failed", slot.name)
        events.put(WorkerFailed(worker=slot.name, message=f"{type(e).__name__}: {e}", user_error=False))
