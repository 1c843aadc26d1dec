"""The vocabularies that cross module boundaries, as types.

Everything here is a leaf: the runner, the memory, the policy and the loop import it,
and it imports nothing of theirs, so a verdict or an operator family means the same
thing wherever it travels (docs/method.md has the tables that use them).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

# Per-prefix-distance evidence is kept for distances 1..MAX_DISTANCE on every TRANSITION
# edge, so a run may use any prefix length K up to this without rewriting the graph.
MAX_DISTANCE = 8

# How a candidate file builds its CUDA: `native` (CUDA_SRC + load_cuda, nvcc -cubin) or
# `kernelbench` (torch.utils.cpp_extension.load_inline). docs/native_format.md.
CandidateFormat = Literal["native", "kernelbench"]
CANDIDATE_FORMATS: tuple[CandidateFormat, ...] = ("native", "kernelbench")


class Verdict(StrEnum):
    """Outcome of one optimization step's candidate, in the order the pipeline can fail.

    The runner returns every value but NO_CANDIDATE (the loop's, when the generator gave
    no code); the memory's reward and counters follow it (docs/method.md, "Reward")."""

    OK = "ok"  # compiled, correct, timed
    REJECTED = "rejected"  # a cheat check fired (static or dynamic); see the result's cheats
    COMPILE_ERROR = "compile_error"  # nvcc (or load_inline) failed; see the result's errors
    LOAD_ERROR = "load_error"  # the candidate file did not import or ModelNew() raised
    RUNTIME_ERROR = "runtime_error"  # forward raised, or a CUDA error (worker restarted)
    INCORRECT = "incorrect"  # wrong shape/dtype, NaN, or outside tolerance
    TIMEOUT = "timeout"  # the candidate exceeded its time budget (worker killed)
    CHECKED = "checked"  # `precheck` only: static checks passed and the CUDA compiled; not run
    NO_CANDIDATE = "no_candidate"  # the generator produced no candidate (no code, unsupported model)


class OperatorFamily(StrEnum):
    """What kind of computation a task is, as the seed bank's `applies_to` names it."""

    ANY = "any"  # a strategy that applies to every family
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    SOFTMAX = "softmax"
    NORM = "norm"
    MATMUL = "matmul"
    GEMM_EPILOGUE = "gemm_epilogue"
    CONV = "conv"
    POOLING = "pooling"
    LOSS = "loss"
    SCAN = "scan"
    ATTENTION = "attention"


class ShapeClass(StrEnum):
    """A task's coarse problem size: the bytes its reference moves (the judge's roofline count,
    runner/referee/roofline.moved_bytes) against the H200's 50 MB L2 cache (docs/method.md,
    "Conditioning on the shape class")."""

    SMALL = "small"  # fits in L2: launch latency and cache bandwidth decide
    MEDIUM = "medium"  # 1-10x L2: DRAM-bound, but a fused second pass may still find its data in L2
    LARGE = "large"  # over 10x L2: DRAM streaming decides; every extra pass costs its full DRAM time


L2_BYTES = 50_000_000  # the H200's (and H100's) L2 cache
MEDIUM_FROM = L2_BYTES  # more than this: medium
LARGE_FROM = 10 * L2_BYTES  # more than this: large


def shape_class_of(moved_bytes: int | None) -> ShapeClass | None:
    """The shape class of a task whose reference moves `moved_bytes` (None, or 0: unknown)."""
    if not moved_bytes:
        return None
    if moved_bytes > LARGE_FROM:
        return ShapeClass.LARGE
    return ShapeClass.MEDIUM if moved_bytes > MEDIUM_FROM else ShapeClass.SMALL


class Method(StrEnum):
    """How a run chooses its next step: HTAM, its ablations and the paper's baselines."""

    VANILLA = "vanilla"  # one-shot generation
    FEEDBACK = "feedback"  # refinement from feedback, no memory
    RANDOM = "random"  # a strategy drawn uniformly among those on offer, no memory
    EXPERT = "expert"  # the strategy catalog's hand-written order per family: an oracle, not a baseline
    FLAT = "flat"  # top-k similar past steps, no hierarchy
    HTAM = "htam"  # evidence conditioned on the task's operator family, shrunk to the pooled
    HTAM_NO_HIERARCHY = "htam-no-hierarchy"  # locals retrieved flat, no global choice
    HTAM_NO_LOCAL = "htam-no-local"  # globals only, no local memory
    HTAM_NO_PREFIX = "htam-no-prefix"  # scores without transition attention
    HTAM_NO_FAMILY = "htam-no-family"  # pooled evidence only, not conditioned on the operator family
