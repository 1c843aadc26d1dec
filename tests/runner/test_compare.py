"""The bounded-memory comparison on CPU tensors, with slabs small enough that every test
walks several of them (the referee runs the same code on 7 GB outputs on the GPU)."""

from __future__ import annotations

import math

import pytest
import torch

from htam_graph.runner import compare

SMALL = 7  # elements per slab: odd, so slabs cut across rows


def test_slabs_walk_every_element_in_order_without_copying_contiguous_tensors():
    t = torch.arange(60.0).reshape(3, 4, 5)
    pieces = [p for (p,) in compare.slabs(t, chunk=SMALL)]
    assert torch.equal(torch.cat(pieces), t.reshape(-1))
    assert all(p.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() for p in pieces)
    assert max(p.numel() for p in pieces) <= 20  # rows of 20 elements do not split below the outer dimension


def test_slabs_of_a_transposed_tensor_follow_its_logical_order():
    t = torch.arange(24.0).reshape(4, 6).t()  # not contiguous
    ref = t.contiguous()
    for a, b in compare.slabs(t, ref, chunk=SMALL):
        assert torch.equal(a, b)


def test_the_comparison_matches_a_whole_tensor_allclose_across_slabs():
    torch.manual_seed(0)
    ref = torch.randn(9, 11)
    out = ref.clone()
    out[2, 3] += 5e-5  # within tolerance
    out[7, 10] += 0.25  # the worst, in a late slab
    out[4, 1] += 0.125
    got = compare.compare(0, out, ref, chunk=SMALL)
    assert not got.ok and got.bad == 2 and got.numel == 99
    assert got.max_abs == pytest.approx(0.25, rel=1e-6)
    assert "2 of 99 elements outside atol=0.0001 rtol=0.0001; worst at [7, 10]" in got.message
    whole = compare.compare(0, out, ref, chunk=1 << 20)
    assert (whole.bad, whole.max_abs, whole.message) == (got.bad, got.max_abs, got.message)
    assert got.err_sq == pytest.approx(0.25**2 + 0.125**2 + 5e-5**2, rel=1e-6)


def test_kernelbench_tolerances_per_dtype():
    assert compare.tolerance(torch.float32, None, None) == (1e-4, 1e-4)
    assert compare.tolerance(torch.bfloat16, None, None) == (1e-2, 1e-2)
    assert compare.tolerance(torch.float16, 3e-3, None) == (3e-3, 1e-2)
    ref = torch.zeros(4, dtype=torch.float16)
    assert "atol=0.01" in compare.compare(0, ref + 0.05, ref).message


def test_nan_where_the_reference_is_finite_fails_and_shape_mismatch_is_named():
    ref = torch.ones(2, 2)
    out = ref.clone()
    out[0, 0] = float("nan")
    result = compare.compare(0, out, ref, chunk=SMALL)
    assert not result.ok and result.max_abs == math.inf and "(1 NaN/Inf)" in result.message
    assert compare.compare(0, ref.clone().fill_(float("nan")), ref.clone().fill_(float("nan"))).ok
    assert "got shape [4]" in compare.compare(0, torch.ones(4), ref).message


def test_integer_outputs_must_be_equal():
    ref = torch.arange(10)
    out = ref.clone()
    out[6] = 0
    got = compare.compare(0, out, ref, chunk=3)
    assert not got.ok and got.bad == 1 and "exact equality; worst at [6]: got 0, expected 6" in got.message


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_surviving_markers_are_counted_and_a_computed_nan_is_not_one(dtype):
    bits = compare.marker_bits("nan", dtype)
    assert bits is not None
    marked = torch.empty(10, dtype=dtype)
    compare.int_view(marked).fill_(bits)
    assert torch.isnan(marked).all()
    out = torch.zeros(10, dtype=dtype) / torch.zeros(10, dtype=dtype)  # NaNs arithmetic produces
    out[:3] = marked[:3]
    ref = torch.ones(10, dtype=dtype)
    assert compare.compare(0, out, ref, poison="nan", chunk=SMALL).survivors == 3
    garbage = torch.empty(4, dtype=dtype)
    compare.int_view(garbage).fill_(compare.marker_bits("garbage", dtype))
    assert torch.isfinite(garbage).all() and (garbage > 1e4).all()


def test_constant_outputs_are_seen_across_slabs():
    ref = torch.arange(20.0)
    assert compare.compare(0, torch.full((20,), 0.5), ref, chunk=SMALL).constant
    almost = torch.full((20,), 0.5)
    almost[19] = 0.25  # differs only in the last slab
    assert not compare.compare(0, almost, ref, chunk=SMALL).constant
    assert compare.compare(0, ref, ref, chunk=SMALL).ref_constant is False


def test_fingerprints_and_bitwise_equality():
    a = torch.randn(5, 13)
    b = a.clone()
    assert compare.fingerprint(a, chunk=SMALL) == compare.fingerprint(b, chunk=SMALL)
    assert compare.bitwise_equal(a, b, chunk=SMALL)
    b[4, 12] = torch.nextafter(b[4, 12], torch.tensor(math.inf))
    assert compare.fingerprint(a, chunk=SMALL) != compare.fingerprint(b, chunk=SMALL)
    assert not compare.bitwise_equal(a, b, chunk=SMALL)
    swapped = a.clone()
    swapped[0, 0], swapped[0, 1] = a[0, 1], a[0, 0]  # the same values, other places
    assert compare.fingerprint(a, chunk=SMALL) != compare.fingerprint(swapped, chunk=SMALL)


def test_deviation_and_rms_skip_non_finite_elements():
    a = torch.tensor([1.0, 2.0, float("inf"), 4.0])
    b = torch.tensor([1.0, 2.5, float("inf"), 3.0])
    assert compare.deviation(a, b, chunk=3) == pytest.approx((1.0, math.sqrt(1.25)))
    assert compare.rms(a, chunk=3) == pytest.approx(math.sqrt((1 + 4 + 16) / 3))


def test_a_large_output_is_never_copied_whole(monkeypatch):
    """A 64 M-element fp16 output with 16 M-element slabs: every upcast copy the comparison
    makes is one slab, never the whole output (the failure on KernelBench's 7 GB outputs
    was a float64 copy of each)."""
    n = 4 * compare.CHUNK
    ref = torch.rand(n, dtype=torch.float16)
    out = ref.clone()
    out[n - 1] += 1.0
    sizes = []
    to = torch.Tensor.to

    def recording(self, *args, **kwargs):
        sizes.append(self.numel())
        return to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", recording)
    got = compare.compare(0, out, ref)
    assert not got.ok and got.bad == 1 and f"worst at [{n - 1}]" in got.message
    assert sizes and max(sizes) <= compare.CHUNK


def test_sums_of_squares_do_not_overflow_in_float32():
    """Values whose squares overflow float32 (|x| > 1.8e19) still give finite norms."""
    ref = torch.full((10,), 1e30)
    out = ref.clone()
    out[3] = 2e30
    got = compare.compare(0, out, ref, chunk=SMALL)
    assert got.ref_sq == pytest.approx(10 * 1e60, rel=1e-5)
    assert got.err_sq == pytest.approx(1e60, rel=1e-5)
    assert got.norm_error == pytest.approx(math.sqrt(0.1), rel=1e-5)
