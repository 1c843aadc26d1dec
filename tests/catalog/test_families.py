"""Operator-family recognition reads the reference's graph, never names: the built-in
suite and tasks written here, the dispatcher fallback, unsupported models with their
reason, and renaming invariance."""

from __future__ import annotations

import re

import pytest

from htam_graph.catalog.families import recognize
from htam_graph.catalog.ir import Unsupported
from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.program import ConvStage, GemmStage, build_program
from htam_graph.catalog.render import conv_smem_applies
from htam_graph.catalog.variants import render, singles
from htam_graph.vocab import OperatorFamily as F
from tests.catalog.variants import own, suite

SUITE = {
    "level1/1_Square_matmul": F.MATMUL,
    "level1/2_Batched_matmul": F.MATMUL,
    "level1/3_Matrix_vector": F.MATMUL,
    "level1/4_Sum_reduction_dim": F.REDUCTION,
    "level1/5_Max_reduction_dim": F.REDUCTION,
    "level1/6_Mean_reduction_dim": F.REDUCTION,
    "level1/7_Softmax": F.SOFTMAX,
    "level1/8_LogSoftmax": F.SOFTMAX,
    "level1/9_LayerNorm": F.NORM,
    "level1/10_RMSNorm": F.NORM,
    "level1/11_GELU": F.ELEMENTWISE,
    "level1/12_LayerNorm_fp16": F.NORM,
    "level1/13_MaxPool2d": F.POOLING,
    "level1/14_AvgPool2d": F.POOLING,
    "level1/15_CrossEntropyLoss": F.LOSS,
    "level1/16_MSELoss_per_sample": F.LOSS,
    "level1/17_KLDivLoss_per_sample": F.LOSS,
    "level1/18_HuberLoss_per_sample": F.LOSS,
    "level1/19_ReLU": F.ELEMENTWISE,
    "level1/20_Cumsum": F.SCAN,
    "level1/21_Cumprod": F.SCAN,
    "level2/1_GELU_tanh_chain": F.ELEMENTWISE,
    "level2/2_Swish_Bias_Scale": F.ELEMENTWISE,
    "level2/3_Gemm_Bias_ReLU": F.GEMM_EPILOGUE,
    "level2/4_Gemm_GELU": F.GEMM_EPILOGUE,
    "level2/5_Gemm_Scale_Residual": F.GEMM_EPILOGUE,
    "level2/6_Conv2d_Bias_ReLU": F.CONV,
    "level2/7_Add_RMSNorm_bf16": F.NORM,
    "level2/8_Bmm_Scale_Softmax": F.GEMM_EPILOGUE,
}
OWN = {
    "conv1d_strided": F.CONV,
    "conv3d_bias_relu_scale": F.CONV,
    "conv3d_strided_grouped": F.CONV,
    "batchnorm1d_eval": F.ELEMENTWISE,  # eval mode: the running statistics, no reduction
    "batchnorm2d_train": F.NORM,
    "conv_batchnorm_train": F.CONV,
    "conv_depthwise": F.CONV,
    "conv_relu_maxpool": F.CONV,
    "conv_transpose1d": F.CONV,
    "conv_transpose2d": F.CONV,
    "conv_transpose1d_stride1": F.CONV,
    "conv_transpose2d_stride1": F.CONV,
    "conv_transpose3d": F.CONV,
    "conv_transpose3d_stride1": F.CONV,
    "conv_strided_dilated": F.CONV,
    "ew_activations": F.ELEMENTWISE,
    "ew_broadcast_where": F.NORM,
    "ew_multiply_alias": F.ELEMENTWISE,  # a row mean broadcast back over its own space
    "ew_fp16_swish": F.ELEMENTWISE,
    "ew_selu_gelu_tanh": F.ELEMENTWISE,
    "control_flow_dispatch": F.ELEMENTWISE,
    "gemm_groupnorm_hardtanh": F.GEMM_EPILOGUE,
    "gemm_sigmoid_sum": F.GEMM_EPILOGUE,
    "gemm_logsoftmax": F.GEMM_EPILOGUE,
    "gemm_batchnorm_train": F.GEMM_EPILOGUE,
    "matmul_3d_2d": F.GEMM_EPILOGUE,
    "matmul_tall_k": F.MATMUL,
    "matmul_transposed_scale": F.GEMM_EPILOGUE,
    "matmul_transposed_a": F.GEMM_EPILOGUE,
    "loss_cosine": F.LOSS,
    "loss_kl_batchmean": F.LOSS,
    "loss_nll_sum": F.LOSS,
    "loss_smooth_l1_bce": F.LOSS,
    "loss_triplet": F.LOSS,
    "loss_hinge": F.REDUCTION,  # written as clamp and mean: no loss function in the graph
    "norm_frobenius": F.NORM,
    "norm_group": F.NORM,
    "norm_instance": F.NORM,
    "norm_l1": F.NORM,
    "norm_l2": F.NORM,
    "norm_layer_manual": F.NORM,
    "pool_adaptive_avg": F.REDUCTION,  # global average pooling is a mean
    "pool_avg_exclude_pad": F.POOLING,
    "pool_max1d_dilated": F.POOLING,
    "pool_max3d": F.POOLING,
    "pool_max2d_ceil": F.POOLING,
    "red_all_mean": F.REDUCTION,
    "red_argmax": F.REDUCTION,
    "red_logsumexp_std": F.REDUCTION,
    "red_min_last": F.REDUCTION,
    "red_prod": F.REDUCTION,
    "scan_dim0": F.SCAN,
    "scan_masked": F.SCAN,
    "scan_reverse": F.SCAN,
    "softmax_bf16": F.SOFTMAX,
    "softmax_dim1_4d": F.SOFTMAX,
    "softmax_manual": F.SOFTMAX,
}
UNSUPPORTED = {
    "unsupported_attention": "scaled_dot_product_attention",
    "unsupported_dropout": "dropout with p=0.5",
    "unsupported_slicing": "indexing or slicing",
}


@pytest.mark.parametrize("task_id", sorted(SUITE))
def test_the_builtin_suite(task_id: str) -> None:
    rec = recognize(suite()[task_id])
    assert (rec.family, rec.frontend) == (SUITE[task_id], "fx")


@pytest.mark.parametrize("name", sorted(OWN))
def test_tasks_written_here(name: str) -> None:
    assert recognize(own()[name]).family == OWN[name]


def test_every_task_here_is_classified() -> None:
    assert set(own()) == set(OWN) | set(UNSUPPORTED)


@pytest.mark.parametrize("name", ["gemm_batchnorm_train", "conv_batchnorm_train"])
def test_an_anchor_read_by_statistics_is_computed_once(name: str) -> None:
    """A batch norm reads its input's statistics: with every fusion on, the final pass
    reads the GEMM's (or convolution's) stored output instead of fusing a second copy of it."""
    rec = recognize(own()[name])
    program = build_program(rec.output, rec.params, Knobs(fuse_prologue=True, fuse_epilogue=True).fusion)
    anchors = [s for s in program.stages if isinstance(s, (GemmStage, ConvStage))]
    assert len(anchors) == 1, [type(s).__name__ for s in program.stages]


@pytest.mark.parametrize("name", ["conv3d_strided_grouped", "conv_transpose3d_stride1"])
def test_a_3d_convolution_keeps_the_direct_kernel(name: str) -> None:
    """3-D convolutions carry their depth into the stage and are never given the 2-D
    shared-memory tiles (the strategy that asks for them does not compose)."""
    rec = recognize(own()[name])
    (conv,) = (s for s in build_program(rec.output, rec.params, Knobs().fusion).stages if isinstance(s, ConvStage))
    assert conv.D > 1 and conv.KD == 3 and conv.OD > 1 and len(conv.stride) == 3
    assert not conv_smem_applies(conv)
    assert not {"algorithmic.direct_conv_smem", "data_reuse.smem_tiling"} & set(singles(rec))
    assert "__shared__" not in render(rec, Knobs(smem_tile=True))


def test_control_flow_is_read_through_the_dispatcher() -> None:
    rec = recognize(own()["control_flow_dispatch"])
    assert rec.frontend == "dispatch" and "torch.fx could not read" in rec.notes[0]


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_models_say_why(name: str) -> None:
    with pytest.raises(Unsupported, match=re.escape(UNSUPPORTED[name])):
        recognize(own()[name])


def _renamed(source: str) -> str:
    """The same model under other names: its docstrings and a module-level constant (the
    task's file name and id never reach recognition: it reads the source)."""
    source = re.sub(r'"""[^"]*"""', '"""Some other description."""', source)
    return re.sub(r"\bbatch_size\b", "rows_here", source)


@pytest.mark.parametrize("task_id", ["level1/19_ReLU", "level1/7_Softmax", "level2/3_Gemm_Bias_ReLU"])
def test_renaming_a_task_changes_no_candidate(task_id: str) -> None:
    source = suite()[task_id]
    renamed = _renamed(source)
    assert renamed != source
    knobs = Knobs(fuse_epilogue=True, reg_tile=True, vec=True, fuse_stats=True)
    assert render(recognize(renamed), knobs) == render(recognize(source), knobs)


def test_renaming_a_layer_renames_only_its_parameters() -> None:
    source = suite()["level2/3_Gemm_Bias_ReLU"]
    renamed = source.replace("self.linear", "self.proj").replace("(self, x", "(self, inp").replace("(x)", "(inp)")
    a, b = (render(recognize(s), Knobs(fuse_epilogue=True)) for s in (source, renamed))
    cuda = re.compile(r'CUDA_SRC = r"""(.*?)"""', re.DOTALL)
    assert cuda.search(a)[1] == cuda.search(b)[1]  # type: ignore[index]
    assert "self.proj.weight" in b and "self.linear" not in b and "def forward(self, inp)" in b
