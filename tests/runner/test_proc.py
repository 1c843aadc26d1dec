"""Process hygiene: an orphan a candidate leaves behind is adopted and killed (Linux)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux's")

SCRIPT = textwrap.dedent(
    """
    import os, time
    from htam_graph.runner import proc

    proc.adopt_orphans()
    pid = os.fork()
    if pid == 0:  # the "candidate", in its own group: starts a process that leaves the group
        os.setsid()
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
            os._exit(0)
        time.sleep(60)
        os._exit(0)
    time.sleep(0.2)
    print("status", proc.kill_group(pid))
    time.sleep(0.2)
    print("orphans", proc.reap_orphans(keep=set()))
    print("left", len(proc.child_pids()))
    """
)


def test_a_grandchild_that_escaped_its_group_is_adopted_and_killed():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["status"] == "killed by SIGKILL"
    assert lines["orphans"] == "1" and lines["left"] == "0"
