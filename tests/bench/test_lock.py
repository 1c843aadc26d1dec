"""The bench folder's and each stream's lock (bench/plan.py exclusive, on filelock): a
second holder is refused or waits, and the lock is free once released."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from htam_graph.bench.plan import exclusive
from htam_graph.errors import BadInput


def test_a_held_folder_refuses_a_second_bench_and_frees_on_release(tmp_path: Path) -> None:
    lock = tmp_path / "out" / ".lock"
    second = exclusive(lock, "--out out", wait=False)
    with exclusive(lock, "--out out", wait=False), pytest.raises(BadInput, match="in use by another htam bench"):
        second.__enter__()
    with exclusive(lock, "--out out", wait=False):  # free again
        pass


def test_a_waiting_stream_runs_once_the_holder_is_done(tmp_path: Path) -> None:
    lock = tmp_path / ".s0.lock"
    entered = threading.Event()
    released_at: list[float] = []

    def hold() -> None:
        with exclusive(lock, "stream s0", wait=True):
            entered.set()
            time.sleep(0.5)
            released_at.append(time.monotonic())

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(10)
    with exclusive(lock, "stream s0", wait=True):
        got_it = time.monotonic()
    holder.join()
    assert released_at and got_it >= released_at[0]
