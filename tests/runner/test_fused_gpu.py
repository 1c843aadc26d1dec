"""The referee's fused comparison and fingerprint kernels (runner/fused.py) against the
PyTorch path they replace, on the GPU: the same counts, messages, flags and fingerprints on
outputs built to hit every branch (NaN and Inf on either side, overflowing differences,
surviving poison markers, constant outputs, zero tolerances, sizes that are not multiples
of anything)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import torch

from htam_graph.runner import compare, fused
from htam_graph.runner.build import BuildSettings, gpu_arch

pytestmark = pytest.mark.gpu

SIZES = [1, 7, 4099, 3_000_001]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(scope="module")
def kernels() -> fused.Kernels:
    if not torch.cuda.is_available():
        pytest.fail("the gpu tests need a CUDA device")
    return fused.Kernels.build(BuildSettings.resolve().for_arch(gpu_arch()), compare._FINGERPRINT_PRIME)


@contextmanager
def using(kernels: fused.Kernels | None) -> Iterator[None]:
    saved, compare._KERNELS = compare._KERNELS, kernels
    try:
        yield
    finally:
        compare._KERNELS = saved


def _outputs(n: int, dtype: torch.dtype, case: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator("cuda").manual_seed(n * 31 + len(case))
    ref = torch.randn(n, device="cuda", generator=g).to(dtype)
    out = ref.clone()
    pick = torch.randint(0, n, (max(1, n // 1000),), device="cuda", generator=g)
    big = torch.finfo(dtype).max
    if case == "noise":
        out = (ref.float() * (1 + 1e-6 * torch.randn(n, device="cuda", generator=g))).to(dtype)
    elif case == "wrong":
        out[pick] += 0.5
    elif case == "nan_out":
        out[pick] = math.nan
    elif case == "nan_both":
        out[pick] = math.nan
        ref[pick] = math.nan
    elif case == "inf":
        ref[pick[: len(pick) // 2 + 1]] = math.inf
        out[pick[: len(pick) // 2 + 1]] = math.inf
        out[pick[len(pick) // 2 + 1 :]] = -math.inf
    elif case == "overflow":
        ref[pick] = big
        out[pick] = -big
    elif case in ("poison_nan", "poison_garbage"):
        marker = compare.marker_bits(case.removeprefix("poison_"), dtype)  # type: ignore[arg-type]
        assert marker is not None
        compare.int_view(out)[pick] = marker
    elif case == "constant":
        out = torch.full_like(ref, 1.5)
    elif case == "ties":  # every mismatch equally bad: the worst is the first one
        ref = torch.zeros(n, device="cuda", dtype=dtype)
        out = ref.clone()
        out[pick] = 1.0
    return out, ref


CASES = ["same", "noise", "wrong", "nan_out", "nan_both", "inf", "overflow", "poison_nan", "poison_garbage",
         "constant", "ties"]  # fmt: skip


def _both(kernels: fused.Kernels, fn: Callable[[], compare.Comparison]) -> tuple[compare.Comparison, ...]:
    with using(None):
        slow = fn()
    with using(kernels):
        fast = fn()
    return slow, fast


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("tol", [(None, None), (0.0, 0.0)], ids=["default-tol", "zero-tol"])
def test_the_fused_comparison_agrees_with_pytorch(kernels, dtype, case, tol):
    atol, rtol = tol
    for n in SIZES:
        out, ref = _outputs(n, dtype, case)
        poison = case.removeprefix("poison_") if case.startswith("poison_") else None
        slow, fast = _both(kernels, lambda: compare.compare(0, out, ref, atol, rtol, poison, chunk=1 << 16))  # noqa: B023
        where = f"{case}, n={n}"
        assert (fast.ok, fast.bad, fast.numel, fast.survivors) == (slow.ok, slow.bad, slow.numel, slow.survivors), where
        assert (fast.constant, fast.ref_constant) == (slow.constant, slow.ref_constant), where
        assert fast.message == slow.message, where
        assert fast.max_abs == slow.max_abs, where
        if atol != 0.0 and math.isfinite(slow.max_rel):
            assert fast.max_rel == pytest.approx(slow.max_rel, rel=1e-6), where
        for a, b in ((fast.err_sq, slow.err_sq), (fast.ref_sq, slow.ref_sq)):
            if math.isfinite(b):
                assert a == pytest.approx(b, rel=1e-4, abs=1e-30), where


def test_the_fused_path_is_taken_for_contiguous_gpu_tensors_only(kernels):
    ref = torch.randn(64, 64, device="cuda")
    assert kernels.fits(ref, ref) and kernels.compares(torch.float32)
    assert not kernels.fits(ref.t(), ref) and not kernels.compares(torch.float64)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.bool]
)
def test_the_fused_fingerprint_is_the_same_bit_for_bit(kernels, dtype):
    for n in SIZES:
        g = torch.Generator("cuda").manual_seed(n)
        t = (torch.randn(n, device="cuda", generator=g) * 1e6).to(dtype)
        with using(None):
            slow = compare.fingerprint(t, chunk=1 << 16)
        with using(kernels):
            fast = compare.fingerprint(t)
        assert fast == slow, f"n={n}"
    t = torch.randn(1000, device="cuda")
    with using(kernels):
        before = compare.fingerprint(t)
        t[999] += 1.0
        assert compare.fingerprint(t) != before
