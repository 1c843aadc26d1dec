"""The judging machine's facts for the prompts (runner.models.HardwareFacts): the GPU's
properties as torch reads them in the referee, and the build the judge runs."""

from __future__ import annotations

from typing import Any

from htam_graph.errors import UserError
from htam_graph.runner.build import DEFAULT_FLAGS, BuildSettings, find_nvcc, nvcc_version
from htam_graph.runner.models import HardwareFacts

KIB, MIB, GIB = 1024, 1024**2, 1024**3


def build_facts(arch: str, nvcc: str | None) -> dict[str, Any]:
    """The build half of the facts: the exact flags of a candidate's cubin build and nvcc's version."""
    return {"arch": arch, "nvcc_flags": [*DEFAULT_FLAGS, f"-arch={arch}"], "nvcc_version": nvcc}


def nvcc_of(build: BuildSettings | None) -> str | None:
    """nvcc's version, or None where there is none to ask (it is stated as unknown)."""
    try:
        return nvcc_version(build.nvcc if build is not None else find_nvcc())
    except (UserError, OSError):
        return None


def device_facts(device_index: int, arch: str) -> HardwareFacts:
    """Read in the referee after CUDA is up: torch's device properties (build fields
    without nvcc's version, which the process that starts the judge adds)."""
    import torch

    props = torch.cuda.get_device_properties(device_index)
    # memory_clock_rate is in kHz and memory_bus_width in bits (as runner/referee/roofline.py)
    bandwidth = 2 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8 / 1e9

    def prop(name: str) -> int | None:
        value = getattr(props, name, None)
        return int(value) if value else None

    def scaled(name: str, unit: int) -> float | None:
        value = prop(name)
        return None if value is None else round(value / unit, 1)

    return HardwareFacts(
        judged_by=f"{props.name} (sm_{props.major}{props.minor})",
        measured=True,
        gpu=props.name,
        capability=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count,
        memory_gib=scaled("total_memory", GIB),
        peak_bandwidth_gbs=round(bandwidth) if bandwidth > 0 else None,
        l2_mib=scaled("L2_cache_size", MIB),
        shared_per_block_kib=scaled("shared_memory_per_block_optin", KIB),
        shared_per_sm_kib=scaled("shared_memory_per_multiprocessor", KIB),
        registers_per_sm=prop("regs_per_multiprocessor"),
        max_threads_per_sm=prop("max_threads_per_multi_processor"),
        cuda_runtime=str(torch.version.cuda),
        **build_facts(arch, None),
    )


def unmeasured(judged_by: str, arch: str, nvcc: str | None, gpu: str | None = None) -> HardwareFacts:
    """Facts where no GPU was read: what judges, the build, and nothing made up."""
    return HardwareFacts(judged_by=judged_by, measured=False, gpu=gpu, **build_facts(arch, nvcc))
