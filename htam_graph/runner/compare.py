"""Comparing a candidate's outputs with the reference's in bounded memory.

Outputs of KernelBench tasks reach 7-8 GB (level 1 tasks 34, 36, 38, 39): a float64 copy of
a whole output does not fit beside the reference's, so everything here walks both tensors
in slabs of at most CHUNK elements (a slab is a view, copied only when the tensor is not
contiguous) and keeps running statistics. Works on any device, so the CPU tests run the
same code the referee runs on the GPU.

On the GPU the referee uses fused kernels instead (runner/fused.py): one pass over a
contiguous tensor, the same statistics, the same counts.

Also here: the marker patterns the candidate's process poisons free memory with (the
referee looks for survivors), bitwise equality and fingerprints of outputs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from htam_graph.runner.build import BuildSettings
from htam_graph.runner.fused import Kernels
from htam_graph.runner.native import CudaBuildError
from htam_graph.runner.protocol import PoisonName

logger = logging.getLogger(__name__)

CHUNK = 1 << 24  # elements per slab: 64 MB per float32 temporary (128 MB for float64 outputs)
_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_FINGERPRINT_PRIME = 65_521

# NaNs with a payload no arithmetic produces (CUDA's canonical NaN is 0x7fffffff), so a
# surviving marker is told apart from a NaN the kernel computed.
_NAN_MARKER = {
    torch.float32: 0x7FD5A5A5,
    torch.float16: 0x7E5A,
    torch.bfloat16: 0x7FDA,
    torch.float64: 0x7FF8A5A5A5A5A5A5,
}
_GARBAGE_VALUE = {torch.float32: 1.2345e30, torch.float16: 3.0e4, torch.bfloat16: 1.2345e30, torch.float64: 1.2345e300}


# The fused kernels (runner/fused.py) once the referee built them: one pass per comparison
# or fingerprint of a contiguous tensor on the GPU instead of the PyTorch ops below.
_KERNELS: Kernels | None = None


def enable_kernels(settings: BuildSettings) -> bool:
    """Build the fused kernels for the current GPU and use them from now on (the referee,
    once). Without them (a failed build: logged) the PyTorch path stays, with the same results."""
    global _KERNELS
    if _KERNELS is None:
        try:
            _KERNELS = Kernels.build(settings, _FINGERPRINT_PRIME)
        except CudaBuildError as exc:
            logger.warning("the fused comparison kernels did not build; comparing with PyTorch ops: %s", exc)
    return _KERNELS is not None


def int_view(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bits as a signed integer tensor of the same itemsize (bool as uint8)."""
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.view(_INT_OF_SIZE[t.dtype.itemsize])


def _signed(bits: int, size: int) -> int:
    return int.from_bytes(bits.to_bytes(size, "little"), "little", signed=size > 1)


def marker_bits(poison: PoisonName, dtype: torch.dtype) -> int | None:
    """The bit pattern of one element of poisoned memory (as int_view reads it)."""
    size = dtype.itemsize
    if dtype in _NAN_MARKER:
        if poison == "nan":
            return _signed(_NAN_MARKER[dtype], size)
        value = torch.tensor([_GARBAGE_VALUE[dtype]], dtype=dtype)
        return int(value.view(_INT_OF_SIZE[size]).item())
    if size not in _INT_OF_SIZE or dtype.is_complex:
        return None
    byte = 0xA5 if poison == "nan" else 0x5A
    return _signed(int.from_bytes(bytes([byte]) * size, "little"), size)


def tolerance(dtype: torch.dtype, atol: float | None, rtol: float | None) -> tuple[float, float]:
    """KernelBench's: 1e-2 for half types, 1e-4 otherwise (explicit values win)."""
    default = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4
    return (default if atol is None else atol), (default if rtol is None else rtol)


def slabs(*tensors: torch.Tensor, chunk: int = CHUNK) -> Iterator[tuple[torch.Tensor, ...]]:
    """Flat pieces of same-shaped tensors, in row-major order, at most about `chunk`
    elements each: slices along the outermost dimensions, so only a piece is ever copied."""
    shape = tensors[0].shape
    if any(t.shape != shape for t in tensors):
        raise ValueError("slabs of tensors of different shapes")
    if tensors[0].numel() == 0:
        return
    if len(shape) == 0:
        yield tuple(t.reshape(1) for t in tensors)
        return
    inner = math.prod(shape[1:])
    if inner > chunk:
        for i in range(shape[0]):
            yield from slabs(*(t[i] for t in tensors), chunk=chunk)
        return
    rows = max(1, chunk // max(inner, 1))
    for start in range(0, shape[0], rows):
        yield tuple(t[start : start + rows].reshape(-1) for t in tensors)


@dataclass
class Comparison:
    """allclose of one output with NaN/Inf where the reference is finite counted as wrong,
    plus what the cheat checks and the precision probe read off the same pass."""

    ok: bool
    max_abs: float
    max_rel: float
    message: str
    bad: int = 0
    numel: int = 0
    err_sq: float = 0.0  # sum of squared differences where both are finite
    ref_sq: float = 0.0  # sum of squares of the reference where finite
    survivors: int = 0  # elements still holding the marker where the reference does not
    constant: bool = False  # every element of the output has the same bits
    ref_constant: bool = False

    @property
    def norm_error(self) -> float:
        """||out - ref|| / ||ref|| over the finite elements."""
        return math.sqrt(self.err_sq) / math.sqrt(self.ref_sq) if self.ref_sq > 0 else math.sqrt(self.err_sq)


def _where(index: int, ref: torch.Tensor) -> str:
    return f"output {index} (shape {list(ref.shape)}, {str(ref.dtype).removeprefix('torch.')})"


# A slab's statistics, one float64 row computed on the tensors' device; all slabs' rows
# cross to the host together, so a comparison waits for the device once, not per statistic.
# The squared norms are kept as (norm of x / s, s) with s = max |x|, so a sum of squares of
# float32 values cannot overflow: the host squares norm * s in Python floats.
_SURVIVORS, _OUT_VARIES, _REF_VARIES, _BAD, _NONFINITE_BAD, _MAX_ABS, _MAX_REL = range(7)
_ERR_NORM, _ERR_SCALE, _REF_NORM, _REF_SCALE, _WORST, _WORST_AT, _GOT, _WANT = range(7, 15)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 stays float64; every narrower float is compared in float32 (as KernelBench's
    allclose does): half the memory traffic of float64, and float32 represents every half,
    bfloat16 and float32 value and their differences to well under the 1e-4 tolerance."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def compare(
    index: int,
    out: torch.Tensor,
    ref: torch.Tensor,
    atol: float | None = None,
    rtol: float | None = None,
    poison: PoisonName | None = None,
    chunk: int = CHUNK,
) -> Comparison:
    """Compare output `index` of the candidate with the reference's, slab by slab."""
    where = _where(index, ref)
    if out.shape != ref.shape or out.dtype != ref.dtype:
        layout = f"shape {list(out.shape)}, {str(out.dtype).removeprefix('torch.')}"
        return Comparison(False, math.inf, math.inf, f"{where}: got {layout}", bad=ref.numel(), numel=ref.numel())
    if out.is_complex():
        out, ref = torch.view_as_real(out), torch.view_as_real(ref)
    a_tol, r_tol = tolerance(ref.dtype, atol, rtol)
    marker = marker_bits(poison, ref.dtype) if poison is not None else None
    floating = ref.is_floating_point()
    kernels = _KERNELS
    if kernels is not None and floating and kernels.compares(ref.dtype) and kernels.fits(out, ref):
        rows = [kernels.compare_row(out, ref, a_tol, r_tol, marker)]
    else:
        rows = _slab_rows(out, ref, a_tol, r_tol, marker, chunk)
    stats = torch.stack(rows).tolist() if rows else []
    numel = ref.numel()
    bad = int(sum(r[_BAD] for r in stats))
    nonfinite_bad = int(sum(r[_NONFINITE_BAD] for r in stats))
    max_abs = max_rel = 0.0
    for r in stats:  # Python's max, slab after slab: a NaN statistic never wins
        max_abs, max_rel = max(max_abs, r[_MAX_ABS]), max(max_rel, r[_MAX_REL])
    result = Comparison(
        ok=bad == 0,
        max_abs=math.inf if nonfinite_bad else max_abs,
        max_rel=math.inf if nonfinite_bad else max_rel,
        message="",
        bad=bad,
        numel=numel,
        err_sq=sum((r[_ERR_NORM] * r[_ERR_SCALE]) ** 2 for r in stats),
        ref_sq=sum((r[_REF_NORM] * r[_REF_SCALE]) ** 2 for r in stats),
        survivors=int(sum(r[_SURVIVORS] for r in stats)),
        constant=numel >= 2 and not any(r[_OUT_VARIES] for r in stats),
        ref_constant=numel >= 2 and not any(r[_REF_VARIES] for r in stats),
    )
    if bad:
        # The worst mismatch: the first slab's worst among those with the largest badness.
        worst = max((r for r in stats if r[_BAD]), key=lambda r: r[_WORST])
        at, got, want = int(worst[_WORST_AT]), worst[_GOT], worst[_WANT]
        idx = [int(i) for i in torch.unravel_index(torch.tensor(at), ref.shape)] if ref.dim() else []
        tol = f"atol={a_tol:g} rtol={r_tol:g}" if floating else "exact equality"
        nonfinite = f" ({nonfinite_bad} NaN/Inf)" if nonfinite_bad else ""
        result.message = (
            f"{where}: {bad} of {numel} elements outside {tol}{nonfinite}; "
            f"worst at {idx}: got {got:.6g}, expected {want:.6g}"
        )
    return result


def _slab_rows(
    out: torch.Tensor, ref: torch.Tensor, a_tol: float, r_tol: float, marker: int | None, chunk: int
) -> list[torch.Tensor]:
    """The statistics row of each slab, in PyTorch ops (the fused kernel's one row, slab by slab)."""
    floating = ref.is_floating_point()
    rows: list[torch.Tensor] = []
    firsts: tuple[torch.Tensor, torch.Tensor] | None = None
    offset = 0
    for o_slab, r_slab in slabs(out, ref, chunk=chunk):
        o_bits, r_bits = int_view(o_slab), int_view(r_slab)
        if firsts is None:
            firsts = (o_bits[:1].clone(), r_bits[:1].clone())
        survivors = ((o_bits == marker) & (r_bits != marker)).sum() if marker is not None else _ZERO
        head: list[torch.Tensor | float] = [survivors, (o_bits != firsts[0]).any(), (r_bits != firsts[1]).any()]
        if floating:
            dtype = _compute_dtype(ref.dtype)
            tail: list[torch.Tensor | float] = [*_float_slab(o_slab.to(dtype), r_slab.to(dtype), a_tol, r_tol, offset)]
        else:
            tail = _exact_slab(o_slab, r_slab, offset)
        rows.append(torch.stack([_scalar(x, o_slab.device) for x in head + tail]))
        offset += o_slab.numel()
    return rows


_ZERO = 0.0


def _scalar(x: torch.Tensor | float, device: torch.device) -> torch.Tensor:
    """A 0-d float64 tensor on `device`, made there (a host value is a fill, not a copy)."""
    if isinstance(x, torch.Tensor):
        return x.double()
    return torch.full((), x, dtype=torch.float64, device=device)


def _scaled_norm(x: torch.Tensor, largest: torch.Tensor) -> list[torch.Tensor]:
    """[||x / s||, s] with s = largest (max |x|, in x's dtype, kept above 0), so no square
    of a float32 value overflows; the host multiplies them back in Python floats."""
    scale = largest.clamp_min(torch.finfo(x.dtype).tiny)
    return [torch.linalg.vector_norm(x / scale), scale]


def _float_slab(o: torch.Tensor, r: torch.Tensor, a_tol: float, r_tol: float, offset: int) -> list[torch.Tensor]:
    """The float statistics of one slab (torch.isclose's semantics, equal_nan=True), as
    0-d tensors on the device in the order _BAD .. _WANT: no value crosses to the host."""
    close = torch.isclose(o, r, rtol=r_tol, atol=a_tol, equal_nan=True)
    infinite = ~(torch.isfinite(o) & torch.isfinite(r))
    far = ~close
    diff = (o - r).abs_().masked_fill_(infinite, 0.0)  # where both are finite
    max_abs = diff.max()
    err = _scaled_norm(diff, max_abs)
    ref_abs = r.abs().masked_fill_(~torch.isfinite(r), 0.0)
    ref = _scaled_norm(ref_abs, ref_abs.max())
    # Relative error against |ref| + atol, so near-zero references do not blow it up.
    max_rel = (diff / ref_abs.add_(a_tol)).max()
    # The worst mismatch: a non-finite one first, else the largest absolute difference.
    badness = diff.masked_fill_(infinite, math.inf).masked_fill_(close, -1.0)
    at = badness.argmax().reshape(1)
    return [
        far.sum(),
        (far & infinite).sum(),
        max_abs,
        max_rel,
        *err,
        *ref,
        badness.take(at)[0],
        at[0] + offset,
        o.take(at)[0],
        r.take(at)[0],
    ]


def _exact_slab(o: torch.Tensor, r: torch.Tensor, offset: int) -> list[torch.Tensor | float]:
    differ = o != r
    count = differ.sum()
    first = differ.to(torch.uint8).argmax().reshape(1)  # the first differing element (0 when none)
    mismatch = (count > 0).double()
    zero = [_ZERO] * 4  # no norms: integers are compared exactly
    return [count, _ZERO, mismatch, mismatch, *zero, 1.0, first[0] + offset, o.take(first)[0], r.take(first)[0]]


def deviation(a: torch.Tensor, b: torch.Tensor, chunk: int = CHUNK) -> tuple[float, float]:
    """(max |a - b|, ||a - b||) over the elements where both are finite, in float64."""
    rows = []
    for x, y in slabs(a, b, chunk=chunk):
        x64, y64 = x.double(), y.double()
        diff = torch.where(torch.isfinite(x64) & torch.isfinite(y64), (x64 - y64).abs(), torch.zeros_like(x64))
        rows.append(torch.stack([diff.max(), diff.square().sum()]))
    stats = torch.stack(rows).tolist() if rows else []
    return max((r[0] for r in stats), default=0.0), math.sqrt(sum(r[1] for r in stats))


def rms(t: torch.Tensor, chunk: int = CHUNK) -> float:
    """Root mean square over the finite elements."""
    rows = []
    for (x,) in slabs(t, chunk=chunk):
        x64 = x.double()
        finite = torch.isfinite(x64)
        rows.append(torch.stack([torch.where(finite, x64, torch.zeros_like(x64)).square().sum(), finite.sum()]))
    stats = torch.stack(rows).tolist() if rows else []
    total, count = sum(r[0] for r in stats), sum(r[1] for r in stats)
    return math.sqrt(total / count) if count else 0.0


def bitwise_equal(a: torch.Tensor, b: torch.Tensor, chunk: int = CHUNK) -> bool:
    """Same shape, dtype and bits everywhere (NaNs included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return all(bool(torch.equal(int_view(x), int_view(y))) for x, y in slabs(a, b, chunk=chunk))


_WEIGHTS: dict[torch.device, torch.Tensor] = {}  # i % prime + 1 for i < its length, per device


def _weights(offset: int, count: int, device: torch.device) -> torch.Tensor:
    """The fingerprint's position weights (i % prime + 1) for positions offset .. offset +
    count, a slice of one tensor kept per device (they repeat with the prime's period)."""
    start = offset % _FINGERPRINT_PRIME
    cached = _WEIGHTS.get(device)
    if cached is None or cached.numel() < start + count:
        length = max(start + count, min(CHUNK, 1 << 20) + _FINGERPRINT_PRIME)
        cached = (torch.arange(length, device=device) % _FINGERPRINT_PRIME + 1).to(torch.int32)
        _WEIGHTS[device] = cached
    return cached[start : start + count]


def fingerprint(t: torch.Tensor, chunk: int = CHUNK) -> tuple[object, ...]:
    """A position-sensitive checksum of the bits (plus shape and dtype): equal tensors have
    equal fingerprints, and different ones almost surely do not. The sums wrap around in
    int64 (the same on every device) and cross to the host once."""
    kernels = _KERNELS
    if kernels is not None and kernels.fingerprints(t) and kernels.fits(t):
        return (str(t.dtype), *t.shape, *kernels.fingerprint(t))
    sums = torch.zeros(2, dtype=torch.int64, device=t.device)
    offset = 0
    for (piece,) in slabs(t, chunk=chunk):
        bits = int_view(piece).to(torch.int64)
        weights = _weights(offset, bits.numel(), bits.device)
        sums += torch.stack([bits.sum(), (bits * weights).sum()])
        offset += bits.numel()
    total, weighted = sums.tolist()
    return (str(t.dtype), *t.shape, total, weighted)
