"""The referee's side of one candidate process, where fresh ones come from, and how a job
ends early (runner/referee/judge.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import torch
from torch.utils._pytree import tree_map

from htam_graph.runner.protocol import Command, RemoteTensor
from htam_graph.vocab import Verdict

R = TypeVar("R")


class Stop(Exception):
    """Ends a job early with a verdict."""

    def __init__(self, verdict: Verdict, errors: str = "") -> None:
        super().__init__(errors)
        self.verdict, self.errors = verdict, errors


class CandidateDied(Exception):
    """The candidate's process closed its channel (it crashed or exited)."""


class CandidateLink(Protocol):
    """The referee's side of one candidate process."""

    pid: int

    def request(
        self, command: Command, expect: type[R], deadline: float, build: Callable[[str], None] | None = None
    ) -> R: ...

    def tensor(self, remote: RemoteTensor) -> torch.Tensor: ...

    def release(self, remotes: list[RemoteTensor]) -> None: ...

    def close(self) -> None: ...


@dataclass
class Taken:
    link: CandidateLink
    start_seconds: float
    wait_seconds: float
    start_stages: dict[str, float] = field(default_factory=dict)


class ProcessSource(Protocol):
    """Where fresh candidate processes come from (the fork server)."""

    def take(self, timeout_s: float) -> Taken: ...

    def warm(self) -> None: ...

    def wait_ready(self, timeout_s: float) -> dict[str, float]:
        """Block until the next process is up and the ended ones are gone; seconds spent on each."""
        ...

    def end(self, link: CandidateLink, wait: bool) -> str:
        """End the candidate's process; with `wait`, once it is gone (for its exit status)."""
        ...


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def host_copies(value: Any) -> Any:
    """`value` with every tensor inside it copied to the host: commands are pickled, and a
    pickled CUDA tensor would travel as an IPC handle to the referee's own memory."""
    return tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, value)
