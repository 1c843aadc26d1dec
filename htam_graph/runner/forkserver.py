"""A fresh process per candidate, cheaply: a fork server beside each referee.

The referee forks the fork server before it touches CUDA, after importing torch and the
harness, so a candidate's process starts from a copy of that clean state: forking costs
milliseconds, bringing CUDA up in the child about 0.3 s, against 4-5 s for a fresh
interpreter. The server keeps one such process ready as a spare (the referee asks for the
next one while a candidate loads, and waits for it to be ready before timing starts, so
its CUDA start never overlaps a timed run).

Every candidate process leads its own process group, dies with the server, and is ended
with SIGKILL (atexit and signal handlers never run); the server adopts and kills any
process a candidate started that outlived it, so nothing of a candidate keeps running
when the next job, or a reference timing, starts. The server itself holds no secrets (the
referee scrubbed the environment before forking it) and no descriptor of the referee's
channel to the parent.

With a `Confinement`, each candidate process confines itself (runner/sandbox.py) right
after its fork, before CUDA comes up and long before the candidate's code is loaded: every
thread it will ever have, CUDA's included, starts inside the walls. Its only writable
folder is a scratch folder of its own, removed when it is ended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from htam_graph.runner import proc, sandbox
from htam_graph.runner.harness import main as harness
from htam_graph.runner.protocol import MAX_REPLY_BYTES, REPLY, Ready

logger = logging.getLogger(__name__)

_MESSAGE_BYTES = 64 * 1024


def _send(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _recv(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(sock, _MESSAGE_BYTES, 4)
    if not data:
        raise EOFError("the fork server closed its channel")
    message: dict[str, Any] = json.loads(data)
    return message, fds


@dataclass
class CandidateProcess:
    """A ready candidate process handed to the referee, and its end of the channel."""

    pid: int
    conn: Connection
    start_seconds: float  # fork -> CUDA ready, inside the child
    wait_seconds: float  # how long the referee waited for it
    start_stages: dict[str, float] = dataclasses.field(default_factory=dict)  # where start_seconds went


# What a candidate process may still see of the environment: the GPU and the libraries.
_ENV_KEPT = {"PATH", "LD_LIBRARY_PATH", "LANG"}
_ENV_KEPT_PREFIXES = ("CUDA_", "NVIDIA_", "LC_")


@dataclass(frozen=True)
class Confinement:
    """How candidate processes are confined: the judge's folders they may read (the build
    cache, read-only) besides the system and Python, and where their scratch folders go."""

    readable: tuple[Path, ...] = ()
    scratch_root: Path | None = None  # None: the system's temporary folder
    # What every candidate process reads (sandbox.candidate_reads), found once by `prepared`
    # in the process that forks them, not again in each (it loads the driver's library).
    reads: tuple[Path, ...] | None = None

    def prepared(self) -> Confinement:
        """This confinement with what its processes read found now."""
        return dataclasses.replace(self, reads=sandbox.candidate_reads(self.readable))

    def policy(self, scratch: Path, extra_write: tuple[Path, ...] = ()) -> sandbox.Policy:
        environment = {k: v for k, v in os.environ.items() if k in _ENV_KEPT or k.startswith(_ENV_KEPT_PREFIXES)}
        policy = sandbox.candidate_policy(scratch, self.readable, environment, self.reads)
        return dataclasses.replace(policy, write=(*policy.write, *extra_write))


class ForkServerError(RuntimeError):
    """The fork server could not provide a candidate process."""


class ForkServer:
    """The referee's handle on its fork server."""

    def __init__(self, pid: int, sock: socket.socket, scratch_root: Path | None = None) -> None:
        self.pid, self.sock, self.scratch_root = pid, sock, scratch_root

    @classmethod
    def start(
        cls, device_index: int, profile_dir: str | None = None, confinement: Confinement | None = None
    ) -> ForkServer:
        """Fork the server now: call before this process initialises CUDA. With
        `profile_dir`, every candidate process writes its cProfile stats there when it
        finishes (bench/bench_runner.py --profile). Without `confinement`, candidate
        processes run unconfined (--no-sandbox)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        scratch_root = None
        if confinement is not None and confinement.scratch_root is None:
            scratch_root = Path(tempfile.mkdtemp(prefix="htam-scratch-"))  # removed by stop()
            scratch_root.chmod(0o711)  # a candidate running as nobody enters its own folder in it
            confinement = dataclasses.replace(confinement, scratch_root=scratch_root)
        if confinement is not None and confinement.reads is None:
            confinement = confinement.prepared()  # here, once: not in every candidate's process
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                _Server(theirs, device_index, profile_dir, confinement).serve()
            except BaseException:
                logger.exception("the fork server failed")
            finally:
                os._exit(0)
        theirs.close()
        logger.info(
            "fork server %d started for cuda:%d (%s)", pid, device_index, "sandboxed" if confinement else "NO SANDBOX"
        )
        return cls(pid, ours, scratch_root)

    def _request(self, message: dict[str, Any], timeout_s: float) -> tuple[dict[str, Any], list[int]]:
        self.sock.settimeout(timeout_s)
        try:
            _send(self.sock, message)
            reply, fds = _recv(self.sock)
        except (TimeoutError, OSError, EOFError) as exc:
            raise ForkServerError(f"fork server {self.pid} did not answer {message['op']!r}: {exc}") from exc
        if "error" in reply:
            raise ForkServerError(reply["error"])
        return reply, fds

    def warm(self, timeout_s: float = 30.0) -> None:
        """Start the next spare now (its CUDA comes up in the background)."""
        self._request({"op": "warm"}, timeout_s)

    def wait_ready(self, timeout_s: float) -> dict[str, float]:
        """Block until the spare's CUDA is up and every ended process is gone, so neither
        starts nor tears down during a timed run; the server's seconds on each."""
        reply = self._request({"op": "ready"}, timeout_s)[0]
        self._orphans(reply)
        return {str(k): float(v) for k, v in reply.get("seconds", {}).items()}

    def take(self, timeout_s: float) -> CandidateProcess:
        began = time.perf_counter()
        reply, fds = self._request({"op": "take"}, timeout_s)
        if len(fds) != 1:
            raise ForkServerError(f"fork server sent {len(fds)} descriptors for a candidate process")
        return CandidateProcess(
            pid=int(reply["pid"]),
            conn=Connection(fds[0]),
            start_seconds=float(reply["start_seconds"]),
            wait_seconds=time.perf_counter() - began,
            start_stages={str(k): float(v) for k, v in reply.get("start_stages", {}).items()},
        )

    def end(self, pid: int, wait: bool = True, timeout_s: float = 30.0) -> str:
        """Kill a candidate process and everything it started; how it ended. Without
        `wait`, the reply comes once SIGKILL is sent (or at once, for a process that is gone
        already): its CUDA context tears down while the next job's untimed stages run, and
        the next `wait_ready` (before the next timed run) reaps it."""
        reply, _ = self._request({"op": "end", "pid": pid, "wait": wait}, timeout_s)
        self._orphans(reply)
        return str(reply["status"])

    @staticmethod
    def _orphans(reply: dict[str, Any]) -> None:
        for pid, count in reply.get("orphans", {}).items():
            logger.warning("candidate process %s left %d process(es) behind; killed", pid, count)

    def stop(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.sock.close()
        if self.scratch_root is not None:
            shutil.rmtree(self.scratch_root, ignore_errors=True)


@dataclass
class _Spare:
    pid: int
    conn: Connection  # the referee's end, handed over by take
    ready: Ready | None = None


class _Server:
    """The loop of the forked server process."""

    def __init__(
        self,
        sock: socket.socket,
        device_index: int,
        profile_dir: str | None = None,
        confinement: Confinement | None = None,
    ) -> None:
        self.sock, self.device_index, self.profile_dir = sock, device_index, profile_dir
        # Nothing here may ask CUDA anything, not even how many devices there are: torch's
        # extension loader does on import (torch.cuda.is_available), which poisons every
        # later fork ("Cannot re-initialize CUDA in forked subprocess"). A confined candidate
        # process imports it after its fork (harness.serve -> use_prebuilt).
        self.confinement = confinement
        self.scratch: dict[int, Path] = {}  # candidate process -> its scratch folder
        self.spare: _Spare | None = None
        self.taken: set[int] = set()  # candidate processes handed to the referee and not ended
        self.ending: set[int] = set()  # killed candidate processes not reaped yet
        proc.die_with_parent()
        proc.adopt_orphans()
        proc.close_fds_except({0, 1, 2, sock.fileno()})

    def serve(self) -> None:
        while True:
            try:
                message, _ = _recv(self.sock)
            except (EOFError, ConnectionError):
                return
            try:
                reply, fds = self.handle(message)
            except ForkServerError as exc:
                reply, fds = {"error": str(exc)}, ()
            _send(self.sock, reply, fds)
            for fd in fds:
                os.close(fd)

    def handle(self, message: dict[str, Any]) -> tuple[dict[str, Any], tuple[int, ...]]:
        op = message["op"]
        if op == "warm":
            if self.spare is None:
                self.spare = self._fork()
            return {"ok": True}, ()
        if op == "ready":
            began = time.perf_counter()
            orphans = self._settle()
            settled = time.perf_counter()
            self._ready()
            seconds = {"ended processes": settled - began, "spare": time.perf_counter() - settled}
            return {"ok": True, "orphans": orphans, "seconds": seconds}, ()
        if op == "take":  # ended processes may still be tearing down: the next "ready" reaps them
            spare, ready = self._ready()
            self.spare = None
            self.taken.add(spare.pid)
            fd = os.dup(spare.conn.fileno())  # sent, then closed here; the referee keeps its copy
            spare.conn.close()
            return {"pid": spare.pid, "start_seconds": ready.start_seconds, "start_stages": ready.start_stages}, (fd,)
        if op == "end":
            pid = int(message["pid"])
            self.taken.discard(pid)
            if message.get("wait", True):
                status = proc.kill_group(pid)
                self._clean(pid)
                return {"status": status, "orphans": self._reap({pid})}, ()
            gone = proc.kill_group(pid, wait=False)
            if gone is None:
                self.ending.add(pid)
            else:
                self._clean(pid)
            return {"status": gone or "killed by SIGKILL"}, ()
        raise ForkServerError(f"unknown fork server request {op!r}")

    def _reap(self, ended: set[int]) -> dict[int, int]:
        """Kill and reap what the ended processes left behind: {pid: how many}, attributed
        to the first (one ended process at a time in practice)."""
        keep = self.taken | self.ending | ({self.spare.pid} if self.spare else set())
        orphans = proc.reap_orphans(keep=keep)
        return {min(ended): orphans} if orphans and ended else {}

    def _settle(self) -> dict[int, int]:
        """Reap the processes ended without waiting, and whatever they started."""
        if not self.ending:
            return {}
        ended, self.ending = self.ending, set()
        for pid in ended:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            self._clean(pid)
        return self._reap(ended)

    def _clean(self, pid: int) -> None:
        """Remove an ended process's scratch folder (what it wrote dies with it)."""
        if (scratch := self.scratch.pop(pid, None)) is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    def _ready(self, timeout_s: float = 120.0) -> tuple[_Spare, Ready]:
        """The spare, forked if needed, once its CUDA is up (a dead spare is replaced once)."""
        for attempt in range(2):
            if self.spare is None:
                self.spare = self._fork()
            spare = self.spare
            if spare.ready is not None:
                return spare, spare.ready
            try:
                if spare.conn.poll(timeout_s):
                    ready = REPLY.validate_json(spare.conn.recv_bytes(MAX_REPLY_BYTES))
                    if isinstance(ready, Ready):
                        spare.ready = ready
                        return spare, ready
            except (EOFError, OSError, ValueError):
                pass
            status = proc.kill_group(spare.pid)
            self._clean(spare.pid)
            logger.warning(
                "spare candidate process %d failed to start (%s); attempt %d", spare.pid, status, attempt + 1
            )
            spare.conn.close()
            self.spare = None
        raise ForkServerError("no candidate process could start (see the referee's log)")

    def _fork(self) -> _Spare:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        scratch = None
        if self.confinement is not None:
            root = self.confinement.scratch_root
            scratch = Path(tempfile.mkdtemp(prefix="htam-candidate-", dir=str(root) if root else None))
        pid = os.fork()
        if pid == 0:
            forked_at = time.perf_counter()
            try:
                ours.close()
                self.sock.close()
                if self.spare is not None:
                    self.spare.conn.close()
                os.setsid()  # its own group: ending it ends what it started too
                proc.die_with_parent()
                fd = theirs.detach()
                proc.close_fds_except({0, 1, 2, fd})
                if self.confinement is not None and scratch is not None:
                    extra = (Path(self.profile_dir),) if self.profile_dir else ()
                    walls = sandbox.confine(self.confinement.policy(scratch, extra))
                    logger.debug("candidate process confined: %s", walls)
                    os.chdir(scratch)
                harness.serve(
                    Connection(fd),
                    self.device_index,
                    self.profile_dir,
                    confined=scratch is not None,
                    forked_at=forked_at,
                )
            except BaseException:
                logger.exception("candidate process failed")
            finally:
                os._exit(0)
        theirs.close()
        if scratch is not None:
            self.scratch[pid] = scratch
        return _Spare(pid=pid, conn=Connection(ours.detach()))
