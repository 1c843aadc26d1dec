"""The fork server on the CPU: spares start and hand over their channel, a taken process is
replaced, ending one kills what it started too. The candidate's side is replaced by a small
echo loop here (the real one brings CUDA up first)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from multiprocessing.connection import Connection

import pytest

from htam_graph.runner import forkserver
from htam_graph.runner.harness import main as harness
from htam_graph.runner.protocol import Ready

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, prctl and /proc are Linux's")


def _echo(
    conn: Connection,
    device_index: int,
    profile_dir: str | None = None,
    confined: bool = False,
    forked_at: float | None = None,
) -> None:
    conn.send_bytes(Ready(pid=os.getpid(), start_seconds=0.01).model_dump_json().encode())
    while True:
        message = conn.recv()
        if message == "leave a process behind" and os.fork() == 0:
            os.setsid()
            time.sleep(60)
            os._exit(0)
        conn.send_bytes(f"{message} from {os.getpid()}".encode())


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(harness, "serve", _echo)  # the fork copies this process, patch included
    started = forkserver.ForkServer.start(device_index=0)
    yield started
    started.stop()


def test_spares_are_taken_and_replaced_and_ended(server, caplog):
    server.warm()
    server.wait_ready(timeout_s=30)
    first = server.take(timeout_s=30)
    first.conn.send("hello")
    assert first.conn.recv_bytes() == f"hello from {first.pid}".encode()
    assert first.start_seconds == pytest.approx(0.01)
    server.warm()
    first.conn.send("leave a process behind")
    first.conn.recv_bytes()
    time.sleep(0.2)
    with caplog.at_level("WARNING"):
        assert server.end(first.pid) == "killed by SIGKILL"
    assert "left 1 process(es) behind; killed" in caplog.text
    second = server.take(timeout_s=30)
    assert second.pid != first.pid
    second.conn.send("again")
    assert second.conn.recv_bytes() == f"again from {second.pid}".encode()
    assert server.end(second.pid) == "killed by SIGKILL"


def test_an_ended_process_is_reaped_by_the_next_wait_for_a_spare(server, caplog):
    """end(wait=False) answers once SIGKILL is sent; the next wait_ready reaps the process
    and what it left behind, before any timed run could start."""
    server.warm()
    taken = server.take(timeout_s=30)
    taken.conn.send("leave a process behind")
    taken.conn.recv_bytes()
    time.sleep(0.2)
    assert server.end(taken.pid, wait=False) == "killed by SIGKILL"
    server.warm()
    current = server.take(timeout_s=30)  # the next candidate, being judged while the last one dies
    server.warm()
    with caplog.at_level("WARNING"):
        server.wait_ready(timeout_s=30)
    assert f"candidate process {taken.pid} left 1 process(es) behind; killed" in caplog.text
    assert not os.path.exists(f"/proc/{taken.pid}")  # reaped: not even a zombie
    current.conn.send("still here")  # reaping the ended one left the current one alone
    assert current.conn.recv_bytes() == f"still here from {current.pid}".encode()
    assert server.end(current.pid) == "killed by SIGKILL"


def test_the_sandboxed_server_asks_cuda_nothing(tmp_path):
    """A fork server that asked CUDA even for its device count (torch's extension loader
    does on import) poisons every fork after it: its candidate processes could not bring
    CUDA up (seen on an H100, 2026-12-05). In a process of its own, since the server
    closes descriptors and becomes a subreaper."""
    script = f"""
import socket, sys, torch
asked = []
torch.cuda.is_available = lambda: asked.append("is_available") or False
torch._C._cuda_getDeviceCount = lambda: asked.append("getDeviceCount") or 0
from htam_graph.runner import forkserver
ours, theirs = socket.socketpair()
forkserver._Server(theirs, 0, None, forkserver.Confinement(scratch_root=__import__("pathlib").Path({str(tmp_path)!r})))
print(asked, torch.cuda.is_initialized())
sys.exit(1 if asked or torch.cuda.is_initialized() else 0)
"""
    env = {**os.environ, "CUDA_HOME": str(tmp_path)}  # as where nvcc is found: the loader then asks CUDA
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
