"""Where the catalog keeps data in registers: a row between its passes (row.j2 with
`row_regs`), the inputs adjacent pooling windows share (pool_cols.j2 with `window_reuse`).
The kernels' results are checked on the CPU simulator (test_kernels_cpu.py); these tests
pin down the shapes each variant takes and where it declines."""

from __future__ import annotations

import re

import pytest

from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.strategies import apply
from htam_graph.catalog.variants import recognized, render, shrink
from tests.catalog.variants import suite

FUSED = {"fuse_prologue": True, "fuse_epilogue": True, "fuse_stats": True}


def _candidate(task: str, sizes: tuple[int, ...] | None = None, **changes: object) -> str:
    source = suite()[task] if sizes is None else shrink(suite()[task], sizes)
    rec = recognized(source)
    assert rec is not None, task
    return render(rec, Knobs(**changes))


@pytest.mark.parametrize(
    ("task", "block", "arrays"),
    [
        # 32768 floats a row: 16-byte packs, 1024 threads of 8 packs (32 registers)
        ("level1/7_Softmax", 1024, ["Pack<float, 4> reg0[8]"]),
        # 16384 floats: 512 threads of 8 packs
        ("level1/8_LogSoftmax", 512, ["Pack<float, 4> reg0[8]"]),
        # 8192 halves: the knobs' 256 threads hold 4 packs of 8 halves (16 registers)
        ("level1/12_LayerNorm_fp16", 256, ["Pack<__half, 8> reg0[4]"]),
        # two bf16 inputs of 4096: 2 packs each
        ("level2/7_Add_RMSNorm_bf16", 256, ["Pack<__nv_bfloat16, 8> reg0[2]", "Pack<__nv_bfloat16, 8> reg1[2]"]),
    ],
)
def test_a_row_in_registers_takes_the_smallest_block_its_share_fits(task: str, block: int, arrays: list[str]) -> None:
    code = _candidate(task, **FUSED, vec=True, row_regs=True)
    assert re.findall(r"Pack<[\w:]+, \d+> reg\d\[\d+\]", code) == arrays
    assert f"__launch_bounds__({block})" in code
    assert f"({block},)" in code  # the launch's block
    assert "#pragma unroll\n        for (int it = 0;" in code  # every pass unrolled: constant indices


def test_a_row_too_long_for_registers_is_left_as_it_was() -> None:
    """1M floats a row (layer norm over two dims) do not fit 1024 threads' 32 registers:
    the strategy changes nothing, so it does not compose."""
    rec = recognized(suite()["level1/9_LayerNorm"])
    assert rec is not None
    knobs = Knobs(fuse_stats=True, vec=True)
    result = apply(rec, knobs, "data_reuse.row_in_registers", lambda k: render(rec, k))
    assert result.reason == "changes nothing in this program's kernels"


def test_a_single_pass_row_has_nothing_to_keep() -> None:
    """Statistics and output in two kernels read the row once each: no register arrays."""
    assert "reg0[" not in _candidate("level1/10_RMSNorm", vec=True, row_regs=True)


@pytest.mark.parametrize(("task", "cols"), [("level1/13_MaxPool2d", 2), ("level1/14_AvgPool2d", 2)])
def test_pooling_windows_share_their_inputs_across_a_threads_outputs(task: str, cols: int) -> None:
    code = _candidate(task, window_reuse=True)
    assert "float xs[" in code
    assert f"const {'long long' if 'long long t' in code else 'int'} i = t * {cols} + j;" in code


def test_window_reuse_declines_an_odd_last_dim() -> None:
    """Output rows of odd length cannot be cut into pairs: the strategy does not compose."""
    rec = recognized(shrink(suite()["level1/13_MaxPool2d"], (2, 3, 10, 10)))  # 5 outputs a row
    assert rec is not None
    assert apply(rec, Knobs(), "algorithmic.sliding_window_reuse", lambda k: render(rec, k)).reason
