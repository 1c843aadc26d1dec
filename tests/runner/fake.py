"""An in-process, CPU stand-in for a candidate's process, so the referee's pipeline
(runner/referee/judge.py) runs in CI without a GPU.

It answers the real protocol's commands with the real reply models. A "candidate" here is
a Python class built like ModelNew; its "kernels" use numpy, which the op recorder does not
see, the way a native candidate's launches are invisible to it. Remote tensors are named by
a registry key, and `tensor()` returns a view of the very memory, as CUDA IPC does.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, TypeVar

import numpy as np
import torch

from htam_graph.runner.harness.probes import OpRecorder, flatten_outputs
from htam_graph.runner.ipc import dtype_name
from htam_graph.runner.models import Timing
from htam_graph.runner.protocol import (
    Alloc,
    Allocated,
    Call,
    Called,
    Command,
    Finish,
    Finished,
    Foreign,
    Free,
    Freed,
    Health,
    Load,
    Loaded,
    NamedTensor,
    Output,
    PlainArg,
    RemoteTensor,
    Trial,
    TrialDone,
    Warmed,
    Warmup,
)
from htam_graph.runner.referee.candidate import CandidateLink, Taken
from htam_graph.runner.referee.reference import Reference, References

R = TypeVar("R")


def numpy_kernel(fn: Any, *tensors: torch.Tensor) -> torch.Tensor:
    """A "kernel": computes outside torch's dispatcher, into fresh memory."""
    return torch.from_numpy(np.ascontiguousarray(fn(*(t.numpy() for t in tensors))))


class FakeLink:
    """Interprets the protocol for one candidate class, on the CPU."""

    def __init__(self, model_class: type, trial_ms: float | None = None) -> None:
        self.pid = 0
        self.model_class, self.trial_ms = model_class, trial_ms
        self.model: Any = None
        self.registry: dict[str, torch.Tensor] = {}
        self.sets: dict[str, list[Any]] = {}
        self.held: dict[int, list[Any]] = {}
        self.timed: deque[Any] = deque()
        self.closed = False

    def export(self, tensor: torch.Tensor) -> RemoteTensor:
        base = tensor.untyped_storage().data_ptr()
        handle = f"{len(self.registry) + 1:0128x}"
        self.registry[handle] = tensor
        return RemoteTensor(
            handle=handle,
            base=base,
            offset=tensor.data_ptr() - base,
            shape=list(tensor.shape),
            stride=list(tensor.stride()),
            dtype=dtype_name(tensor.dtype),
        )

    def outputs(self, outs: list[Any]) -> list[Output]:
        return [self.export(o) if type(o) is torch.Tensor else Foreign(type_name=type(o).__name__) for o in outs]

    def request(self, command: Command, expect: type[R], deadline: float, build: Any = None) -> R:
        reply = self.answer(command)
        if not isinstance(reply, expect):
            raise AssertionError(f"{type(reply).__name__} for {command.kind}")
        return reply

    def answer(self, command: Command) -> Any:
        match command:
            case Load():
                torch.manual_seed(command.seed)
                self.model = self.model_class(*command.init_args)
                weights = [NamedTensor(name=k, tensor=self.export(v)) for k, v in self.model.state_dict().items()]
                return Loaded(weights=weights, health=Health())
            case Alloc():
                args = [
                    spec.value
                    if isinstance(spec, PlainArg)
                    else torch.empty(spec.shape, dtype=getattr(torch, spec.dtype))
                    for spec in command.args
                ]
                self.sets[command.key] = args
                return Allocated(tensors=[self.export(a) if isinstance(a, torch.Tensor) else None for a in args])
            case Free():
                for key in command.keys:
                    self.sets.pop(key, None)
                for call in command.calls:
                    self.held.pop(call, None)
                return Freed()
            case Call():
                recorder = OpRecorder()
                if command.record_ops:
                    with recorder:
                        outs = flatten_outputs(self.model(*self.sets[command.key]))
                else:
                    outs = flatten_outputs(self.model(*self.sets[command.key]))
                self.held[command.call] = outs
                return Called(outputs=self.outputs(outs), ops=recorder.disallowed(), health=Health())
            case Warmup():
                self.timed = deque(maxlen=len(command.keys))
                for i in range(command.warmup):
                    self.timed.append(self.model(*self.sets[command.keys[i % len(command.keys)]]))
                return Warmed(host_ms=0.01, per_run_ms=self.trial_ms or 1.0, latency_ms=0.0, health=Health())
            case Trial():
                began = time.perf_counter()
                outs = flatten_outputs(self.model(*self.sets[command.key]))
                measured = (time.perf_counter() - began) * 1e3
                self.timed.append(outs)
                ms = measured if self.trial_ms is None else self.trial_ms
                return TrialDone(index=command.index, ms=ms, synced_ms=ms, host_ms=0.01, outputs=self.outputs(outs))
            case Finish():
                return Finished(health=Health())
        raise AssertionError(command)

    def tensor(self, remote: RemoteTensor) -> torch.Tensor:
        assert remote.handle is not None
        source = self.registry[remote.handle]
        return source.as_strided(remote.shape, remote.stride)

    def release(self, remotes: list[RemoteTensor]) -> None:
        pass  # CPU memory: nothing is mapped

    def close(self) -> None:
        self.closed = True


class FakeProcesses:
    """Hands out one FakeLink per job; `trial_ms` is the time each trial reports (None: the
    time the call really took, as honest events would)."""

    def __init__(self, model_class: type, trial_ms: float | None = None) -> None:
        self.model_class, self.trial_ms = model_class, trial_ms
        self.links: list[FakeLink] = []

    def take(self, timeout_s: float) -> Taken:
        self.links.append(FakeLink(self.model_class, self.trial_ms))
        return Taken(self.links[-1], 0.0, 0.0)

    def warm(self) -> None:
        pass

    def wait_ready(self, timeout_s: float) -> dict[str, float]:
        return {}

    def end(self, link: CandidateLink, wait: bool) -> str:
        return "exit code 0"


class CpuReferences(References):
    """References on the CPU, with a fixed eager timing (CPU tests time nothing)."""

    def __init__(self, eager_ms: float = 2.0) -> None:
        super().__init__(torch.device("cpu"), None)
        self.eager_ms = eager_ms

    def timings(self, reference: Reference, config: Any, gate: Any) -> tuple[Timing, Timing | None]:
        t = self.eager_ms
        return Timing(median_ms=t, mean_ms=t, min_ms=t, max_ms=t, trials=1, host_median_ms=0.01), None
