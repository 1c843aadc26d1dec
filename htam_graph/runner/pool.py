"""The parent's side of the judge: one referee process per GPU, replaced when it dies or
stops answering (logged). A referee is spawned, never forked: the parent may hold threads,
open connections and secrets that must not be copied into it. A referee holds its GPU's
lock (runner/gpulock.py) while it starts and for each job, so referees of other processes
on the same GPU take turns with it."""

from __future__ import annotations

import logging
import multiprocessing as mp
from multiprocessing.connection import Connection
from typing import Any

from htam_graph.errors import ConfigError
from htam_graph.runner.gpulock import GpuLock
from htam_graph.runner.jobs import Job, JobReply, RefereeInfo
from htam_graph.runner.models import EvalResult
from htam_graph.runner.worker import referee_main

logger = logging.getLogger(__name__)

_STOP_GRACE_S = 10.0


class RefereeGone(Exception):
    """The referee did not answer: it timed out (and was killed) or it died."""

    def __init__(self, timed_out: bool, detail: str) -> None:
        super().__init__(detail)
        self.timed_out, self.detail = timed_out, detail


class Referee:
    """The referee process of one GPU."""

    def __init__(self, device_index: int, startup_timeout_s: float, sandbox_readable: list[str] | None = None) -> None:
        """`sandbox_readable`: folders a confined candidate may read; None runs candidates unconfined."""
        self.device_index, self.startup_timeout_s = device_index, startup_timeout_s
        self.sandbox_readable = sandbox_readable
        self._ctx: Any = mp.get_context("spawn")
        self._info: RefereeInfo | None = None
        self.lock = GpuLock.of_device(device_index)
        self._starting = False  # the lock is held for the start until the hello
        self._start()

    def _start(self) -> None:
        if not self._starting:
            self.lock.acquire()  # its CUDA start must not overlap another referee's timed runs
            self._starting = True
        parent, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(
            target=referee_main,
            args=(child, self.device_index, self.sandbox_readable),
            name=f"htam-referee-gpu{self.device_index}",
            daemon=True,
        )
        self.proc.start()
        child.close()
        self.conn: Connection = parent
        self._info = None

    def info(self) -> RefereeInfo:
        """Wait for the hello (torch imported, CUDA up)."""
        if self._info is None:
            hello = None
            try:
                if self.conn.poll(self.startup_timeout_s):
                    hello = self.conn.recv()
            except (EOFError, OSError):
                hello = None
            finally:
                if self._starting:
                    self._starting = False
                    self.lock.release()
            if not isinstance(hello, RefereeInfo):
                code = self.proc.exitcode
                self._kill()
                raise ConfigError(
                    f"the GPU referee for cuda:{self.device_index} did not start "
                    f"({'exit code ' + str(code) if code is not None else 'no answer'}); "
                    "check that torch sees the GPU (python -c 'import torch; print(torch.cuda.is_available())')",
                    value=self.device_index,
                )
            self._info = hello
            logger.info("referee %d ready on cuda:%d (%s)", hello.pid, self.device_index, hello.device)
        return self._info

    def run(self, job: Job, timeout_s: float) -> EvalResult:
        """Send one job and wait for its result; raises RefereeGone after replacing the referee."""
        with self.lock:
            self.info()
            return self._run(job, timeout_s)

    def _run(self, job: Job, timeout_s: float) -> EvalResult:
        try:
            self.conn.send(job)
            if not self.conn.poll(timeout_s):
                logger.warning(
                    "referee on cuda:%d gave no result within %.0f s; restarting it", self.device_index, timeout_s
                )
                self.restart()
                raise RefereeGone(True, f"no result within {timeout_s:.0f} s; the judge was restarted")
            reply: JobReply = self.conn.recv()
        except (EOFError, OSError) as exc:
            self.proc.join(_STOP_GRACE_S)
            code = self.proc.exitcode
            logger.warning("referee on cuda:%d died (exit code %s); restarting it", self.device_index, code)
            self.restart()
            raise RefereeGone(False, f"the judge's process died (exit code {code})") from exc
        if reply.restart:
            logger.warning(
                "referee on cuda:%d asked to be replaced after %s; restarting it", self.device_index, job.task.id
            )
            self.proc.join(_STOP_GRACE_S)
            self.restart()
        return reply.result

    def restart(self) -> None:
        self._kill()
        self._start()

    def _kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(_STOP_GRACE_S)
        self.conn.close()

    def stop(self) -> None:
        """Ask the referee to exit; kill it if it does not."""
        try:
            self.conn.send(None)
            self.proc.join(_STOP_GRACE_S)
        except OSError:
            pass
        self._kill()
        self._starting = False
        self.lock.release_all()


def visible_gpu_count() -> int:
    """How many GPUs torch sees; none is a user error, not a referee that never starts."""
    # torch only when a GPU is needed: importing this module stays cheap for the CLI.
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        raise ConfigError(
            "no CUDA GPU is visible (torch.cuda.device_count() is 0): candidates run on a GPU; "
            "run this on a GPU machine (`htam eval --no-run` checks and builds without one)"
        )
    return count
