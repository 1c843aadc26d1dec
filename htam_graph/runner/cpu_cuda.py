"""Run native-format candidates on the CPU: their CUDA_SRC compiled with g++ against
cpu_cuda.h (beside this file: real barriers and warp shuffles between OS threads), launched
through ctypes on CPU tensors. For checking the catalog's kernels' numbers where there is
no GPU (its tests, bench/bench_catalog_coverage.py); the judge never uses it, and the GPU
judge remains the authority (docs/catalog.md). Needs g++.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import re
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import torch

from htam_graph.files import atomic_file, atomic_write
from htam_graph.runner import native
from htam_graph.runner.native import CTYPES, parse_kernels, parse_signature

SHIM = Path(__file__).with_name("cpu_cuda.h")
_EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;")
# The tensor-core helper is inline PTX; cpu_cuda.h has its own.
_PTX_HELPER = re.compile(r"^__device__ __forceinline__ void htam_mma_tf32\(.*?^}\n", re.MULTILINE | re.DOTALL)


def _cpu_body(source: str) -> str:
    body = re.sub(r"^\s*#\s*include\s*<cuda\w*\.h>\s*$", "", source, flags=re.MULTILINE)
    body = _PTX_HELPER.sub("", body)
    return _EXTERN_SHARED.sub(r"\1* \2 = reinterpret_cast<\1*>(htam_dynamic_smem);", body)


def _wrappers(source: str, prefix: str = "", scope: str = "") -> str:
    """An extern "C" entry point per kernel: htam_launch_<prefix><kernel>."""
    return "\n".join(
        f'extern "C" void htam_launch_{prefix}{name}(const unsigned* d, size_t smem, void** args) '
        f"{{ htam_run({scope}{name}, d, smem, args); }}"
        for name in parse_kernels(source)
    )


def _cpu_source(source: str) -> str:
    return _cpu_body(source) + "\n" + _wrappers(source) + "\n"


# UBSan alignment checks: a misaligned 16-byte access, which faults on a GPU, aborts here too.
FLAGS = ["-std=c++20", "-O1", "-fPIC", "-pthread", "-w", "-fsanitize=alignment", "-fno-sanitize-recover=alignment"]


def shim(workdir: Path) -> Path:
    """The shim header in `workdir`, with a precompiled header beside it (halves each build)."""
    header = workdir / f"cpu_cuda.{hashlib.sha256(SHIM.read_bytes()).hexdigest()[:12]}.h"
    if not (header.parent / (header.name + ".gch")).exists():
        atomic_write(header, SHIM.read_bytes())
        with atomic_file(header.with_name(header.name + ".gch")) as tmp:
            subprocess.run(["g++", *FLAGS, "-x", "c++-header", str(header), "-o", str(tmp)], check=True)
    return header


EXTERN_C = 'extern "C" '
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)(.*)$", re.MULTILINE)


def _digest(source: str) -> str:
    return hashlib.sha256((source + " ".join(FLAGS) + SHIM.read_text()).encode()).hexdigest()[:20]


def _gxx(cpp: str, lib: Path, workdir: Path) -> None:
    header = shim(workdir)
    src = lib.with_name(f"{lib.stem}.{os.getpid()}.cpp")
    src.write_text(cpp)
    try:
        with atomic_file(lib) as tmp:  # concurrent builders never load a half-written library
            done = subprocess.run(
                ["g++", *FLAGS, "-shared", "-include", str(header), str(src), "-o", str(tmp)],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise RuntimeError(f"g++ failed for the CPU build:\n{done.stderr[-4000:]}")
    finally:
        src.unlink(missing_ok=True)


def compile_cpu(source: str, workdir: Path) -> Path:
    lib = workdir / f"k{_digest(source)}.so"
    if not lib.exists():
        _gxx(_cpu_source(source), lib, workdir)
    return lib


def compile_cpu_batch(sources: list[str], workdir: Path) -> None:
    """Build several candidates in one g++ run, each in a namespace of its own (extern "C"
    dropped there, so equal kernel names do not clash; its entry points carry the namespace
    in their names): the shim's launch machinery is compiled once per kernel signature
    instead of once per candidate (a task's variants mostly share their signatures).
    CpuModule then finds each candidate's kernels in the batch's library."""
    sources = [s for s in dict.fromkeys(sources) if not _batched(s, workdir)]
    if not sources:
        return
    macros: dict[str, str] = {}  # a macro is not scoped by a namespace: one body per name in a batch
    for source in sources:
        for name, body in _DEFINE.findall(source):
            if macros.setdefault(name, body.strip()) != body.strip():
                for each in sources:  # one macro, two meanings: each candidate in a library of its own
                    compile_cpu(each, workdir)
                return
    parts = []
    for source in sources:
        ns = f"v{_digest(source)}"
        parts.append(f"namespace {ns} {{\n{_cpu_body(source).replace(EXTERN_C, '')}\n}}")
        parts.append(_wrappers(source, prefix=f"{ns}_", scope=f"{ns}::"))
    lib = workdir / f"b{_digest(''.join(sources))}.so"
    _gxx("\n".join(parts) + "\n", lib, workdir)
    for source in sources:
        atomic_write(workdir / f"k{_digest(source)}.batch", lib.name)


def _batched(source: str, workdir: Path) -> tuple[Path, str] | None:
    """The library of a batch holding `source`, and its entry points' prefix."""
    index = workdir / f"k{_digest(source)}.batch"
    if not index.exists():
        return None
    return workdir / index.read_text(), f"v{_digest(source)}_"


class CpuModule:
    """What load_cuda returns, with launch() running the kernel on the CPU."""

    def __init__(self, source: str, workdir: Path) -> None:
        lib, self.prefix = _batched(source, workdir) or (compile_cpu(source, workdir), "")
        self.lib = ctypes.CDLL(str(lib))
        self.sigs = {name: parse_signature(name, raw) for name, raw in parse_kernels(source).items()}

    def launch(self, name: str, grid: Any, block: Any, args: Any, shared_mem: int = 0) -> None:
        sig = self.sigs[name]
        assert len(args) == len(sig.params), f"{name}: {len(args)} args for {len(sig.params)} parameters"
        values = []
        for param, value in zip(sig.params, args):
            if param.kind == "pointer":
                assert isinstance(value, torch.Tensor) and value.is_contiguous(), f"{name}.{param.name}"
                values.append(ctypes.c_void_p(value.data_ptr()))
            else:
                values.append(CTYPES[(param.kind, param.size)](value))
        argv = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        dims = (ctypes.c_uint * 6)(*_dims(grid), *_dims(block))
        getattr(self.lib, f"htam_launch_{self.prefix}{name}")(dims, ctypes.c_size_t(shared_mem), argv)


def _dims(d: Any) -> tuple[int, int, int]:
    t = (d,) if isinstance(d, int) else tuple(d)
    assert all(isinstance(x, int) and x > 0 for x in t), f"bad launch dims {d}"
    return (*t, *(1,) * (3 - len(t)))


class _Props:
    multi_processor_count = 4
    max_threads_per_multi_processor = 2048


@contextmanager
def cpu_device(workdir: Path) -> Iterator[None]:
    """load_cuda builds for the CPU; the device properties are a small GPU's."""
    with (
        mock.patch.object(native, "load_cuda", lambda source: CpuModule(source, workdir)),
        mock.patch("torch.cuda.get_device_properties", lambda *_: _Props()),
        mock.patch("torch.cuda.current_device", lambda: 0),
    ):
        yield


def load_candidate(source: str) -> types.ModuleType:
    module = types.ModuleType("catalog_candidate")
    exec(compile(source, "<candidate>", "exec"), module.__dict__)
    return module


def compare(task: types.ModuleType, candidate_source: str, workdir: Path, seed: int = 0) -> tuple[float, str]:
    """Run the reference and the candidate on the same inputs; the worst error relative to
    the judge's tolerance (<= 1 passes) and a description of where."""
    torch.manual_seed(seed)
    init = task.get_init_inputs()
    reference = task.Model(*init)
    torch.manual_seed(seed)
    inputs = task.get_inputs()
    with cpu_device(workdir):
        cand = load_candidate(candidate_source)
        model = cand.ModelNew(*init)
    own = model.state_dict()
    model.load_state_dict(
        {k: v for k, v in reference.state_dict().items() if k in own and own[k].shape == v.shape}, strict=False
    )
    floating = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    half = floating[0].dtype in (torch.float16, torch.bfloat16)
    with torch.no_grad():
        if half:
            want = reference(*inputs)
        else:
            ref64 = reference.double()
            want = ref64(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs])
        with cpu_device(workdir):
            got = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    tol = 1e-2 if half else 1e-4
    if got.shape != want.shape:
        return math.inf, f"shape {list(got.shape)} != {list(want.shape)}"
    if got.dtype != (want.dtype if half or not want.is_floating_point() else reference_dtype(task, inputs)):
        return math.inf, f"dtype {got.dtype}"
    if not want.is_floating_point():
        bad = (got != want).sum().item()
        return (math.inf if bad else 0.0), f"{bad} integer elements differ"
    g, w = got.double(), want.double()
    both_nan = torch.isnan(g) & torch.isnan(w)
    err = ((g - w).abs() / (tol + tol * w.abs())).masked_fill(both_nan, 0.0)
    err = torch.nan_to_num(err, nan=math.inf)
    worst = int(err.argmax()) if err.numel() else 0
    return float(
        err.max()
    ) if err.numel() else 0.0, f"at flat {worst}: got {g.flatten()[worst]}, want {w.flatten()[worst]}"


def reference_dtype(task: types.ModuleType, inputs: list[Any]) -> torch.dtype:
    with torch.device("meta"):
        model = task.Model(*task.get_init_inputs())
        out = model(*[x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs])
    return out.dtype


if __name__ == "__main__":  # python -m htam_graph.runner.cpu_cuda TASK.py CANDIDATE.py
    from htam_graph.tasks.loader import exec_source

    task_path = Path(sys.argv[1])
    task_module = exec_source(task_path.read_text(), str(task_path), "htam_cpu_cuda_task")
    print(compare(task_module, Path(sys.argv[2]).read_text(), Path(tempfile.gettempdir()) / "htam-cpu-cuda"))
