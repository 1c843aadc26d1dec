"""The candidate's process: loads one candidate and runs it as the referee asks.

One process per candidate, forked from the fork server (runner/forkserver.py) and killed
after the job, so nothing a candidate does reaches the next one. The referee sends
commands (runner/protocol.py); this process allocates the buffers the referee fills,
calls forward, times its own trials, and names its outputs by CUDA IPC handle. It decides
nothing: comparisons, reference timings and verdicts happen in the referee.
"""

from __future__ import annotations

import cProfile
import hashlib
import logging
import math
import os
import sys
import time
import traceback
import types
from collections import deque
from collections.abc import Callable
from functools import partial
from multiprocessing.connection import Connection
from typing import Any

import torch
from pydantic import BaseModel

from htam_graph.runner import compare, ipc, protocol, timing
from htam_graph.runner.build import condense_errors, forbid_builds, remember_nvcc_version
from htam_graph.runner.builder import use_prebuilt
from htam_graph.runner.harness import probes
from htam_graph.runner.native import JUDGE_BUILD, CudaBuildError, CudaDriverError
from htam_graph.runner.protocol import (
    MAX_BUILD_SOURCE,
    Alloc,
    Allocated,
    Built,
    Call,
    Called,
    Command,
    Failed,
    Finish,
    Finished,
    Foreign,
    Free,
    Freed,
    Health,
    Load,
    Loaded,
    NamedTensor,
    NeedsBuild,
    Output,
    Ready,
    Trial,
    TrialDone,
    Warmed,
    Warmup,
)
from htam_graph.tasks import exec_source
from htam_graph.vocab import Verdict

logger = logging.getLogger(__name__)

MAX_ERROR_LINES = 20
MAX_ERROR_CHARS = 2000


class _Fail(Exception):
    def __init__(self, verdict: Verdict, errors: str, cuda_error: bool = False) -> None:
        super().__init__(errors)
        self.reply = Failed(verdict=verdict, errors=errors[:4000], cuda_error=cuda_error)


def condense_exception(exc: BaseException, filename: str | None) -> str:
    """The exception and the candidate's own frames, capped for an LLM."""
    lines = [f"{type(exc).__name__}: {exc}".strip()]
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if filename and f.filename == filename] or frames[-1:]
    for frame in own[-3:]:
        where = "candidate" if frame.filename == filename else os.path.basename(frame.filename)
        lines.append(f"  at {where} line {frame.lineno}, in {frame.name}: {(frame.line or '').strip()}")
    text = "\n".join("\n".join(lines).splitlines()[:MAX_ERROR_LINES])
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 4] + "\n..."


def _is_cuda_error(exc: BaseException) -> bool:
    return isinstance(exc, CudaDriverError) or "CUDA error" in str(exc) or type(exc).__name__ == "AcceleratorError"


def serve(
    conn: Connection,
    device_index: int,
    profile_dir: str | None = None,
    confined: bool = False,
    forked_at: float | None = None,
) -> None:
    """Entry point of a fresh candidate process: bring CUDA up, say so, then obey. With
    `profile_dir` (bench_runner.py --profile), under cProfile from the start (so the
    integrity baseline includes the profiler), its stats written there on Finish.
    `confined`: the fork server sandboxed this process, which can start no compiler: CUDA
    sources load from the cache (built before), load_inline from the builder's folder.
    `forked_at`: when the fork server forked it (perf_counter), so that its start counts
    the walls put up before this call too."""
    entered = time.perf_counter()
    started = entered if forked_at is None else forked_at
    if confined:
        use_prebuilt()
    prebuilt = time.perf_counter()
    profiler = cProfile.Profile() if profile_dir else None
    if profiler is not None:
        profiler.enable()
    device = torch.device("cuda", device_index)
    torch.cuda.set_device(device)
    # Candidates are held to true fp32, like the reference (the referee sets the same).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)  # a judge never needs gradients; this thread is the only one
    harness = Harness(conn, device, timing.L2Flusher())
    if confined:
        forbid_builds("the referee could not build this CUDA source for the sandbox", harness.ask_build)
    ready = time.perf_counter()
    stages = {"fork to serve": entered - started, "prebuilt loader": prebuilt - entered, "cuda": ready - prebuilt}
    _send(conn, Ready(pid=os.getpid(), start_seconds=ready - started, start_stages=stages))
    harness.serve(lambda: _dump(profiler, profile_dir))


def _dump(profiler: cProfile.Profile | None, folder: str | None) -> None:
    """Before the Finished reply: the referee ends the process with SIGKILL after it."""
    if profiler is not None and folder:
        profiler.disable()
        profiler.dump_stats(os.path.join(folder, f"candidate-{os.getpid()}.prof"))


def _send(conn: Connection, reply: BaseModel) -> None:
    conn.send_bytes(reply.model_dump_json().encode())


class Harness:
    """One candidate's state in its process, driven by the referee's commands."""

    def __init__(self, conn: Connection, device: torch.device, flusher: timing.L2Flusher) -> None:
        self.conn, self.device, self.flusher = conn, device, flusher
        self.model: Any = None
        self.filename: str | None = None
        self.sets: dict[str, list[Any]] = {}
        self.held: dict[int, list[Any]] = {}  # outputs of untimed calls, by call id
        self.last: dict[str, list[Any]] = {}  # the latest outputs per input set (for the held-stream probe)
        self.timed: deque[Any] = deque()
        self.gate: timing.Gate | None = None
        self.gate_flags = timing.GateFlags()
        self.host_ms = 0.0  # the slowest host time of a forward call so far
        # Taken while the process waits to be taken, before any of the candidate's code runs.
        self.integrity = probes.Integrity(
            modules=[sys.modules[__name__], probes, timing, ipc, compare, protocol, os, time],
            classes=[Harness, Connection, BaseModel, timing.L2Flusher, timing.Gate, timing.GateFlags],
            instances=[self],
        )

    def serve(self, finishing: Callable[[], None] = lambda: None) -> None:
        while True:
            try:
                command: Command = self.conn.recv()
            except EOFError:
                return
            try:
                reply = self.handle(command)
            except _Fail as fail:
                reply = fail.reply
            except Exception as exc:  # the harness itself failed on what the candidate did: on the record
                logger.exception("harness error on %s", command.kind)
                reply = Failed(
                    verdict=Verdict.RUNTIME_ERROR, errors=f"harness error: {type(exc).__name__}: {exc}"[:4000]
                )
            done = isinstance(command, Finish)
            if done:
                finishing()
            _send(self.conn, reply)
            if done:
                return

    def handle(self, command: Command) -> BaseModel:
        match command:
            case Load():
                return self.load(command)
            case Alloc():
                return self.alloc(command)
            case Free():
                for key in command.keys:
                    self.sets.pop(key, None)
                    self.last.pop(key, None)
                for call in command.calls:
                    self.held.pop(call, None)
                return Freed()
            case Call():
                return self.call(command)
            case Warmup():
                return self.warmup(command)
            case Trial():
                return self.trial(command)
            case Finish():
                return Finished(health=self.health())
        raise TypeError(f"unknown command {type(command).__name__}")

    def health(self) -> Health:
        return Health(tampered=self.integrity.check()[:64], concurrency=self.integrity.concurrency())

    # -- loading -------------------------------------------------------------------------
    def ask_build(self, source: str) -> None:
        """In the sandbox, during any command: have the referee build `source` into the cache."""
        if len(source) > MAX_BUILD_SOURCE:
            return  # too long to send; the build fails with forbid_builds' reason
        _send(self.conn, NeedsBuild(source=source))
        answer = self.conn.recv()
        if not isinstance(answer, Built):
            raise RuntimeError(f"the referee answered a build request with {type(answer).__name__}")

    def load(self, command: Load) -> Loaded:
        JUDGE_BUILD.set(command.build)
        if command.nvcc_version:
            remember_nvcc_version(command.build.nvcc, command.nvcc_version)
        self.gate = timing.Gate.load(command.gate_cubin, self.gate_flags)  # before the candidate's code
        self.filename = command.filename
        digest = hashlib.sha256(command.source.encode()).hexdigest()[:16]
        if command.fmt == "kernelbench":
            # One build folder per candidate: KernelBench solutions reuse extension names.
            folder = command.extensions_dir or str(command.build.cache_dir / "torch_ext" / digest)
            os.environ["TORCH_EXTENSIONS_DIR"] = folder
        module = self._exec(command, f"htam_candidate_{digest}")
        if not isinstance(getattr(module, "ModelNew", None), type):
            raise _Fail(Verdict.LOAD_ERROR, "the candidate defines no class ModelNew(nn.Module)")
        try:
            torch.manual_seed(command.seed)
            model = module.ModelNew(*command.init_args)
            model = model.to(self.device) if isinstance(model, torch.nn.Module) else model
        except Exception as exc:
            raise self._load_failure(exc) from exc
        self.model = model
        weights = []
        if isinstance(model, torch.nn.Module):
            for name, tensor in model.state_dict().items():
                if type(tensor) is torch.Tensor and tensor.is_cuda:
                    weights.append(NamedTensor(name=name, tensor=ipc.export(tensor)))
        torch.cuda.synchronize(self.device)
        return Loaded(weights=weights, health=self.health())

    def _exec(self, command: Load, name: str) -> types.ModuleType:
        try:
            return exec_source(command.source, command.filename, name, keep=True)
        except Exception as exc:
            raise self._load_failure(exc) from exc

    def _load_failure(self, exc: Exception) -> _Fail:
        if isinstance(exc, CudaBuildError):
            return _Fail(Verdict.COMPILE_ERROR, exc.result.errors)
        if "Error building extension" in str(exc):
            return _Fail(Verdict.COMPILE_ERROR, condense_errors(str(exc)))
        return _Fail(Verdict.LOAD_ERROR, condense_exception(exc, self.filename), cuda_error=_is_cuda_error(exc))

    # -- running ---------------------------------------------------------------------------
    def alloc(self, command: Alloc) -> Allocated:
        args: list[Any] = []
        tensors: list[protocol.RemoteTensor | None] = []
        for spec in command.args:
            if isinstance(spec, protocol.TensorSpec):
                buffer = torch.empty(spec.shape, dtype=getattr(torch, spec.dtype), device=self.device)
                args.append(buffer)
                tensors.append(ipc.export(buffer))
            else:
                args.append(spec.value)
                tensors.append(None)
        self.sets[command.key] = args
        torch.cuda.synchronize(self.device)
        return Allocated(tensors=tensors)

    def _forward(self, key: str) -> Callable[[], Any]:
        return partial(self.model, *self.sets[key])

    def _run(self, call: Callable[[], Any]) -> Any:
        """Run to completion; an exception is the candidate's runtime error. The host time
        of the call joins self.host_ms (the slowest so far, which sizes the stream hold)."""
        try:
            began = time.perf_counter()
            out = call()
            self.host_ms = max(self.host_ms, (time.perf_counter() - began) * 1e3)
            torch.cuda.synchronize(self.device)
        except _Fail:
            raise
        except Exception as exc:
            raise self._forward_failed(exc) from exc
        return out

    def _forward_failed(self, exc: Exception) -> _Fail:
        text = condense_exception(exc, self.filename)
        return _Fail(Verdict.RUNTIME_ERROR, f"ModelNew.forward raised {text}", cuda_error=_is_cuda_error(exc))

    def _export(self, outs: list[Any]) -> list[Output]:
        exported: list[Output] = []
        for out in outs:
            if type(out) is torch.Tensor and out.is_cuda:
                exported.append(ipc.export(out))
            else:
                device = str(out.device) if isinstance(out, torch.Tensor) else ""
                exported.append(Foreign(type_name=type(out).__name__[:300], device=device))
        return exported

    def call(self, command: Call) -> Called:
        forward = self._forward(command.key)
        if command.poison is not None:
            probes.poison_memory(command.outputs, command.poison, command.poison_blocks, self.device)
        ops: list[str] = []
        early = None
        if command.hold_stream:
            out_bytes = sum(math.prod(o.shape) * getattr(torch, o.dtype).itemsize for o in command.outputs)
            hold = probes.hold_ms(self.host_ms, out_bytes)
            spin = self._gate().narrow(1)  # one block: the observer's copies still run
            copies, outs = self._run(lambda: probes.held_stream_snapshot(forward, spin, hold))
            before = self.last.get(command.key)
            if copies is not None and before is not None:
                early = probes.early_fraction(copies, outs, before)
        elif command.record_ops:
            recorder = probes.OpRecorder()
            with recorder:
                outs = probes.flatten_outputs(self._run(forward))
            ops = recorder.disallowed()[:64]
        else:
            outs = probes.flatten_outputs(self._run(forward))
        self.held[command.call] = outs
        self.last[command.key] = outs
        return Called(outputs=self._export(outs), ops=ops, early_fraction=early, health=self.health())

    # -- timing ----------------------------------------------------------------------------
    def _gate(self) -> timing.Gate:
        if self.gate is None:
            raise RuntimeError("timing before the candidate was loaded")
        return self.gate

    def warmup(self, command: Warmup) -> Warmed:
        calls = [self._forward(key) for key in command.keys]
        self.timed = deque(maxlen=len(calls))
        try:
            warm = timing.warm_up(calls, command.warmup, self.timed)
        except Exception as exc:
            raise self._forward_failed(exc) from exc
        latency = timing.host_sync_latency(self.flusher, self._gate())
        return Warmed(host_ms=warm.host_ms, per_run_ms=warm.per_run_ms, latency_ms=latency, health=self.health())

    def trial(self, command: Trial) -> TrialDone:
        try:
            done = timing.timed_call(self._forward(command.key), self.flusher, self._gate(), command.gate_ms)
        except Exception as exc:
            raise self._forward_failed(exc) from exc
        outs = probes.flatten_outputs(done.out)
        # Held until len(sets) later trials ran: the referee compares this trial's outputs
        # before it sends the next, and finds an output that reuses a held one's memory.
        self.timed.append(outs)
        return TrialDone(
            index=command.index, ms=done.ms, synced_ms=done.synced_ms, host_ms=done.host_ms, outputs=self._export(outs)
        )
