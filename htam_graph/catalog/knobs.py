"""The variant knobs of a catalog candidate: what the kernel templates change.

A candidate is (the task's program, these knobs). The base kernel is `Knobs()`; each local
strategy of the seed bank that the catalog implements sets some knobs (catalog/strategies.py),
and steps compose: a step applies its strategy to the knobs of the run's best candidate,
which the candidate's header records.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from htam_graph.catalog.program import Fusion


class Knobs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # fusion
    fuse_prologue: bool = Field(False, description="elementwise ops before an anchor run inside its kernel")
    fuse_epilogue: bool = Field(False, description="elementwise ops after an anchor run as it stores")
    fuse_stats: bool = Field(False, description="row statistics and their elementwise use in one kernel")
    # memory access
    vec: bool = Field(False, description="16-byte loads and stores")
    ldg: bool = Field(False, description="read-only loads through __ldg")
    streaming: bool = Field(False, description="streaming cache hints (__ldcs/__stcs) for touch-once data")
    # parallelism
    grid_stride: bool = Field(False, description="grid-stride loops over a grid sized to the GPU")
    ilp: int = Field(1, description="independent items per thread per iteration (1 or 4)")
    rows: Literal["block", "warp"] = Field("block", description="a block or a warp per row")
    split: bool = Field(False, description="long rows split over several blocks, partials combined in order")
    split_k: bool = Field(False, description="a GEMM's K split over blocks, partials summed in order")
    persistent: bool = Field(False, description="a grid sized to the SMs that loops over rows or tiles")
    # reductions
    reduce: Literal["tree", "shuffle", "two_level"] = Field("tree", description="block reduction")
    online: bool = Field(False, description="max and sum of exponentials in one pass (online softmax)")
    welford: bool = Field(False, description="mean and variance in one pass (Welford)")
    row_regs: bool = Field(
        False, description="a row's inputs kept in registers between passes (when a thread's share fits in 32)"
    )
    row_cache: bool = Field(False, description="a row's inputs kept in shared memory between passes")
    smem_opt_in: bool = Field(False, description="dynamic shared memory above 48 KB")
    scan: Literal["serial", "block"] = Field("serial", description="a thread per row, or a block-wide scan")
    # compute
    specialize: bool = Field(False, description="sizes as compile-time constants")
    index32: bool = Field(False, description="32-bit index arithmetic where every size fits")
    fast_math: bool = Field(False, description="intrinsic transcendentals (16-bit tasks only)")
    # launch configuration
    block: int = Field(256, description="threads per block of elementwise and row kernels")
    launch_bounds: bool = Field(False, description="__launch_bounds__ on every kernel")
    waves: bool = Field(False, description="grid-stride grids in whole waves over the SMs")
    # data reuse (GEMM, convolution)
    reg_tile: bool = Field(False, description="register-tiled outputs (8x8 per thread in GEMMs)")
    smem_tile: bool = Field(False, description="shared-memory input tiles (convolution)")
    window_reuse: bool = Field(
        False, description="adjacent pooling outputs per thread, each input their windows share read once"
    )
    cp_async: bool = Field(False, description="cp.async double-buffered GEMM tiles")
    smem_pad: bool = Field(False, description="padded shared-memory tiles against bank conflicts")
    raster: bool = Field(False, description="grouped (L2-friendly) order of GEMM tiles")
    tf32x3: bool = Field(
        False, description="GEMM tiles on tensor cores (mma.sync) in 3xTF32 (error-compensated, fp32-accurate)"
    )

    @property
    def fusion(self) -> Fusion:
        return Fusion(prologue=self.fuse_prologue, epilogue=self.fuse_epilogue, stats=self.fuse_stats)

    def changed(self) -> dict[str, object]:
        """The knobs that differ from the base kernel."""
        base = Knobs()
        return {k: v for k, v in self.model_dump().items() if getattr(base, k) != v}
