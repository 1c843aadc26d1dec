"""When a row stage runs inside its GEMM's kernel (gemm_row.j2), and when it must not."""

from __future__ import annotations

from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.program import GemmStage, RowStage, build_program, gemm_row_fusable
from htam_graph.catalog.variants import recognized, render
from tests.catalog.variants import suite

FUSED = Knobs(tf32x3=True, fuse_epilogue=True, fuse_stats=True)

TEMPLATE = """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, a, b):
        s = a @ b.t()
        return {body}
def get_inputs():
    return [torch.randn(40, {k}), torch.randn({n}, {k})]
def get_init_inputs():
    return []
"""


def _fusable(body: str, n: int = 64, k: int = 32) -> str:
    rec = recognized(TEMPLATE.format(body=body, n=n, k=k))
    assert rec is not None
    program = build_program(rec.output, rec.params, FUSED.fusion)
    i = next(i for i, st in enumerate(program.stages) if isinstance(st, GemmStage))
    gemm, row = program.stages[i], program.stages[i + 1]
    assert isinstance(gemm, GemmStage) and isinstance(row, RowStage)
    return gemm_row_fusable(gemm, row, program.stages[i + 2 :], program.output, 1024, 128)


def test_attention_scores_become_one_kernel_that_never_writes_the_scores() -> None:
    rec = recognized(suite()["level2/8_Bmm_Scale_Softmax"])
    assert rec is not None
    fused = render(rec, FUSED)
    assert 'launch("k0_gemm_row"' in fused and 'launch("k1_' not in fused
    assert fused.count("torch.empty((64, 1024, 1024)") == 1  # the output only
    two = render(rec, Knobs(tf32x3=True, fuse_epilogue=True))  # without fuse_stats: the GEMM, then a row kernel
    assert "k0_gemm" in two and "gemm_row" not in two and two.count("torch.empty((64, 1024, 1024)") == 2
    assert "gemm_row" not in render(rec, Knobs(fuse_epilogue=True, fuse_stats=True))  # CUDA-core GEMM: no fusion


def test_a_row_stage_fuses_only_over_whole_rows_of_a_result_nothing_else_reads() -> None:
    assert _fusable("torch.softmax(s, dim=-1)") == ""
    assert _fusable("torch.nn.functional.layer_norm(s, (64,))") == ""
    assert _fusable("torch.softmax(s, dim=-1) + s") == ""  # s is the element the kernel holds
    assert "used after" in _fusable("torch.softmax(s, dim=-1) * s.amax(dim=-1, keepdim=True)")
    assert "rows are not" in _fusable("torch.softmax(s, dim=0)")
    assert "at most 1024" in _fusable("torch.softmax(s, dim=-1)", n=2048)
    assert "multiple of 8" in _fusable("torch.softmax(s, dim=-1)", k=12)
    assert "at most 65535" in _fusable_batched(70000)


def _fusable_batched(batch: int) -> str:
    source = TEMPLATE.replace("a @ b.t()", "torch.bmm(a, b.transpose(1, 2))").format(
        body="torch.softmax(s, dim=-1)", n=8, k=8
    )
    source = source.replace(
        "torch.randn(40, 8), torch.randn(8, 8)", f"torch.randn({batch}, 2, 8), torch.randn({batch}, 8, 8)"
    )
    rec = recognized(source)
    assert rec is not None
    program = build_program(rec.output, rec.params, FUSED.fusion)
    gemm, row = program.stages[0], program.stages[1]
    assert isinstance(gemm, GemmStage) and isinstance(row, RowStage)
    return gemm_row_fusable(gemm, row, program.stages[2:], program.output, 1024, 128)
