"""The per-GPU lock that makes referees of different processes take turns on a GPU."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import pytest

from htam_graph.runner.gpulock import LOCK_DIR_ENV, GpuLock, physical_gpu


@pytest.fixture(autouse=True)
def _lock_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))


def _hold(gpu: str, lock_dir: str, held: mp.synchronize.Event, seconds: float) -> None:
    os.environ[LOCK_DIR_ENV] = lock_dir
    with GpuLock(gpu):
        held.set()
        time.sleep(seconds)


def _try_now(lock: GpuLock) -> bool:
    """Whether another owner could take the lock's file right now."""
    import fcntl

    fd = os.open(lock.path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_the_gpu_is_named_as_cuda_visible_devices_names_it(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert physical_gpu(1) == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert physical_gpu(0) == "3" and physical_gpu(1) == "5"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f2e/x")
    assert GpuLock.of_device(0).path.name == "gpu-GPU-8f2e_x.lock"


def test_the_lock_is_reentrant_within_its_owner_and_freed_at_the_last_release():
    lock = GpuLock("0")
    with lock:
        with lock:
            assert lock.held and not _try_now(lock)
        assert lock.held and not _try_now(lock)
    assert not lock.held and _try_now(lock)


def test_release_all_frees_a_lock_held_several_times():
    lock = GpuLock("0")
    lock.acquire()
    lock.acquire()
    lock.release_all()
    assert not lock.held and _try_now(lock)


def test_another_process_waits_until_the_holder_releases(tmp_path):
    ctx = mp.get_context("spawn")
    held = ctx.Event()
    holder = ctx.Process(target=_hold, args=("0", os.environ[LOCK_DIR_ENV], held, 1.5))
    holder.start()
    try:
        assert held.wait(60)
        began = time.monotonic()
        with GpuLock("0"):
            waited = time.monotonic() - began
        assert waited > 0.5, waited  # it waited for the holder, which held it 1.5 s
        with GpuLock("1"):  # another GPU is not held up
            pass
    finally:
        holder.join(30)


def test_a_holder_that_dies_releases_the_lock():
    ctx = mp.get_context("spawn")
    held = ctx.Event()
    holder = ctx.Process(target=_hold, args=("0", os.environ[LOCK_DIR_ENV], held, 60.0))
    holder.start()
    assert held.wait(60)
    lock = GpuLock("0")
    assert not _try_now(lock)
    assert holder.pid is not None
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(30)
    with lock:
        assert lock.held
