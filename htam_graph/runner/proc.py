"""Process hygiene for the judge's processes (Linux; each helper degrades to a logged no-op
elsewhere): who dies with whom, who inherits orphans, which descriptors a child keeps."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import time
from typing import overload

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int, what: str) -> None:
    if not sys.platform.startswith("linux"):
        logger.warning("cannot %s: prctl is Linux-only", what)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        logger.warning("cannot %s: prctl failed with errno %d", what, ctypes.get_errno())


def die_with_parent() -> None:
    """SIGKILL this process when the thread that forked it exits."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, "tie this process to its parent")


def adopt_orphans() -> None:
    """Become the parent of descendants whose own parent exits (so none escapes cleanup)."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1, "become a child subreaper")


def refuse_inspection() -> None:
    """Not dumpable: other processes of the same user (not root) cannot ptrace this one or
    read its memory through /proc."""
    _prctl(_PR_SET_DUMPABLE, 0, "make this process non-dumpable")


def close_fds_except(keep: set[int]) -> None:
    """Close every descriptor but `keep`: a forked child inherits all of its parent's."""
    low = 0
    for fd in sorted(keep):
        if low < fd:  # closerange(n, n) closes every descriptor on Linux (close_range(n, n - 1))
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)


def child_pids() -> set[int]:
    """Live (or unreaped) child processes of this process (Linux /proc; empty elsewhere)."""
    found: set[int] = set()
    task_dir = f"/proc/{os.getpid()}/task"
    if not os.path.isdir(task_dir):
        return found
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/children") as handle:
                found.update(int(pid) for pid in handle.read().split())
        except OSError:
            continue
    return found


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


@overload
def kill_group(pid: int) -> str: ...
@overload
def kill_group(pid: int, wait: bool) -> str | None: ...
def kill_group(pid: int, wait: bool = True) -> str | None:
    """SIGKILL the process group led by child `pid` and reap the child; its exit status.
    Without `wait`, only a child that has exited already is reaped (None otherwise: the
    caller reaps it later)."""
    for target, kill in ((pid, os.killpg), (pid, os.kill)):
        try:
            kill(target, signal.SIGKILL)
            break
        except (ProcessLookupError, PermissionError):
            continue
    try:
        reaped, status = os.waitpid(pid, 0 if wait else os.WNOHANG)
    except ChildProcessError:
        return "already reaped"
    return describe_status(status) if reaped else None


def reap_orphans(keep: set[int], rounds: int = 20) -> int:
    """Kill and reap every child but `keep` (orphans adopted as subreaper), until none is
    left; returns how many there were."""
    killed = 0
    for _ in range(rounds):
        strays = child_pids() - keep
        if not strays:
            break
        for pid in strays:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            killed += 1
        time.sleep(0.01)  # let their own children be re-parented to us
    return killed
