"""The candidate's memory and its checked calls: input sets written into buffers of the
candidate's process, forward called on them, and every check of the outputs where they lie
(runner/referee/judge.py, stage 4)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from htam_graph.runner import compare
from htam_graph.runner.ipc import ProtocolViolation, dtype_name
from htam_graph.runner.models import CheatKind
from htam_graph.runner.protocol import (
    Alloc,
    Allocated,
    Call,
    Called,
    Free,
    Freed,
    Output,
    PlainArg,
    PoisonName,
    RemoteTensor,
    TensorSpec,
)
from htam_graph.runner.referee import inputs as sets
from htam_graph.runner.referee.candidate import CandidateLink, host_copies, sync
from htam_graph.runner.referee.reference import Reference, TaskError
from htam_graph.runner.referee.tolerance import Tolerance

if TYPE_CHECKING:
    from htam_graph.runner.referee.case import Case

# The referee hands its cached memory back to the driver (empty_cache: about 10 ms) only when
# the GPU runs short: after a job, when it caches more than KEEP_CACHED_BYTES and less than a
# quarter of the GPU (at least FREE_MARGIN_BYTES) is free; after each input set of a task
# whose inputs and outputs exceed LARGE_BYTES, when less than LARGE_FACTOR times them is
# free (float64 copies and temporaries: the candidate's process needs the memory).
KEEP_CACHED_BYTES = 4 * 1024**3
FREE_MARGIN_BYTES = 16 * 1024**3
LARGE_BYTES = 1024**3
LARGE_FACTOR = 6
HOLD_BYTES = 8 * 1024**3  # outputs of earlier calls the candidate's process keeps alive, at most
POISON_BYTES = 16 * 1024**3  # poisoned blocks per call, at most
EARLY_FRACTION = 0.5  # of the changed output final while the stream was held: work off the stream


def give_back(device: torch.device, needed: int) -> None:
    """empty_cache when the GPU has less than `needed` bytes free (see KEEP_CACHED_BYTES)."""
    if device.type == "cuda" and torch.cuda.mem_get_info(device)[0] < needed:
        torch.cuda.empty_cache()


def extent(remote: RemoteTensor) -> tuple[int, int]:
    """[first byte, past the last byte) of a tensor in the candidate's address space."""
    itemsize = getattr(torch, remote.dtype).itemsize
    span = (sum((n - 1) * s for n, s in zip(remote.shape, remote.stride, strict=True)) + 1) * itemsize
    start = remote.base + remote.offset
    return start, start + span


def overlaps(extent: tuple[int, int], others: Iterable[tuple[int, int]]) -> bool:
    return any(extent[0] < end and start < extent[1] for start, end in others)


def _specs(tensors: list[torch.Tensor]) -> list[TensorSpec]:
    return [TensorSpec(shape=tuple(t.shape), dtype=dtype_name(t.dtype)) for t in tensors]


@dataclass
class CandidateSet:
    """One input set: the referee's values and the candidate's buffers (views here)."""

    key: str
    master: list[Any]
    buffers: list[torch.Tensor | None]
    extents: list[tuple[int, int]]
    remotes: list[RemoteTensor]

    def pairs(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [
            (m, b)
            for m, b in zip(self.master, self.buffers, strict=True)
            if isinstance(m, torch.Tensor) and b is not None
        ]


@dataclass
class Outcome:
    """One checked call: the candidate's outputs (views) and what the comparison found."""

    call: int
    outputs: list[torch.Tensor]
    extents: list[tuple[int, int]]
    failures: list[str]
    comparisons: list[compare.Comparison]
    fingerprints: list[tuple[object, ...]]
    remotes: list[RemoteTensor]

    @property
    def ok(self) -> bool:
        return not self.failures


class Calls:
    """One job's input sets in the candidate's process and its checked calls on them."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.count = 0
        self.held: deque[tuple[int, list[tuple[int, int]]]] = deque()  # call id, its output extents

    @property
    def link(self) -> CandidateLink:
        if self.case.link is None:
            raise RuntimeError("no candidate process")
        return self.case.link

    def send_set(self, key: str, master: list[Any]) -> CandidateSet:
        """Allocate an input set in the candidate's process and write its values there."""
        args = [
            TensorSpec(shape=tuple(x.shape), dtype=dtype_name(x.dtype))
            if isinstance(x, torch.Tensor)
            else PlainArg(value=host_copies(x))
            for x in master
        ]
        allocated = self.case.request(Alloc(key=key, args=args), Allocated)
        if len(allocated.tensors) != len(master):
            raise ProtocolViolation(f"{len(allocated.tensors)} buffers for {len(master)} inputs")
        buffers: list[torch.Tensor | None] = []
        extents = []
        remotes = []
        for value, remote in zip(master, allocated.tensors, strict=True):
            if not isinstance(value, torch.Tensor):
                buffers.append(None)
                continue
            if remote is None or tuple(remote.shape) != tuple(value.shape) or remote.dtype != dtype_name(value.dtype):
                raise ProtocolViolation("an input buffer of another shape or dtype than asked for")
            buffer = self.link.tensor(remote)
            buffer.copy_(value)
            buffers.append(buffer)
            extents.append(extent(remote))
            remotes.append(remote)
        sync(self.case.device)
        return CandidateSet(key, master, buffers, extents, remotes)

    def rewrite(self, reference: Reference, current: CandidateSet) -> None:
        """Every element of every input tensor drawn afresh (the task's get_inputs() under a
        new secret seed), in the candidate's buffers, which keep their addresses: nothing
        it saw before predicts any of it. The new values become the referee's copy."""
        fresh = sets.task_inputs(reference.module, sets.secret_seed(), self.case.device)
        for i, (old, theirs) in enumerate(zip(current.master, current.buffers, strict=True)):
            new = fresh[i] if i < len(fresh) else None
            if theirs is None or not isinstance(old, torch.Tensor) or not isinstance(new, torch.Tensor):
                continue
            if new.shape != old.shape or new.dtype != old.dtype:
                raise TaskError(f"get_inputs() drew input {i} with another shape or dtype under another seed")
            current.master[i] = new
            theirs.copy_(new)
        sync(self.case.device)

    def release(self, *outcomes: Outcome) -> None:
        """Unmap outputs the referee no longer reads (the candidate's process may free them)."""
        if self.case.link is not None:
            self.case.link.release([r for outcome in outcomes for r in outcome.remotes])

    def free_sets(self, done: list[CandidateSet]) -> None:
        if done and self.case.link is not None:
            self.case.link.release([r for s in done for r in s.remotes])
            self.case.request(Free(keys=[s.key for s in done]), Freed)

    def free_held(self) -> None:
        """Let the candidate's process free every output it still holds."""
        self.case.request(Free(calls=[c for c, _ in self.held]), Freed)
        self.held.clear()

    def checked_call(
        self,
        current: CandidateSet,
        expected: list[torch.Tensor],
        poison: PoisonName | None,
        label: str,
        record: bool = False,
        hold: bool = False,
        tolerances: list[Tolerance] | None = None,
    ) -> Outcome:
        """forward on one input set, and every check of its outputs."""
        case = self.case
        self.count += 1
        out_bytes = sum(t.nbytes for t in expected)
        called = case.request(
            Call(
                call=self.count,
                key=current.key,
                poison=poison,
                poison_blocks=max(1, min(case.config.poison_blocks, POISON_BYTES // max(out_bytes, 1))),
                outputs=_specs(expected),
                record_ops=record,
                hold_stream=hold,
            ),
            Called,
        )
        when = f"forward on the {label} inputs"
        case.health(called.health, when)
        if called.ops:
            case.flag(CheatKind.TORCH_COMPUTE_OP, f"{when} ran PyTorch compute ops: " + ", ".join(called.ops[:8]))
        if called.early_fraction is not None and called.early_fraction > EARLY_FRACTION:
            case.flag(
                CheatKind.SIDE_STREAM,
                f"{called.early_fraction:.0%} of the output was final while torch's current stream was still "
                "blocked: the work ran on another stream or thread",
            )
        outcome = self.check_outputs(self.count, called.outputs, expected, current, poison, when, tolerances)
        # Persistent outputs are found against the outputs the candidate's process still holds.
        self.held.append((self.count, outcome.extents))
        hold_count = max(1, min(8, HOLD_BYTES // max(out_bytes, 1)))
        while len(self.held) > hold_count:
            old, _ = self.held.popleft()
            case.request(Free(calls=[old]), Freed)
        return outcome

    def check_outputs(
        self,
        call: int,
        outputs: list[Output],
        expected: list[torch.Tensor],
        current: CandidateSet,
        poison: PoisonName | None,
        when: str,
        tolerances: list[Tolerance] | None = None,
    ) -> Outcome:
        case, result = self.case, self.case.result
        remotes: list[RemoteTensor] = []
        for i, out in enumerate(outputs):
            if not isinstance(out, RemoteTensor):
                where = f" on {out.device}" if out.device else ""
                case.flag(
                    CheatKind.LAZY_OUTPUT,
                    f"output {i} is a {out.type_name}{where}, not a plain torch.Tensor on the GPU",
                )
                case.stop_if_flagged()
            else:
                remotes.append(out)
        if len(remotes) != len(expected):
            failure = f"forward returned {len(remotes)} outputs, the reference {len(expected)}"
            return Outcome(call, [], [], [failure], [], [], [])
        views = [self.link.tensor(r) for r in remotes]
        extents = [extent(r) for r in remotes]
        before = [compare.fingerprint(v) for v in views]
        tols = tolerances or case.tolerances.outputs(len(expected))
        comparisons = [
            compare.compare(i, v, e, t.atol, t.rtol, poison)
            for i, (v, e, t) in enumerate(zip(views, expected, tols, strict=True))
        ]
        after = [compare.fingerprint(v) for v in views]
        failures = [c.message for c in comparisons if not c.ok]
        for e, t in zip(expected, tols, strict=True):
            if e.is_floating_point():  # the tolerance applied, and the one before any widening
                applied = compare.tolerance(e.dtype, t.atol, t.rtol)[0]
                default = compare.tolerance(e.dtype, case.config.atol, case.config.rtol)[0]
                result.atol = max(result.atol or 0.0, applied)
                result.atol_default = max(result.atol_default or 0.0, default)
        for i, cmp in enumerate(comparisons):
            result.max_abs_error = max(result.max_abs_error or 0.0, cmp.max_abs)
            result.max_rel_error = max(result.max_rel_error or 0.0, cmp.max_rel)
            if cmp.survivors:
                case.flag(
                    CheatKind.UNWRITTEN_OUTPUT,
                    f"{when}: output {i}: {cmp.survivors} of {cmp.numel} elements never written "
                    f"(the {poison} marker survived)",
                )
            if cmp.constant and not cmp.ref_constant:
                case.flag(CheatKind.CONSTANT_OUTPUT, f"{when}: output {i} is constant while the reference's is not")
        if before != after:
            case.flag(CheatKind.SIDE_STREAM, f"{when}: the output kept changing after forward returned")
        for i, (master, buffer) in enumerate(current.pairs()):
            if not compare.bitwise_equal(master, buffer):
                case.flag(CheatKind.INPUT_MUTATION, f"{when}: forward modified input {i}")
        for i, span in enumerate(extents):
            if overlaps(span, current.extents):
                case.flag(CheatKind.INPUT_ALIAS, f"{when}: output {i} shares storage with an input")
            if overlaps(span, (e for _, held in self.held for e in held)):
                case.flag(
                    CheatKind.PERSISTENT_OUTPUT,
                    f"{when}: output {i} is memory an earlier call returned and the caller still holds",
                )
        return Outcome(call, views, extents, failures, comparisons, after, remotes)
