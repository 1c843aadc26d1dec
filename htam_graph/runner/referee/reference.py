"""The reference side of a task, in the referee: its module, model, outputs and timings.

The task's module is executed from the source the parent read (and hashed), not from the
file, which a candidate could have rewritten since. The model (weights from a fixed seed)
is kept for the current task only, so a long-lived referee does not grow; reference
timings, eager and torch.compile, are measured once per task (the loop judges several
candidates of one task) while no candidate process runs, and kept.
"""

from __future__ import annotations

import copy
import logging
import types
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from htam_graph.runner.harness.probes import flatten_outputs
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import Timing
from htam_graph.runner.referee.inputs import task_inputs
from htam_graph.runner.referee.roofline import moved_bytes
from htam_graph.runner.timing import Gate, L2Flusher, time_gpu
from htam_graph.tasks import Task, exec_source

logger = logging.getLogger(__name__)

TIMING_SEED = 2000  # reference timings use fixed inputs: only their shapes matter
TIMING_INPUT_SETS = 4  # separately allocated input sets the timed trials rotate over
TIMING_INPUT_BYTES = 4 * 1024**3  # fewer sets when the inputs are larger than this together
FLOAT64_BYTES = 16 * 1024**3  # no float64 reference for tasks whose inputs and outputs in fp64 exceed this


class TaskError(Exception):
    """The task itself failed (its module, get_inputs, Model or forward raised)."""


def load_module(task: Task) -> types.ModuleType:
    try:
        return exec_source(task.source, str(task.path), f"htam_task_{task.sha256[:16]}")
    except Exception as exc:
        raise TaskError(f"{task.id}: importing the task failed with {type(exc).__name__}: {exc}") from exc


def timing_set_count(inputs: list[Any]) -> int:
    size = sum(x.nbytes for x in inputs if isinstance(x, torch.Tensor))
    return max(1, min(TIMING_INPUT_SETS, TIMING_INPUT_BYTES // max(size, 1)))


def first_float_dtype(inputs: list[Any]) -> torch.dtype:
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.dtype
    raise TaskError("get_inputs() returns no floating-point tensor; the runner needs one to pick tolerances")


@dataclass
class Reference:
    task: Task
    module: types.ModuleType
    model: torch.nn.Module
    init_args: list[Any]
    seed: int
    dtype: torch.dtype  # of the first floating-point input: picks tolerances and the precision probe
    flops: int
    input_bytes: int
    output_bytes: int
    moved_bytes: int  # what the roofline counts: inputs, parameters and buffers read once, outputs written once
    mutates_inputs: bool  # then it runs on a copy, so the judge's inputs stay as they were
    state: dict[str, torch.Tensor] = field(default_factory=dict)
    # max |reference - float64 reference| per output on the task's first input set (the
    # judge's measure of the task's conditioning), once per prepared reference; 0.0 where unknown
    task_noise: list[float] | None = None
    _model64: torch.nn.Module | None = None
    _float64_failed: bool = False

    def forward(self, inputs: list[Any]) -> list[torch.Tensor]:
        args = [x.clone() if self.mutates_inputs and isinstance(x, torch.Tensor) else x for x in inputs]
        try:
            with torch.no_grad():
                outs = flatten_outputs(self.model(*args))
        except Exception as exc:
            raise TaskError(f"the reference Model raised {type(exc).__name__}: {exc}") from exc
        if not all(type(t) is torch.Tensor for t in outs):
            raise TaskError("the reference Model returned something other than tensors")
        return outs

    def forward64(self, inputs: list[Any]) -> list[torch.Tensor] | None:
        """The reference computed in float64 (weights and floating inputs upcast): its
        distance from the real reference is the rounding noise of the task's own dtype.
        None when it would not fit in FLOAT64_BYTES or the model cannot run in float64."""
        if self._float64_failed or 2 * (self.input_bytes + self.output_bytes) > FLOAT64_BYTES:
            return None
        if self._model64 is None:
            self._model64 = copy.deepcopy(self.model).double()
        args = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        try:
            with torch.no_grad():
                outs = flatten_outputs(self._model64(*args))
        except Exception:  # e.g. a kernel without a float64 version: the judge falls back
            logger.info("%s: no float64 reference; probes use tolerances scaled by the output", self.task.id)
            self._float64_failed, self._model64 = True, None
            return None
        return [t for t in outs if isinstance(t, torch.Tensor)]


class References:
    """The current task's Reference and every task's reference timings."""

    def __init__(self, device: torch.device, flusher: L2Flusher | None) -> None:
        self.device, self.flusher = device, flusher
        self._current: Reference | None = None
        self._timings: dict[tuple[str, int, int, bool], tuple[Timing, Timing | None]] = {}

    def prepare(self, task: Task, config: EvalConfig) -> Reference:
        seed = config.seed or 0
        current = self._current
        if current is not None and current.task.sha256 == task.sha256 and current.seed == seed:
            return current
        self._current = None  # free the previous task's model before building this one
        module = load_module(task)
        try:
            init_args = list(module.get_init_inputs())
            torch.manual_seed(seed)
            model = module.Model(*init_args).to(self.device)
            inputs = task_inputs(module, TIMING_SEED, self.device)
        except Exception as exc:
            raise TaskError(f"{task.id}: building the reference failed with {type(exc).__name__}: {exc}") from exc
        snapshot = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        counter = FlopCounterMode(display=False)
        reference = Reference(
            task=task,
            module=module,
            model=model,
            init_args=init_args,
            seed=seed,
            dtype=first_float_dtype(inputs),
            flops=0,
            input_bytes=sum(x.nbytes for x in inputs if isinstance(x, torch.Tensor)),
            output_bytes=0,
            moved_bytes=0,
            mutates_inputs=False,
            state=dict(model.state_dict()),
        )
        with counter:
            outs = reference.forward(inputs)
        reference.flops = int(counter.get_total_flops())
        reference.output_bytes = sum(t.nbytes for t in outs)
        reference.moved_bytes = moved_bytes(inputs, model, outs)
        reference.mutates_inputs = any(
            isinstance(x, torch.Tensor) and not torch.equal(x, y) for x, y in zip(inputs, snapshot, strict=True)
        )
        if reference.mutates_inputs:
            logger.info("%s: the reference modifies its inputs; it runs on copies", task.id)
        self._current = reference
        return reference

    def timed(self, reference: Reference, config: EvalConfig) -> bool:
        """Whether the reference's timings for this config are measured already."""
        return (reference.task.sha256, config.trials, config.warmup, config.compile_reference) in self._timings

    def timings(self, reference: Reference, config: EvalConfig, gate: Gate | None) -> tuple[Timing, Timing | None]:
        """Eager (and torch.compile when asked) timings of the reference, once per task."""
        key = (reference.task.sha256, config.trials, config.warmup, config.compile_reference)
        if key not in self._timings:
            if self.flusher is None or gate is None:
                raise RuntimeError("reference timings need a GPU (no L2 flusher or gate on this device)")
            first = task_inputs(reference.module, TIMING_SEED, self.device)
            sets = [first] + [
                task_inputs(reference.module, TIMING_SEED + i, self.device) for i in range(1, timing_set_count(first))
            ]
            model = reference.model

            def calls(fn: Any) -> list[Any]:
                return [lambda x=x: fn(*x) for x in sets]

            with torch.no_grad():
                eager = time_gpu(calls(model), self.flusher, gate, config.warmup, config.trials)
                compiled = None
                if config.compile_reference:
                    compiled = time_gpu(calls(torch.compile(model)), self.flusher, gate, config.warmup, config.trials)
            logger.info("%s: eager reference %.4f ms", reference.task.id, eager.median_ms)
            self._timings[key] = (eager, compiled)
        return self._timings[key]
