"""What the harness checks inside a candidate's process: poisoned free memory, the aten ops
of forward, work off the current stream, and the state of the process itself.

Everything here runs beside the candidate's code, so a candidate that sets out to defeat
it can (it owns the process). These checks make the easy ways loud and cheap to catch;
the guarantees come from the referee, which never trusts this process (docs/judge.md).
"""

from __future__ import annotations

import builtins
import gc
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import CodeType, FunctionType, MethodType, ModuleType
from typing import Any

import torch
import torch.nn.modules.module as nn_module
from torch.utils._python_dispatch import TorchDispatchMode

from htam_graph.runner.compare import int_view, marker_bits
from htam_graph.runner.proc import child_pids
from htam_graph.runner.protocol import SHORT_TEXT, PoisonName, TensorSpec
from htam_graph.runner.timing import Gate

LARGE_POISON_BYTES = 1024**3  # outputs above this: return the cache to the driver first


def poison_memory(specs: Iterable[TensorSpec], poison: PoisonName, blocks: int, device: torch.device) -> None:
    """Leave only marked free memory in the allocator, with free blocks sized like the
    expected outputs, so the candidate's empty/empty_like receives marked memory.

    Every block the caching allocator holds free is overwritten with the marker in place
    (of the largest output's dtype), then `blocks` blocks per output are allocated, marked
    and freed. Small outputs keep the cache: handing it back to the driver and taking it
    again (cudaFree, cudaMalloc) cost most of a checked call. Large ones still empty it
    first, so the referee's process has the memory for its float32 copies."""
    torch.cuda.synchronize(device)
    marked: list[tuple[torch.dtype, TensorSpec, int]] = []
    for spec in specs:
        dtype = getattr(torch, spec.dtype)
        if (bits := marker_bits(poison, dtype)) is not None:
            marked.append((dtype, spec, bits))
    total = sum(math.prod(spec.shape) * dtype.itemsize for dtype, spec, _ in marked)
    if total * blocks > LARGE_POISON_BYTES:
        torch.cuda.empty_cache()
    elif marked:
        dtype, _, bits = max(marked, key=lambda m: math.prod(m[1].shape) * m[0].itemsize)
        _mark_free_blocks(device, dtype, bits)
    held = []
    for dtype, spec, bits in marked:
        for _ in range(blocks):
            block = torch.empty(spec.shape, dtype=dtype, device=device)
            int_view(block).fill_(bits)
            held.append(block)
    torch.cuda.synchronize(device)
    del held


def _mark_free_blocks(device: torch.device, dtype: torch.dtype, bits: int) -> None:
    """Write the marker into every inactive block of the caching allocator on `device`."""
    itemsize = dtype.itemsize
    for segment in torch.cuda.memory_snapshot():
        if segment["device"] != device.index:
            continue
        for block in segment["blocks"]:
            if block["state"] == "inactive" and block["size"] >= itemsize:
                raw = torch.as_tensor(_RawBlock(block["address"], block["size"] // itemsize * itemsize), device=device)
                int_view(raw.view(dtype)).fill_(bits)


class _RawBlock:
    """A free block of the allocator in the form torch.as_tensor takes without a copy."""

    def __init__(self, address: int, nbytes: int) -> None:
        self.__cuda_array_interface__: dict[str, Any] = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 3,
            "strides": None,
            "stream": None,  # the device was synchronized
        }


# --- torch compute inside a native candidate's forward ------------------------------------

# Allocation, views and metadata: what a native forward legitimately does around its
# launches. Fills are allowed for zero-initialised accumulators; a constant output is
# caught separately (CONSTANT_OUTPUT).
ALLOWED_OPS = frozenset(
    {
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
        "new_zeros", "zero_", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill_",
        "resize_", "lift_fresh", "view", "reshape", "_unsafe_view", "_reshape_alias", "as_strided", "view_as",
        "flatten", "unflatten", "contiguous", "clone", "copy_", "t", "transpose", "permute", "expand",
        "expand_as", "squeeze", "unsqueeze", "detach", "alias", "slice", "select", "narrow", "split",
        "split_with_sizes", "chunk", "unbind", "size", "stride", "numel", "dim", "sym_size", "sym_stride",
        "sym_numel", "sym_storage_offset", "is_contiguous", "_local_scalar_dense", "record_stream",
    }
)  # fmt: skip


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


# --- work off the current stream ------------------------------------------------------
HOLD_MS = 100.0  # the longest hold of the current stream
SETTLE_S = 0.02  # host wait after forward returns, so work elsewhere can finish


def hold_ms(host_ms: float, out_bytes: int) -> float:
    """How long to hold the stream: the forward's host time (4x its slowest call so far),
    the settle wait twice over, and the copies of its outputs (at 1 GB/ms), at most HOLD_MS.
    A forward slower than that on the host makes the probe inconclusive (not a finding)."""
    return min(HOLD_MS, 2e3 * SETTLE_S + 4 * host_ms + out_bytes / 1e9)


def held_stream_snapshot(call: Callable[[], Any], spin: Gate, hold: float) -> tuple[list[Any] | None, list[Any]]:
    """Run `call` while a spin kernel (one block, on the GPU's clock) holds the current
    stream for `hold` ms, and copy its outputs on another stream before the hold ends. Work
    queued on the current stream cannot have started then; work that is done already ran
    elsewhere (a private stream, a thread). Returns (the copies, or None when the hold
    ended first, e.g. forward synchronized the device itself; the outputs)."""
    torch.cuda.synchronize()
    observer = torch.cuda.Stream()
    spin.hold(hold)
    ended = torch.cuda.Event()
    ended.record()
    outs = flatten_outputs(call())
    time.sleep(SETTLE_S)
    with torch.cuda.stream(observer):
        copies = [t.clone() if isinstance(t, torch.Tensor) else t for t in outs]
    observer.synchronize()
    conclusive = not ended.query()
    torch.cuda.synchronize()
    return (copies if conclusive else None), outs


def early_fraction(copies: list[Any], outs: list[Any], before: list[Any]) -> float:
    """Of the output elements that differ from the previous call's, the fraction already
    final in the copies taken while the current stream was held."""
    changed = early = 0
    for copy, out, old in zip(copies, outs, before, strict=False):
        if not all(type(t) is torch.Tensor for t in (copy, out, old)):
            continue
        if out.dtype.itemsize not in (1, 2, 4, 8) or not copy.shape == old.shape == out.shape or old.dtype != out.dtype:
            continue
        mask = int_view(out) != int_view(old)
        changed += int(mask.sum().item())
        early += int((mask & (int_view(copy) == int_view(out))).sum().item())
    return early / changed if changed else 0.0


def flatten_outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


# --- the state of the process ---------------------------------------------------------------

_TORCH_WATCHED: dict[str, tuple[Any, str]] = {
    "torch.cuda.synchronize": (torch.cuda, "synchronize"),
    "torch.cuda.Event": (torch.cuda, "Event"),
    "torch.cuda.Event.record": (torch.cuda.Event, "record"),
    "torch.cuda.Event.elapsed_time": (torch.cuda.Event, "elapsed_time"),
    "torch.cuda.Event.synchronize": (torch.cuda.Event, "synchronize"),
    "torch.cuda.Event.query": (torch.cuda.Event, "query"),
    "torch.cuda.Stream": (torch.cuda, "Stream"),
    "torch.cuda.current_stream": (torch.cuda, "current_stream"),
    "torch.cuda.empty_cache": (torch.cuda, "empty_cache"),
    "torch.cuda.memory_snapshot": (torch.cuda, "memory_snapshot"),
    "torch.as_tensor": (torch, "as_tensor"),
    "torch.cuda._sleep": (torch.cuda, "_sleep"),
    "torch.Tensor.data_ptr": (torch.Tensor, "data_ptr"),
    "torch.Tensor.clone": (torch.Tensor, "clone"),
    "torch.Tensor.copy_": (torch.Tensor, "copy_"),
    "torch.Tensor.fill_": (torch.Tensor, "fill_"),
    "torch.Tensor.view": (torch.Tensor, "view"),
    "torch.empty": (torch, "empty"),
    "torch.no_grad": (torch, "no_grad"),
    "time.perf_counter": (time, "perf_counter"),
    "time.sleep": (time, "sleep"),
}
_ITIMERS = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)


def _lookup(owner: Any, attr: str) -> Any:
    """What `owner.attr` is bound to: for a class, the entry in its (or a base's) __dict__,
    since getattr would return a new bound object for a classmethod on every access."""
    if isinstance(owner, type):
        for cls in owner.__mro__:
            if attr in vars(cls):
                return vars(cls)[attr]
        return None
    return getattr(owner, attr, None)


def _signals() -> dict[int, Any]:
    handlers = {}
    for sig in signal.valid_signals():
        try:
            handlers[int(sig)] = signal.getsignal(sig)
        except (OSError, ValueError):  # SIGKILL, SIGSTOP and real-time signals on some systems
            continue
    return handlers


def _global_hooks() -> list[str]:
    """torch's process-wide module hooks that hold entries (they run inside every forward)."""
    return [
        name
        for name, value in vars(nn_module).items()
        if name.startswith("_global_") and name.endswith("hooks") and isinstance(value, dict) and value
    ]


# sys.monitoring (Python 3.12+, PEP 669): callbacks on the calls, lines and returns of any
# code object, the harness's timing and reply path among them, with no trace or profile
# function set. None where the interpreter has none (3.11): nothing to check there.
_MONITORING: Any = getattr(sys, "monitoring", None)
_MONITORING_TOOLS = range(6)  # the tool ids sys.monitoring has
MonitoringState = dict[tuple[str, int, str], Any]  # (what, tool id, where) -> value


def _code_objects(value: Any) -> Iterator[CodeType]:
    """The code of a function (or of a method's, or a property's accessors) and the code
    nested in it (its lambdas, comprehensions and inner functions): where local events can
    be set. Nothing for builtins and classes."""
    if isinstance(value, (MethodType, classmethod, staticmethod)):
        value = value.__func__
    functions = [value.fget, value.fset, value.fdel] if isinstance(value, property) else [value]
    stack = [fn.__code__ for fn in functions if isinstance(fn, FunctionType)]
    while stack:
        code = stack.pop()
        yield code
        stack.extend(const for const in code.co_consts if isinstance(const, CodeType))


def _event_names(events: int) -> str:
    names = [name for name, bit in vars(_MONITORING.events).items() if name.isupper() and events & bit]
    return "|".join(sorted(names)) or "none"


def monitoring_state(codes: Mapping[str, CodeType]) -> MonitoringState:
    """What sys.monitoring holds that can be read: every tool id's name and global events,
    and its local events on `codes` (the harness's own functions). A freed tool id keeps
    its events and callbacks active (CPython 3.12 and 3.13), so the events of every id are
    read, in use or not. Empty before Python 3.12."""
    mon = _MONITORING
    if mon is None:
        return {}
    state: MonitoringState = {}
    for tool in _MONITORING_TOOLS:
        state["tool", tool, ""] = mon.get_tool(tool)
        state["events", tool, ""] = mon.get_events(tool)
        for key, code in codes.items():
            if local := mon.get_local_events(tool, code):
                state["local", tool, key] = local
    return state


def monitoring_changes(before: MonitoringState, now: MonitoringState) -> list[str]:
    """What changed in sys.monitoring, worded for the referee (which reads an entry that
    starts with "changed " as a precision flag)."""
    found = []
    for key in dict.fromkeys([*before, *now]):
        old, new = before.get(key), now.get(key)
        if old == new:
            continue
        what, tool, where = key
        if what == "tool":
            found.append(
                f"registered a sys.monitoring tool (id {tool}, name {new!r:.60})"  # the name is the candidate's
                if new is not None
                else f"freed sys.monitoring tool id {tool} ({old!r:.60})"
            )
        elif what == "events":
            found.append(f"set the sys.monitoring events of tool {tool} to {_event_names(new or 0)}")
        else:
            found.append(f"set sys.monitoring events of tool {tool} on {where}: {_event_names(new or 0)}")
    return found


def precision_flags() -> dict[str, object]:
    return {
        "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "allow_fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }


@dataclass
class Integrity:
    """The identities and settings the harness relies on, taken before the candidate loads.

    `check()` lists what changed: replaced functions of the harness, of torch's timing and
    synchronisation, of builtins; global module hooks (they would run inside a reference
    forward in the same process); trace, profile and signal handlers, interval timers and
    gc callbacks (code that runs inside the harness between the candidate's calls);
    sys.monitoring tools and their events (global, and local on the code of the watched
    functions), on Python 3.12+; torch's precision flags; and threads or child processes
    left running.
    """

    modules: list[ModuleType]
    classes: list[type] = field(default_factory=list)
    instances: list[object] = field(default_factory=list)
    _saved: dict[str, tuple[Any, str, Any]] = field(default_factory=dict)
    _signals: dict[int, Any] = field(default_factory=dict)
    _flags: dict[str, object] = field(default_factory=dict)
    _threads: int = 0
    _children: set[int] = field(default_factory=set)
    _gc_callbacks: int = 0
    _codes: dict[str, CodeType] = field(default_factory=dict)
    _monitoring: MonitoringState = field(default_factory=dict)

    def __post_init__(self) -> None:
        watched = dict(_TORCH_WATCHED)
        for module in [*self.modules, builtins]:
            for name, value in vars(module).items():
                if callable(value) and not name.startswith("__"):
                    watched[f"{module.__name__}.{name}"] = (module, name)
        for cls in self.classes:
            for name, value in vars(cls).items():
                if callable(value) and not (name.startswith("__") and name.endswith("__")):
                    watched[f"{cls.__qualname__}.{name}"] = (cls, name)
        self._saved = {key: (owner, attr, _lookup(owner, attr)) for key, (owner, attr) in watched.items()}
        self._signals = _signals()
        self._flags = precision_flags()
        self._threads = threading.active_count()
        self._children = child_pids()
        self._gc_callbacks = len(gc.callbacks)
        if _MONITORING is not None:
            codes: dict[int, tuple[str, CodeType]] = {}  # by identity: equal code objects may be distinct
            for key, (_, _, value) in self._saved.items():
                for i, code in enumerate(_code_objects(value)):  # the function's own code first
                    codes.setdefault(id(code), (key if i == 0 else f"{key} ({code.co_qualname})", code))
            self._codes = dict(codes.values())
            self._monitoring = monitoring_state(self._codes)

    def check(self) -> list[str]:
        found = [key for key, (owner, attr, value) in self._saved.items() if _lookup(owner, attr) is not value]
        found = [f"replaced {key}" for key in found]
        for obj in self.instances:
            shadowed = [name for name in vars(obj) if callable(getattr(type(obj), name, None))]
            found += [f"shadowed {type(obj).__qualname__}.{name}" for name in shadowed]
        found += [f"registered global module hooks ({name})" for name in _global_hooks()]
        if torch._C._len_torch_dispatch_stack() or torch._C._len_torch_function_stack():
            found.append("left a torch dispatch or function mode active")
        if sys.gettrace() is not None or sys.getprofile() is not None:
            found.append("installed a trace or profile function")
        if threading.gettrace() is not None or threading.getprofile() is not None:
            found.append("installed a thread trace or profile function")
        now = _signals()
        found += [f"installed a handler for signal {sig}" for sig, h in now.items() if h is not self._signals.get(sig)]
        if any(signal.getitimer(timer) != (0.0, 0.0) for timer in _ITIMERS):
            found.append("started an interval timer")
        if len(gc.callbacks) != self._gc_callbacks:
            found.append("registered a gc callback")
        found += monitoring_changes(self._monitoring, monitoring_state(self._codes))
        flags = precision_flags()
        found += [f"changed {key}" for key in flags if flags[key] != self._flags[key]]
        return [entry[:SHORT_TEXT] for entry in found]  # a longer entry would break the harness's reply

    def concurrency(self) -> str:
        threads, children = threading.active_count(), child_pids() - self._children
        parts = []
        if threads > self._threads:
            parts.append(f"{threads - self._threads} new thread(s)")
        if children:
            parts.append(f"{len(children)} new child process(es)")
        return " and ".join(parts)
