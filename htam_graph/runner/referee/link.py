"""The referee's side of candidate processes: the channel to one, and the fork server
that provides them (the real implementations of candidate.CandidateLink and ProcessSource)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import torch
from pydantic import ValidationError

from htam_graph.runner.forkserver import CandidateProcess, ForkServer
from htam_graph.runner.ipc import ProtocolViolation, RemoteMemory
from htam_graph.runner.protocol import (
    MAX_REPLY_BYTES,
    REPLY,
    Built,
    Command,
    Failed,
    NeedsBuild,
    RemoteTensor,
)
from htam_graph.runner.referee.candidate import CandidateDied, CandidateLink, Stop, Taken
from htam_graph.vocab import Verdict

logger = logging.getLogger(__name__)

R = TypeVar("R")

MAX_BUILDS = 16  # sources one candidate may have the referee build while it loads
# The verdicts a candidate's process may report for itself; anything else is a lie.
_OWN_FAILURES = {Verdict.COMPILE_ERROR, Verdict.LOAD_ERROR, Verdict.RUNTIME_ERROR}


class ProcessLink:
    """Commands out (pickled), replies in (JSON, validated), memory mapped through IPC."""

    def __init__(self, process: CandidateProcess, device: torch.device) -> None:
        self.pid = process.pid
        self.conn = process.conn
        self.memory = RemoteMemory(device)

    def request(
        self, command: Command, expect: type[R], deadline: float, build: Callable[[str], None] | None = None
    ) -> R:
        """Send `command`, return its reply. With `build` (a sandboxed candidate's process
        runs no nvcc), a NeedsBuild reply is answered by building its source and sending
        Built, MAX_BUILDS times at most per command."""
        self._send(command)
        builds = MAX_BUILDS
        while True:
            reply = self._reply(command, expect, deadline)
            if not isinstance(reply, NeedsBuild):
                return reply
            if build is None or builds == 0:
                raise ProtocolViolation(f"a build request in reply to '{command.kind}'")
            builds -= 1
            build(reply.source)
            self._send(Built())

    def _send(self, command: Command) -> None:
        try:
            self.conn.send(command)
        except OSError as exc:
            raise CandidateDied(str(exc)) from exc

    def _reply(self, command: Command, expect: type[R], deadline: float) -> R | NeedsBuild:
        remaining = deadline - time.monotonic()
        try:
            answered = remaining > 0 and self.conn.poll(remaining)
        except OSError as exc:
            raise CandidateDied(str(exc)) from exc
        if not answered:
            raise Stop(Verdict.TIMEOUT, f"no answer to '{command.kind}' within the job's time budget")
        try:
            data = self.conn.recv_bytes(MAX_REPLY_BYTES)
        except EOFError as exc:
            raise CandidateDied(command.kind) from exc
        except OSError as exc:  # longer than MAX_REPLY_BYTES
            raise ProtocolViolation(f"a reply to '{command.kind}' of more than {MAX_REPLY_BYTES} bytes") from exc
        try:
            reply = REPLY.validate_json(data)
        except ValidationError as exc:
            raise ProtocolViolation(f"an invalid reply to '{command.kind}': {exc.errors()[0]['msg']}") from exc
        if isinstance(reply, Failed):
            if reply.verdict not in _OWN_FAILURES:
                raise ProtocolViolation(f"a reply claiming the verdict {reply.verdict.value}")
            raise Stop(reply.verdict, reply.errors)
        if not isinstance(reply, expect | NeedsBuild):
            raise ProtocolViolation(f"a '{reply.kind}' reply to '{command.kind}'")
        return reply

    def tensor(self, remote: RemoteTensor) -> torch.Tensor:
        return self.memory.tensor(remote)

    def release(self, remotes: list[RemoteTensor]) -> None:
        self.memory.release(remotes)

    def close(self) -> None:
        self.memory.close()
        self.conn.close()


class ForkedProcesses:
    """Candidate processes from this referee's fork server."""

    def __init__(self, server: ForkServer, device: torch.device) -> None:
        self.server, self.device = server, device

    def take(self, timeout_s: float) -> Taken:
        process = self.server.take(timeout_s)
        logger.debug(
            "candidate process %d (start %.3f s, waited %.3f s)",
            process.pid,
            process.start_seconds,
            process.wait_seconds,
        )
        return Taken(
            ProcessLink(process, self.device), process.start_seconds, process.wait_seconds, process.start_stages
        )

    def warm(self) -> None:
        self.server.warm()

    def wait_ready(self, timeout_s: float) -> dict[str, float]:
        return self.server.wait_ready(timeout_s)

    def end(self, link: CandidateLink, wait: bool) -> str:
        return self.server.end(link.pid, wait)


__all__ = ["ForkedProcesses", "ProcessLink"]
