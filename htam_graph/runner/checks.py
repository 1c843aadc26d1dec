"""Run-time checks of a candidate's outputs and behaviour (imported in GPU workers only).

Poisoning: before each candidate call the caching allocator is emptied and then handed
blocks the size of every expected output, filled with a marker bit pattern and freed, so
the candidate's `empty`/`empty_like` receives marked memory. A marker that survives in
the output means elements were never written; a different result under a second marker
means uninitialised memory was read.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from htam_graph.runner.models import CheatFinding, CheatKind

_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _signed(bits: int, size: int) -> int:
    return int.from_bytes(bits.to_bytes(size, "little"), "little", signed=size > 1)


def _float_bits(value: float, dtype: torch.dtype) -> int:
    return int(torch.tensor([value], dtype=dtype).view(_INT_OF_SIZE[dtype.itemsize]).item())


# NaNs with a payload no arithmetic produces (CUDA's canonical NaN is 0x7fffffff), so a
# surviving marker is told apart from a NaN the kernel computed.
_NAN_MARKER = {
    torch.float32: 0x7FD5A5A5,
    torch.float16: 0x7E5A,
    torch.bfloat16: 0x7FDA,
    torch.float64: 0x7FF8A5A5A5A5A5A5,
}
_GARBAGE_VALUE = {torch.float32: 1.2345e30, torch.float16: 3.0e4, torch.bfloat16: 1.2345e30, torch.float64: 1.2345e300}


@dataclass(frozen=True)
class Poison:
    """One marker pattern: a NaN-like one (first runs) or a large finite one (the re-run)."""

    name: str

    def bits(self, dtype: torch.dtype) -> int:
        size = dtype.itemsize
        if dtype in _NAN_MARKER:
            if self.name == "nan":
                return _signed(_NAN_MARKER[dtype], size)
            return _float_bits(_GARBAGE_VALUE[dtype], dtype)
        byte = 0xA5 if self.name == "nan" else 0x5A
        return _signed(int.from_bytes(bytes([byte]) * size, "little"), size)


NAN_POISON = Poison("nan")
GARBAGE_POISON = Poison("garbage")


@dataclass(frozen=True)
class OutputSpec:
    shape: tuple[int, ...]
    dtype: torch.dtype


def flatten_outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def poison_memory(specs: Iterable[OutputSpec], poison: Poison, blocks: int, device: torch.device) -> None:
    """Leave only marked free blocks in the allocator, sized like the expected outputs."""
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    held = []
    for spec in specs:
        int_dtype = _INT_OF_SIZE.get(spec.dtype.itemsize)
        if int_dtype is None:
            continue
        for _ in range(blocks):
            block = torch.empty(spec.shape, dtype=spec.dtype, device=device)
            block.view(int_dtype).fill_(poison.bits(spec.dtype))
            held.append(block)
    torch.cuda.synchronize(device)
    del held


def marker_survivors(out: torch.Tensor, ref: torch.Tensor, poison: Poison) -> int:
    """Output elements still holding the marker where the reference does not."""
    int_dtype = _INT_OF_SIZE.get(out.dtype.itemsize)
    if int_dtype is None:
        return 0
    bits = poison.bits(out.dtype)
    return int(((out.view(int_dtype) == bits) & (ref.view(int_dtype) != bits)).sum().item())


def tolerance(dtype: torch.dtype, atol: float | None, rtol: float | None) -> tuple[float, float]:
    """KernelBench's: 1e-2 for half types, 1e-4 otherwise (explicit values win)."""
    default = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4
    return (default if atol is None else atol), (default if rtol is None else rtol)


@dataclass
class Comparison:
    ok: bool
    max_abs: float
    max_rel: float
    message: str


def compare(index: int, out: torch.Tensor, ref: torch.Tensor, atol: float | None, rtol: float | None) -> Comparison:
    """allclose with NaN/Inf where the reference is finite counted as wrong."""
    where = f"output {index} (shape {list(ref.shape)}, {str(ref.dtype).removeprefix('torch.')})"
    if out.shape != ref.shape or out.dtype != ref.dtype:
        got = f"shape {list(out.shape)}, {str(out.dtype).removeprefix('torch.')}"
        return Comparison(False, float("inf"), float("inf"), f"{where}: got {got}")
    if not ref.is_floating_point():
        bad = int((out != ref).sum().item())
        msg = "" if bad == 0 else f"{where}: {bad} of {ref.numel()} elements differ"
        return Comparison(bad == 0, float(bad > 0), float(bad > 0), msg)
    a_tol, r_tol = tolerance(ref.dtype, atol, rtol)
    out64, ref64 = out.double(), ref.double()
    close = torch.isclose(out64, ref64, rtol=r_tol, atol=a_tol, equal_nan=True)
    finite = torch.isfinite(out64) & torch.isfinite(ref64)
    diff = torch.where(finite, (out64 - ref64).abs(), torch.zeros_like(out64))
    nonfinite_bad = int((~close & ~finite).sum().item())
    # Relative error against |ref| + atol, so near-zero references do not blow it up.
    rel = diff / (ref64.abs() + a_tol)
    empty = diff.numel() == 0
    max_abs = float("inf") if nonfinite_bad else 0.0 if empty else float(diff.max().item())
    max_rel = float("inf") if nonfinite_bad else 0.0 if empty else float(rel.max().item())
    bad = int((~close).sum().item())
    if bad == 0:
        return Comparison(True, max_abs, max_rel, "")
    # The worst mismatch: a non-finite one first, else the largest absolute difference.
    badness = torch.where(close, torch.full_like(diff, -1.0), torch.where(finite, diff, torch.inf))
    worst = int(badness.argmax().item())
    idx = [int(i) for i in torch.unravel_index(torch.tensor(worst), ref.shape)] if ref.dim() else []
    got, want = out64.flatten()[worst].item(), ref64.flatten()[worst].item()
    msg = (
        f"{where}: {bad} of {ref.numel()} elements outside atol={a_tol:g} rtol={r_tol:g}"
        f"{f' ({nonfinite_bad} NaN/Inf)' if nonfinite_bad else ''}; "
        f"worst at {idx}: got {got:.6g}, expected {want:.6g}"
    )
    return Comparison(False, max_abs, max_rel, msg)


def is_constant(t: torch.Tensor) -> bool:
    if t.numel() < 2:
        return False
    flat = t.flatten()
    return bool(torch.equal(flat, flat[:1].expand_as(flat)))


def same_values(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b, strict=True))


def storage_overlaps(out: torch.Tensor, inputs: Iterable[Any]) -> bool:
    """True when the output's storage shares bytes with any input tensor's storage."""
    o = out.untyped_storage()
    lo, hi = o.data_ptr(), o.data_ptr() + o.nbytes()
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_cuda:
            s = x.untyped_storage()
            if s.nbytes() and s.data_ptr() < hi and lo < s.data_ptr() + s.nbytes():
                return True
    return False


# --- torch compute inside a native candidate's forward ------------------------------------

# Allocation, views and metadata: what a native forward legitimately does around its
# launches. Fills are allowed for zero-initialised accumulators; a constant output is
# caught separately (CONSTANT_OUTPUT).
ALLOWED_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "new_zeros",
        "zero_",
        "ones",
        "ones_like",
        "new_ones",
        "full",
        "full_like",
        "new_full",
        "fill_",
        "resize_",
        "lift_fresh",
        "view",
        "reshape",
        "_unsafe_view",
        "_reshape_alias",
        "as_strided",
        "view_as",
        "flatten",
        "unflatten",
        "contiguous",
        "clone",
        "copy_",
        "t",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "squeeze",
        "unsqueeze",
        "detach",
        "alias",
        "slice",
        "select",
        "narrow",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "size",
        "stride",
        "numel",
        "dim",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "is_contiguous",
        "_local_scalar_dense",
        "record_stream",
    }
)


# -- work off the current stream ------------------------------------------------------
HOLD_MS = 100.0  # the spin kernel that holds the current stream
SETTLE_S = 0.02  # host wait after forward returns, so work elsewhere can finish


def held_stream_snapshot(call: Callable[[], Any], cycles_per_ms: float) -> tuple[list[Any] | None, list[Any]]:
    """Run `call` while a spin kernel holds the current stream, and copy its outputs on
    another stream before the hold ends. Work queued on the current stream cannot have
    started then; work that is done already ran elsewhere (a private stream, a thread).
    Returns (the copies, or None when the hold ended first, e.g. forward synchronized the
    device itself; the outputs)."""
    torch.cuda.synchronize()
    observer = torch.cuda.Stream()
    torch.cuda._sleep(int(HOLD_MS * cycles_per_ms))
    hold = torch.cuda.Event()
    hold.record()
    outs = flatten_outputs(call())
    time.sleep(SETTLE_S)
    with torch.cuda.stream(observer):
        copies = [t.clone() if isinstance(t, torch.Tensor) else t for t in outs]
    observer.synchronize()
    conclusive = not hold.query()
    torch.cuda.synchronize()
    return (copies if conclusive else None), outs


def early_fraction(copies: list[Any], outs: list[Any], before: list[Any]) -> float:
    """Of the output elements that differ from the previous call's, the fraction already
    final in the copies taken while the current stream was held."""
    changed = early = 0
    for copy, out, old in zip(copies, outs, before, strict=False):
        if not all(isinstance(t, torch.Tensor) for t in (copy, out, old)):
            continue
        view = _INT_OF_SIZE.get(out.dtype.itemsize)
        if view is None or not copy.shape == old.shape == out.shape or old.dtype != out.dtype:
            continue
        mask = out.view(view) != old.view(view)
        changed += int(mask.sum().item())
        early += int((mask & (copy.view(view) == out.view(view))).sum().item())
    return early / changed if changed else 0.0


class OpRecorder(TorchDispatchMode):
    """Records every aten op a forward dispatches; tensor data pointers bypass it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(f"{func.namespace}.{func.overloadpacket.__name__}")
        return func(*args, **(kwargs or {}))

    def disallowed(self) -> list[str]:
        seen: dict[str, None] = {}
        for op in self.ops:
            namespace, name = op.split(".", 1)
            if namespace != "aten" or name not in ALLOWED_OPS:
                seen[op] = None
        return list(seen)


# --- the judge's own functions, which a candidate must not replace ------------------------


def _watched(judge_modules: Iterable[ModuleType]) -> dict[str, tuple[Any, str]]:
    watched: dict[str, tuple[Any, str]] = {
        "torch.cuda.synchronize": (torch.cuda, "synchronize"),
        "torch.cuda.Event": (torch.cuda, "Event"),
        "torch.cuda.Event.record": (torch.cuda.Event, "record"),
        "torch.cuda.Event.elapsed_time": (torch.cuda.Event, "elapsed_time"),
        "torch.cuda.Event.synchronize": (torch.cuda.Event, "synchronize"),
        "torch.cuda.current_stream": (torch.cuda, "current_stream"),
        "torch.cuda.empty_cache": (torch.cuda, "empty_cache"),
        "torch.isclose": (torch, "isclose"),
        "torch.allclose": (torch, "allclose"),
        "torch.equal": (torch, "equal"),
        "time.perf_counter": (time, "perf_counter"),
        "time.time": (time, "time"),
        "time.monotonic": (time, "monotonic"),
    }
    for module in judge_modules:
        for name, value in vars(module).items():
            if callable(value) and not name.startswith("__"):
                watched[f"{module.__name__}.{name}"] = (module, name)
    return watched


class JudgeSnapshot:
    """Identities of timers, synchronisation and judge functions, taken before the candidate."""

    def __init__(self, judge_modules: Iterable[ModuleType]) -> None:
        self._watched = _watched(judge_modules)
        self._saved = {key: getattr(owner, attr) for key, (owner, attr) in self._watched.items()}

    def replaced(self) -> list[str]:
        return [
            key for key, (owner, attr) in self._watched.items() if getattr(owner, attr, None) is not self._saved[key]
        ]


def precision_flags() -> dict[str, object]:
    return {
        "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "allow_fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }


def child_pids() -> set[int]:
    """Live child processes of this process (Linux /proc; empty elsewhere)."""
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


@dataclass
class Concurrency:
    """Threads and child processes before the candidate runs."""

    threads: int
    children: set[int]

    @classmethod
    def now(cls) -> Concurrency:
        return cls(threading.active_count(), child_pids())

    def grown(self) -> str:
        threads, children = threading.active_count(), child_pids() - self.children
        parts = []
        if threads > self.threads:
            parts.append(f"{threads - self.threads} new thread(s)")
        if children:
            parts.append(f"{len(children)} new child process(es)")
        return " and ".join(parts)


def finding(kind: CheatKind, detail: str) -> CheatFinding:
    return CheatFinding(kind=kind, detail=detail, stage="dynamic")


def run_quietly(fn: Callable[[], Any]) -> Any:
    """Run `fn` without autograd bookkeeping (a judge never needs gradients)."""
    with torch.no_grad():
        return fn()
