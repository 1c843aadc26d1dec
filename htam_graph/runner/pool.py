"""Persistent GPU worker processes, one per GPU, each replaced when it hangs or dies.

Workers are spawned (never forked: CUDA does not survive a fork) and keep torch and their
CUDA context across jobs, paying the ~5 s start once. A job that runs past its timeout
gets its worker killed; a worker that exits after a CUDA error or a cheat is replaced by
a spare started ahead, so a failing candidate costs the next one no start-up wait.
"""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.connection import Connection
from typing import Any

from htam_graph.errors import UserError
from htam_graph.runner.jobs import Job, WorkerInfo, WorkerReply
from htam_graph.runner.worker import worker_main

_STOP_GRACE_S = 10.0


class WorkerGone(Exception):
    """The worker did not answer: it timed out (and was killed) or it died."""

    def __init__(self, timed_out: bool, detail: str) -> None:
        super().__init__(detail)
        self.timed_out, self.detail = timed_out, detail


class _Process:
    """One spawned worker process and its end of the pipe."""

    def __init__(self, ctx: Any, device_index: int) -> None:
        parent, child = ctx.Pipe()
        self.device_index = device_index
        self.proc = ctx.Process(
            target=worker_main, args=(child, device_index), name=f"htam-gpu{device_index}", daemon=True
        )
        self.proc.start()
        child.close()
        self.conn: Connection = parent
        self.info: WorkerInfo | None = None

    def ready(self, timeout_s: float) -> WorkerInfo:
        """Wait for the hello (torch imported, CUDA up)."""
        if self.info is None:
            try:
                self.info = self.conn.recv() if self.conn.poll(timeout_s) else None
            except (EOFError, OSError):
                self.info = None
            if self.info is None:
                code = self.proc.exitcode
                self.kill()
                raise UserError(
                    f"GPU worker for cuda:{self.device_index} did not start "
                    f"({'exit code ' + str(code) if code is not None else 'no answer'}); "
                    "check that torch sees the GPU (python -c 'import torch; print(torch.cuda.is_available())')"
                )
        return self.info

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(_STOP_GRACE_S)
        self.conn.close()

    def stop(self) -> None:
        """Ask the process to exit; kill it if it does not."""
        try:
            self.conn.send(None)
            self.proc.join(_STOP_GRACE_S)
        except (OSError, BrokenPipeError):
            pass
        self.kill()


class Worker:
    """The worker process of one GPU, with a started spare that replaces it at once."""

    def __init__(self, device_index: int, startup_timeout_s: float, spare: bool = True) -> None:
        self.device_index = device_index
        self.startup_timeout_s = startup_timeout_s
        self._ctx = mp.get_context("spawn")
        self._current = _Process(self._ctx, device_index)
        self._spare = _Process(self._ctx, device_index) if spare else None

    def info(self) -> WorkerInfo:
        return self._current.ready(self.startup_timeout_s)

    def run(self, job: Job, timeout_s: float) -> WorkerReply:
        """Send one job and wait for its reply; raises WorkerGone after replacing the worker."""
        self.info()
        conn, proc = self._current.conn, self._current.proc
        try:
            conn.send(job)
            if not conn.poll(timeout_s):
                self.restart()
                raise WorkerGone(True, f"no result within {timeout_s:.0f} s; the worker was killed")
            reply: WorkerReply = conn.recv()
        except (EOFError, OSError) as exc:
            proc.join(_STOP_GRACE_S)
            code = proc.exitcode
            self.restart()
            raise WorkerGone(False, f"the worker process died (exit code {code})") from exc
        if reply.restart:
            proc.join(_STOP_GRACE_S)
            self.restart()
        return reply

    def restart(self) -> None:
        self._current.kill()
        if self._spare is None:
            self._current = _Process(self._ctx, self.device_index)
        else:
            self._current, self._spare = self._spare, _Process(self._ctx, self.device_index)

    def stop(self) -> None:
        for process in (self._current, self._spare):
            if process is not None:
                process.stop()


def visible_gpu_count() -> int:
    """How many GPUs torch sees; none is a user error, not a worker that never starts."""
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        raise UserError(
            "no CUDA GPU is visible (torch.cuda.device_count() is 0): candidates run on a GPU; "
            "run this on a GPU machine (static checks and nvcc builds are tested without one by pytest)"
        )
    return count
