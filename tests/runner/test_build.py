"""nvcc -> cubin builds through the content-hash cache, with a real nvcc (no GPU needed), and
the build settings that travel with every job."""

from __future__ import annotations

from pathlib import Path

import pytest

from htam_graph.runner.build import BuildSettings, build_cubin, build_many, condense_errors, find_nvcc

KERNEL = r"""
extern "C" __global__ void scale(const float* __restrict__ x, float* __restrict__ y, float a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""

BROKEN = r"""
extern "C" __global__ void scale(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int unused_variable;
    if (i < n) y[i] = factor * x[i];
}
"""


@pytest.fixture
def settings(tmp_path: Path) -> BuildSettings:
    return BuildSettings(nvcc=find_nvcc(), cache_dir=tmp_path, arch="sm_90")


@pytest.mark.nvcc
def test_build_writes_a_cubin_and_the_second_build_is_a_cache_hit(settings: BuildSettings):
    first = build_cubin(KERNEL, settings)
    assert first.ok and not first.cached and first.errors == ""
    cubin = Path(first.cubin_path)
    assert cubin.parent == settings.cache_dir / "cubin" and cubin.read_bytes()[:4] == b"\x7fELF"
    second = build_cubin(KERNEL, settings)
    assert second.cached and second.ok and second.key == first.key and second.cubin_path == first.cubin_path


@pytest.mark.nvcc
def test_the_key_covers_source_arch_and_flags(settings: BuildSettings):
    base = build_cubin(KERNEL, settings)
    assert build_cubin(KERNEL + "\n", settings).key != base.key
    assert build_cubin(KERNEL, settings.model_copy(update={"arch": "sm_80"})).key != base.key
    assert build_cubin(KERNEL, settings, flags=("-DEXTRA=1",)).key != base.key


@pytest.mark.nvcc
def test_a_broken_kernel_is_condensed_to_the_offending_line_and_cached(settings: BuildSettings):
    result = build_cubin(BROKEN, settings)
    assert not result.ok and result.cubin_path is None
    assert result.errors.splitlines() == [
        'CUDA_SRC line 5: error: identifier "factor" is undefined',
        "    if (i < n) y[i] = factor * x[i];",
    ]
    assert "warning" in result.log  # the full log keeps what the summary drops
    again = build_cubin(BROKEN, settings)
    assert again.cached and not again.ok and again.errors == result.errors


@pytest.mark.nvcc
def test_build_many_builds_in_parallel_and_keeps_the_order(settings: BuildSettings):
    sources = [KERNEL.replace("a * x[i]", f"a * x[i] + {k}.0f") for k in range(4)] + [BROKEN]
    results = build_many(sources, settings, jobs=4)
    assert [r.ok for r in results] == [True, True, True, True, False]
    assert len({r.key for r in results}) == 5


def test_condense_errors_keeps_errors_only_and_caps_the_excerpt():
    log = "\n".join(
        [f"kernel.cu({n}): error: problem number {n}" for n in range(1, 40)]
        + ['kernel.cu(3): warning #177-D: variable "v" was declared but never referenced', "ptxas fatal   : bad"]
    )
    text = condense_errors(log, "line one\nline two\n")
    assert "warning" not in text
    assert text.splitlines()[0] == "CUDA_SRC line 1: error: problem number 1"
    assert text.splitlines()[1] == "    line one"
    assert len(text.splitlines()) <= 20 and len(text) <= 2000


def test_condense_errors_names_headers_without_their_folders():
    log = "/opt/cuda/include/cuda_fp16.h:4492:10: fatal error: nv/target: No such file or directory"
    assert condense_errors(log) == "cuda_fp16.h:4492: fatal error: nv/target: No such file or directory"


def test_build_settings_come_from_the_configuration_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("")
    monkeypatch.setenv("HTAM_NVCC", str(nvcc))
    monkeypatch.setenv("HTAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HTAM_CUDA_ARCH", "sm_80")
    settings = BuildSettings.resolve()
    assert (settings.nvcc, settings.cache_dir, settings.arch) == (nvcc, tmp_path / "cache", "sm_80")
    assert settings.for_arch("sm_90").arch == "sm_80"  # a configured arch wins over the GPU's
    monkeypatch.delenv("HTAM_CUDA_ARCH")
    assert BuildSettings.resolve().for_arch("sm_90").arch == "sm_90"


def test_without_htam_nvcc_or_path_nvcc_is_what_cuda_pathfinder_finds(monkeypatch: pytest.MonkeyPatch):
    from cuda.pathfinder import find_nvidia_binary_utility

    found = find_nvidia_binary_utility("nvcc")
    if found is None:
        pytest.skip("cuda.pathfinder finds no nvcc here")
    monkeypatch.delenv("HTAM_NVCC", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert find_nvcc() == Path(found)
