"""One judge at a time per GPU, across every process of this machine.

Timings are only comparable when nothing else runs on the GPU while a candidate or a
reference is timed. Each referee holds its GPU's lock for a whole job (the reference's
timings, the candidate's process, correctness and timing) and while it starts: two bench
workers sharing a GPU, or an `htam optimize` started beside a bench, take turns on it, and
what they do between jobs (generating the next candidate, building it with nvcc) overlaps
the other's job.

The lock is a `filelock.FileLock` (an advisory `flock`) on a file named after the physical
GPU as CUDA_VISIBLE_DEVICES names it (an index or a UUID; the same GPU named both ways by
two processes is not recognised as one). It is held by an open file: a process that dies
releases it.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from pathlib import Path

from filelock import FileLock, Timeout

logger = logging.getLogger(__name__)

LOCK_DIR_ENV = "HTAM_GPU_LOCK_DIR"


def physical_gpu(index: int) -> str:
    """The GPU that device `index` of this process is, as CUDA_VISIBLE_DEVICES names it."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return str(index)
    names = [n.strip() for n in visible.split(",") if n.strip()]
    return names[index] if index < len(names) else str(index)


def lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "htam-gpu-locks")


class GpuLock:
    """A reentrant (within its owner), inter-process lock on one GPU."""

    def __init__(self, gpu: str) -> None:
        self.gpu = gpu
        self.path = lock_dir() / f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', gpu)}.lock"
        # Shared by the threads of its owner (a referee takes it in one thread and may free it
        # in another); the file is usable by every user of the machine.
        self._lock = FileLock(self.path, mode=0o666, thread_local=False)

    @classmethod
    def of_device(cls, index: int) -> GpuLock:
        return cls(physical_gpu(index))

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def acquire(self) -> None:
        if self._lock.is_locked:  # held already: one level deeper
            self._lock.acquire()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(blocking=False)
        except Timeout:
            began = time.monotonic()
            logger.info("GPU %s is judging another job; waiting for it (%s)", self.gpu, self.path)
            self._lock.acquire()
            logger.info("GPU %s free after %.1f s", self.gpu, time.monotonic() - began)

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release()

    def release_all(self) -> None:
        self._lock.release(force=True)

    def __enter__(self) -> GpuLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
