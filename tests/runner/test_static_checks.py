"""static_check: the red-team manifest, the honest candidates, and tricky cases one by one."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from htam_graph.errors import CandidateError
from htam_graph.runner.formats import static_cuda_sources
from htam_graph.runner.models import CheatKind
from htam_graph.runner.static_checks import static_check
from htam_graph.tasks import resolve_task
from htam_graph.tasks.loader import task_dtype

ROOT = Path(__file__).resolve().parents[2]
REDTEAM = ROOT / "tests" / "redteam"
BENCH_CANDIDATES = ROOT / "bench" / "candidates"
MANIFEST = yaml.safe_load((REDTEAM / "manifest.yaml").read_text(encoding="utf-8"))["candidates"]


def _dtype_of(task_spec: str) -> str:
    """'float32' etc. of a built-in task id or a task file under tests/redteam."""
    local = REDTEAM / task_spec
    task = resolve_task(local if task_spec.endswith(".py") else task_spec)
    return str(task_dtype(task.load_module())).removeprefix("torch.")


def _kinds(source: str, dtype: str = "float32", fmt: str = "native") -> set[CheatKind]:
    return {f.kind for f in static_check(source, dtype, fmt)}


def _entry_id(entry: dict[str, Any]) -> str:
    return Path(entry["file"]).stem


# ------------------------------------------------------------------ the red-team manifest
def _outcomes(entry: dict[str, Any]) -> list[str]:
    dynamic = entry["dynamic"]
    return dynamic if isinstance(dynamic, list) else [dynamic]


def test_manifest_is_complete() -> None:
    """Every candidate file is listed once; every kind named is a CheatKind."""
    listed = [REDTEAM / e["file"] for e in MANIFEST]
    assert sorted(listed) == sorted((REDTEAM / "candidates").glob("*.py"))
    assert len(set(listed)) == len(listed)
    kinds = {k.value for k in CheatKind}
    assert {e["static"] for e in MANIFEST} <= kinds | {"none"}
    assert {o for e in MANIFEST for o in _outcomes(e)} <= kinds | {"ok", "incorrect", "load_error"}
    honest = [e for e in MANIFEST if e["static"] == "none" and _outcomes(e) == ["ok"]]
    assert len(honest) >= 3 and len(MANIFEST) - len(honest) >= 30
    assert sum(e["static"] == "none" and _outcomes(e) != ["ok"] for e in MANIFEST) >= 12  # only the run time sees them


@pytest.mark.parametrize("entry", MANIFEST, ids=_entry_id)
def test_redteam_candidate(entry: dict[str, Any]) -> None:
    """The static checks report what the manifest says, and nothing on the clean-looking ones."""
    source = (REDTEAM / entry["file"]).read_text(encoding="utf-8")
    findings = static_check(source, _dtype_of(entry["task"]), "native")
    if entry["static"] == "none":
        assert findings == [], "the static checks must not fire here"
    else:
        assert CheatKind(entry["static"]) in {f.kind for f in findings}, findings
        assert all(f.stage == "static" and " at line " in f.detail for f in findings)


def _bench_candidates() -> list[Path]:
    return sorted(BENCH_CANDIDATES.rglob("*.py"))


@pytest.mark.parametrize("path", _bench_candidates(), ids=lambda p: p.relative_to(BENCH_CANDIDATES).as_posix())
def test_honest_bench_candidate_has_no_finding(path: Path) -> None:
    task_id = path.relative_to(BENCH_CANDIDATES).with_suffix("").as_posix()
    assert static_check(path.read_text(encoding="utf-8"), _dtype_of(task_id), "native") == []


def _cuda_src(path: Path) -> str:
    """The candidate's one CUDA_SRC string, found as the runner finds it."""
    sources = static_cuda_sources(path.read_text(encoding="utf-8"))
    assert len(sources) == 1, f"{path}: expected one module-level CUDA_SRC string, found {len(sources)}"
    return sources[0]


@pytest.mark.nvcc
@pytest.mark.parametrize("entry", MANIFEST, ids=_entry_id)
def test_redteam_cuda_compiles(entry: dict[str, Any], tmp_path: Path) -> None:
    """Each candidate must fail for its cheat, not for a typo: its CUDA_SRC builds for sm_90."""
    from htam_graph.runner.build import BuildSettings, build_cubin, find_nvcc

    result = build_cubin(
        _cuda_src(REDTEAM / entry["file"]), BuildSettings(nvcc=find_nvcc(), cache_dir=tmp_path, arch="sm_90")
    )
    assert result.ok, result.errors


# ------------------------------------------------------------------ tricky cases
def native(forward: str, cuda: str = "", init: str = "", header: str = "", args: str = "x") -> str:
    """A native candidate around a forward body (and optional CUDA, __init__ lines, module code)."""
    kernel = cuda or (
        'extern "C" __global__ void k(const float* x, float* y, long long n) {\n'
        "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = fmaxf(x[i], 0.0f);\n}\n"
    )
    init_lines = textwrap.indent(textwrap.dedent(init), " " * 8)
    body = textwrap.indent(textwrap.dedent(forward), " " * 8)
    return (
        "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "from htam_graph.runner.native import load_cuda\n"
        f"{textwrap.dedent(header)}\n"
        f'CUDA_SRC = r"""\n{kernel}"""\n\n\n'
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.cuda = load_cuda(CUDA_SRC)\n"
        f"{init_lines}\n"
        f"    def forward(self, {args}):\n"
        f"{body}\n"
    )


LAUNCH = """\
y = torch.empty_like(x)
n = x.numel()
self.cuda.launch("k", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
return y
"""


@pytest.mark.parametrize(
    "forward",
    [
        pytest.param(LAUNCH, id="contract example"),
        pytest.param(
            """\
            x = x.contiguous().view(-1, x.shape[-1])
            rows, cols = x.shape
            blocks = max(1, min(4096, math.ceil(rows * cols / 256)))
            y = x.new_empty((rows, cols))
            z = torch.zeros(rows, device=x.device, dtype=torch.float32)
            s = torch.empty_strided((rows, cols), (cols, 1), device=x.device)
            assert x.is_cuda and x.dtype == torch.float32 and x.dim() == 2
            if x.numel() == 0 or rows % 2 == 1:
                return y
            self.cuda.launch("k", grid=(blocks,), block=(256,), args=(x, y, rows * cols), shared_mem=0)
            return y.view(rows, cols).t().contiguous().reshape(-1)[: rows * cols]
            """,
            id="index arithmetic, allocations, views, metadata",
        ),
        pytest.param(
            """\
            ptr = x.data_ptr()
            assert ptr % 16 == 0 and x.data_ptr() == x.contiguous().data_ptr()
            y = torch.empty_like(x)
            self.cuda.launch("k", grid=(1,), block=(256,), args=(ptr, y, x.numel()), shared_mem=0)
            return y
            """,
            id="data_ptr read but not used as a key",
        ),
        pytest.param(
            """\
            y = torch.empty_like(x)
            self.cuda.launch("k", grid=(1,), block=(256,), args=(x, y, x.numel()), shared_mem=0,
                             stream=torch.cuda.current_stream().cuda_stream)
            return y
            """,
            id="explicit current stream",
        ),
    ],
)
def test_honest_forward_has_no_finding(forward: str) -> None:
    assert static_check(native(forward), "float32", "native") == []


def test_weights_prepared_in_init_and_layers_held_for_their_parameters() -> None:
    init = """\
    self.linear = nn.Linear(64, 32)
    self.weight = nn.Parameter(torch.randn(32, 64) * 0.02)
    self.w_t = self.linear.weight.detach().t().contiguous() * 2.0
    self.register_buffer("scale", torch.ones(32))
    nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
    self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
    """
    forward = """\
    w, b = self.linear.weight, self.linear.bias
    out = torch.empty(x.shape[0], w.shape[0], device=x.device)
    self.cuda.launch("k", grid=(1,), block=(256,), args=(x, w, b, self.weight, self.scale, out), shared_mem=0)
    return out
    """
    assert static_check(native(forward, init=init), "float32", "native") == []


def test_unused_functional_import_and_docstrings_do_not_trip() -> None:
    source = '"""Avoids torch.matmul and __half: a plain fp32 kernel."""\n' + native(LAUNCH)
    source = source.replace("class ModelNew(nn.Module):\n", 'class ModelNew(nn.Module):\n    """No F.relu here."""\n')
    assert static_check(source, "float32", "native") == []


def test_cuda_comments_and_strings_do_not_trip() -> None:
    cuda = (
        "// a __half version would use #include <cuda_fp16.h> and wmma::fragment\n"
        "/* at::matmul(a, b) or cublasSgemm(handle, ...) would be cheating;\n"
        "   so would cudaStreamCreate(&s) */\n"
        '#define MSG "at::matmul( __half half2 mma.sync.f16"\n'
        'extern "C" __global__ void k(const float* x, float* y, long long n) {\n'
        "    int half = blockDim.x / 2;  // a variable named half is fine\n"
        "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = (threadIdx.x < half) ? fmaxf(x[i], 0.0f) : fmaxf(0.0f, x[i]);\n"
        "}\n"
    )
    assert static_check(native(LAUNCH, cuda=cuda), "float32", "native") == []


def test_half_types_flagged_only_in_float32_tasks() -> None:
    cuda = (
        "#include <cuda_fp16.h>\n"
        'extern "C" __global__ void k(const __half* x, __half* y, long long n) {\n'
        "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = __float2half(fmaxf(__half2float(x[i]), 0.0f));\n"
        "}\n"
    )
    assert _kinds(native(LAUNCH, cuda=cuda), "float32") == {CheatKind.PRECISION_DOWNGRADE}
    assert static_check(native(LAUNCH, cuda=cuda), "float16", "native") == []


@pytest.mark.parametrize(
    ("forward", "kind"),
    [
        ("return x.half().float()", CheatKind.PRECISION_DOWNGRADE),
        ("return x.to(torch.bfloat16)", CheatKind.PRECISION_DOWNGRADE),
        ("torch.backends.cuda.matmul.allow_tf32 = True\nreturn x", CheatKind.PRECISION_DOWNGRADE),
        ("with torch.autocast('cuda'):\n    return x", CheatKind.PRECISION_DOWNGRADE),
    ],
)
def test_python_precision_downgrade(forward: str, kind: CheatKind) -> None:
    assert kind in _kinds(native(forward), "float32")


def test_tf32_switch_in_a_half_task_is_still_global_state_tampering() -> None:
    source = native("torch.backends.cuda.matmul.allow_tf32 = True\nreturn x")
    assert _kinds(source, "float16") == {CheatKind.TIMER_PATCH}


@pytest.mark.parametrize(
    "forward",
    [
        "return torch.matmul(x, x)",
        "return F.gelu(x)",
        "return x @ x",
        "y = torch.empty_like(x)\nreturn y * 2",
        "return -x",
        "return x.clamp_min(0)",
        "return x.sum(dim=1)",
        "y = torch.empty_like(x)\ny += x\nreturn y",
        "return x > 0",
        "y = torch.empty_like(x)\ny[:] = x\nreturn y",
        "return torch.ops.aten.relu(x)",
        "f = F.relu\nreturn f(x)",
        "return nn.ReLU()(x)",
        "return sum(x)",
    ],
)
def test_torch_compute_in_forward(forward: str) -> None:
    assert CheatKind.TORCH_COMPUTE_OP in _kinds(native(forward))


def test_layer_calls_and_stored_functions_are_flagged() -> None:
    init = "self.layers = nn.ModuleList([nn.Linear(4, 4)])\nself.act = F.relu\nself.lin = nn.Linear(4, 4)"
    for forward in (
        "for layer in self.layers:\n    x = layer(x)\nreturn x",
        "return self.layers[0](x)",
        "return self.lin.forward(x)",
        "return self.act(x)",
    ):
        assert CheatKind.TORCH_COMPUTE_OP in _kinds(native(forward, init=init)), forward


def test_integer_forward_arguments_are_not_tensors() -> None:
    assert static_check(native("k = dim * 2 + 1\n" + LAUNCH, args="x, dim: int"), "float32", "native") == []


@pytest.mark.parametrize(
    ("header", "forward", "kind"),
    [
        ("", "try:\n    return x\nexcept Exception:\n    return x", CheatKind.REFERENCE_FALLBACK),
        ("from reference import Model", "return x", CheatKind.REFERENCE_FALLBACK),
        ("from htam_graph.tasks.suite import level1", "return x", CheatKind.REFERENCE_FALLBACK),
        ("import threading", "return x", CheatKind.SIDE_STREAM),
        ("from concurrent.futures import ThreadPoolExecutor", "return x", CheatKind.SIDE_STREAM),
        ("", "s = torch.cuda.Stream()\nreturn x", CheatKind.SIDE_STREAM),
        ("", "torch.cuda.set_stream(torch.cuda.Stream())\nreturn x", CheatKind.SIDE_STREAM),
        ("import sys", "sys.modules['time'] = None\nreturn x", CheatKind.TIMER_PATCH),
        ("", "setattr(torch.cuda, 'synchronize', print)\nreturn x", CheatKind.TIMER_PATCH),
        ("", "globals()['torch'] = None\nreturn x", CheatKind.TIMER_PATCH),
        ("import gc", "gc.collect()\nreturn x", CheatKind.TIMER_PATCH),
        ("from torch.cuda import Event", "Event.elapsed_time = lambda a, b: 0.0\nreturn x", CheatKind.TIMER_PATCH),
        ("", "exec('import os')\nreturn x", CheatKind.FORBIDDEN_IMPORT),
        ("", "return getattr(torch, 'mat' + 'mul')(x, x)", CheatKind.FORBIDDEN_IMPORT),
        ("", "return torch._C._nn.gelu(x)", CheatKind.FORBIDDEN_IMPORT),
        ("import subprocess", "return x", CheatKind.FORBIDDEN_IMPORT),
        ("from cuda.bindings import driver", "return x", CheatKind.FORBIDDEN_IMPORT),
        ("import triton", "return x", CheatKind.FORBIDDEN_IMPORT),
        ("", "cache = {id(x): x}\nreturn x", CheatKind.POINTER_CACHE),
        ("", "self.last = x.data_ptr()\nreturn x", CheatKind.POINTER_CACHE),
        ("", "return self.memo.get((x.data_ptr(), x.shape))", CheatKind.POINTER_CACHE),
        ("", "y = torch.empty_like(x)\ny.__class__ = Lazy\nreturn y", CheatKind.LAZY_OUTPUT),
        ("", "T = type('T', (torch.Tensor,), {})\nreturn x", CheatKind.LAZY_OUTPUT),
    ],
)
def test_cheat_constructs(header: str, forward: str, kind: CheatKind) -> None:
    assert kind in _kinds(native(forward, header=header))


def test_async_forward_is_a_side_stream() -> None:
    source = native(LAUNCH).replace("    def forward", "    async def forward")
    assert CheatKind.SIDE_STREAM in _kinds(source)


TP, FI, SS = CheatKind.TIMER_PATCH, CheatKind.FORBIDDEN_IMPORT, CheatKind.SIDE_STREAM


@pytest.mark.parametrize(
    ("header", "forward", "kind"),
    [
        # Code that runs inside the judge's functions, or reaches its frames: judge tampering.
        ("import sys", "sys.monitoring.use_tool_id(3, 'x')\nreturn x", TP),
        ("from sys import monitoring", "monitoring.set_events(3, monitoring.events.PY_RETURN)\nreturn x", TP),
        ("from sys import monitoring as m", "return x", TP),
        ("import sys", "sys.settrace(None)\nreturn x", TP),
        ("import sys", "sys.setprofile(print)\nreturn x", TP),
        ("import sys", "frame = sys._getframe(1)\nreturn x", TP),
        ("import sys", "sys.addaudithook(print)\nreturn x", TP),
        ("import threading", "threading.settrace(print)\nreturn x", TP),
        ("import gc", "gc.get_referrers(x)\nreturn x", TP),
        ("", "torch.sys.monitoring.use_tool_id(3, 'x')\nreturn x", TP),
        # Modules an allowed module imported, reached as its attributes.
        ("import typing", "typing.sys.monitoring.use_tool_id(3, 'x')\nreturn x", TP),
        ("import typing", "frame = typing.sys._getframe(1)\nreturn x", FI),
        ("import typing", "f = typing.functools.lru_cache(None)\nreturn x", FI),
        ("", "torch.backends.cuda.torch.threading.Thread(target=print).start()\nreturn x", SS),
        ("", "F.torch.backends.cuda.contextlib.suppress()\nreturn x", FI),
        ("", "torch.random.torch.hub.shutil.rmtree('build')\nreturn x", FI),
        ("", "F.torch.cuda.Event.elapsed_time = print\nreturn x", TP),
        ("", "return F.torch.relu(x)", CheatKind.TORCH_COMPUTE_OP),
        # typing's evaluators run strings as code.
        ("import typing", "typing.get_type_hints(self.forward)\nreturn x", FI),
        ("from typing import get_type_hints", "return x", FI),
        # Annotations are evaluated where they stand (module and class level, signatures).
        ("_: setattr(torch.cuda.Event, 'elapsed_time', print)", "return x", TP),
        ("def _f(n: __import__('os').getpid()) -> int:\n    return n", "return x", FI),
        ("def _f() -> exec('import os'):\n    pass", "return x", FI),
        ("class _Holder:\n    x: globals()['torch'].cuda.synchronize()", "return x", TP),
    ],
)
def test_judge_hooks_and_reached_modules(header: str, forward: str, kind: CheatKind) -> None:
    assert kind in _kinds(native(forward, header=header))


def test_honest_annotations_and_typing_names_pass() -> None:
    header = """\
        import typing
        from typing import Optional

        BLOCK: typing.Final[int] = 256


        def blocks(n: int, per: int = BLOCK) -> int:
            return max(1, math.ceil(n / per))
        """
    forward = """\
        y: torch.Tensor = torch.empty_like(x)
        n: int = x.numel()
        self.cuda.launch("k", grid=(blocks(n),), block=(BLOCK,), args=(x, y, n), shared_mem=0)
        return y
        """
    source = native(forward, header=header, args="x: torch.Tensor, scale: Optional[float] = None")
    assert static_check(source, "float32", "native") == []


def test_finding_names_construct_and_line() -> None:
    source = native("return torch.matmul(x, x)")
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "torch.matmul" in text)
    assert [f.detail for f in static_check(source, "float32", "native")] == [f"calls torch.matmul at line {line}"]


def test_cuda_finding_line_is_the_python_file_line() -> None:
    cuda = 'extern "C" __global__ void k(float* y) {\n    __half h = y[0];\n}\n'
    source = native(LAUNCH, cuda=cuda)
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "__half" in text)
    (finding,) = static_check(source, "float32", "native")
    assert finding.detail.endswith(f"at line {line}")


def test_loader_of_the_other_format_is_forbidden() -> None:
    native_source = native(LAUNCH)
    assert _kinds(native_source, fmt="kernelbench") == {CheatKind.FORBIDDEN_IMPORT}
    kb_import = "from torch.utils.cpp_extension import load_inline\n"
    assert _kinds(kb_import + native_source, fmt="native") == {CheatKind.FORBIDDEN_IMPORT}


def test_unparsable_source_is_left_to_the_loader() -> None:
    assert static_check("def broken(:\n", "float32", "native") == []


def test_unknown_format_is_a_user_error() -> None:
    with pytest.raises(CandidateError, match="unknown candidate format 'triton'; use one of") as err:
        static_check("", "float32", "triton")
    assert err.value.value == "triton"


# ------------------------------------------------------------------ KernelBench format
KB_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) out[idx] = a[idx] + b[idx];
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda(), "a must be a CUDA tensor, not at::matmul input");
    auto size = a.numel();
    auto out = torch::empty_like(a);
    const int block = 256;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    add_kernel<<<(size + block - 1) / block, block, 0, stream>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);
    add_kernel<<<1, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), 0);
    return out;
}
"""


def kernelbench(cuda: str = KB_CUDA, forward: str = "return self.ops.add_cuda(a, b)") -> str:
    return (
        "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
        f'cuda_source = r"""{cuda}"""\n'
        'cpp_source = "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"\n'
        'add = load_inline(name="add", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["add_cuda"])\n\n\n'
        "class ModelNew(nn.Module):\n"
        "    def __init__(self) -> None:\n"
        "        super().__init__()\n"
        "        self.ops = add\n\n"
        "    def forward(self, a, b):\n"
        f"        {forward}\n"
    )


def test_kernelbench_honest_extension_has_no_finding() -> None:
    assert static_check(kernelbench(), "float32", "kernelbench") == []


def test_kernelbench_extension_function_named_like_a_torch_op_is_allowed() -> None:
    cuda = KB_CUDA.replace("add_cuda", "relu")
    assert static_check(kernelbench(cuda, "return add.relu(a, b)"), "float32", "kernelbench") == []


def test_kernelbench_extension_output_is_a_tensor() -> None:
    source = kernelbench(forward="return self.ops.add_cuda(a, b) * 2")
    assert _kinds(source, fmt="kernelbench") == {CheatKind.TORCH_COMPUTE_OP}


@pytest.mark.parametrize(
    ("snippet", "kind"),
    [
        ("return at::matmul(a, b);", CheatKind.TORCH_COMPUTE_OP),
        ("return torch::mm(a, b);", CheatKind.TORCH_COMPUTE_OP),
        ("return torch::nn::functional::relu(a);", CheatKind.TORCH_COMPUTE_OP),
        ("return a.matmul(b);", CheatKind.TORCH_COMPUTE_OP),
        ("return at::addmm(out, a, b);", CheatKind.TORCH_COMPUTE_OP),
        ("return a.add_(b);", CheatKind.TORCH_COMPUTE_OP),
        (
            "cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1); return out;",
            CheatKind.TORCH_COMPUTE_OP,
        ),
        (
            "cudaStream_t s; cudaStreamCreate(&s); add_kernel<<<1, 1, 0, s>>>(0, 0, 0, 0); return out;",
            CheatKind.SIDE_STREAM,
        ),
        ("add_kernel<<<1, 1, 0, side>>>(0, 0, 0, 0); return out;", CheatKind.SIDE_STREAM),
        ("auto s = at::cuda::getStreamFromPool(); return out;", CheatKind.SIDE_STREAM),
        ("std::thread t([]{}); t.join(); return out;", CheatKind.SIDE_STREAM),
        ('py::module_::import("torch"); return out;', CheatKind.FORBIDDEN_IMPORT),
        ('system("nvidia-smi"); return out;', CheatKind.FORBIDDEN_IMPORT),
        ("return a.to(at::kHalf);", CheatKind.PRECISION_DOWNGRADE),
    ],
)
def test_kernelbench_cpp_cheats(snippet: str, kind: CheatKind) -> None:
    cuda = KB_CUDA.replace("    return out;\n}", f"    {snippet}\n}}")
    assert kind in _kinds(kernelbench(cuda), fmt="kernelbench")


def test_ptx_in_asm_strings_is_read() -> None:
    cuda = KB_CUDA.replace(
        "    return out;\n}",
        "    return out;\n}\n__device__ void f(float* d) {\n"
        '    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 ...");\n}',
    )
    assert _kinds(kernelbench(cuda), "float32", "kernelbench") == {CheatKind.PRECISION_DOWNGRADE}


@pytest.mark.parametrize(
    ("init", "forward"),
    [
        ("self.f = torch.compile(self._impl)", "return self.f(x)"),
        ("", "return torch.jit.script(self._impl)(x)"),
        ("self.op = torch.linalg.matmul", "return self.op(x, x)"),
        ("self.op = torch.ops.aten.mm", "return self.op(x, x)"),
        ("", "return x.__matmul__(x)"),
        ("", "return x.__rmul__(2.0)"),
    ],
)
def test_hidden_torch_compute(init: str, forward: str) -> None:
    assert CheatKind.TORCH_COMPUTE_OP in _kinds(native(forward, init=init))


def test_closures_see_the_tensors_of_forward() -> None:
    assert CheatKind.TORCH_COMPUTE_OP in _kinds(native("def twice():\n    return x * 2\nreturn twice()"))


def test_membership_in_a_literal_is_not_a_cache() -> None:
    forward = "assert x.data_ptr() % 16 in (0, 8)\n" + LAUNCH
    assert static_check(native(forward), "float32", "native") == []


def test_python_messages_are_not_read_as_cuda() -> None:
    forward = 'assert x.is_cuda, "unsupported system (cuda needed); half precision: use float32"\n' + LAUNCH
    assert static_check(native(forward), "float32", "native") == []


@pytest.mark.parametrize("init", ["torch.manual_seed(0)", "torch.cuda.manual_seed_all(0)"])
def test_seeding_the_judges_generators_is_flagged_even_in_init(init: str) -> None:
    assert CheatKind.TIMER_PATCH in _kinds(native(LAUNCH, init=init))


def test_try_finally_without_except_is_not_a_fallback() -> None:
    forward = "try:\n" + textwrap.indent(LAUNCH, "    ") + "finally:\n    pass"
    assert static_check(native(forward), "float32", "native") == []


def test_kernelbench_stream_passed_in_by_the_caller_is_not_a_side_stream() -> None:
    helper = (
        "static void launch(const float* a, float* out, int n, cudaStream_t stream) {\n"
        "    add_kernel<<<1, 256, 0, stream>>>(a, a, out, n);\n}\n"
    )
    cuda = KB_CUDA.replace("torch::Tensor add_cuda(", helper + "torch::Tensor add_cuda(")
    assert static_check(kernelbench(cuda), "float32", "kernelbench") == []


@pytest.mark.parametrize(
    ("init", "forward"),
    [
        ("self.memo = {}", "if x in self.memo:\n    return self.memo[x]\nreturn x"),
        ("self.memo = {}", "return self.memo.get(x)"),
        ("", "self.key = hash(x)\nreturn x"),
    ],
)
def test_tensor_identity_as_cache_key(init: str, forward: str) -> None:
    assert CheatKind.POINTER_CACHE in _kinds(native(forward, init=init))


def test_indexing_a_kept_tensor_with_a_tensor_is_not_a_cache() -> None:
    init = "self.table = nn.Parameter(torch.randn(16, 4))"
    assert CheatKind.POINTER_CACHE not in _kinds(native("return self.table[x]", init=init))


def test_kernelbench_using_namespace_at_is_flagged() -> None:
    cuda = KB_CUDA.replace("#include <cuda_runtime.h>", "").replace(
        "torch::Tensor add_cuda(", "using namespace at;\ntorch::Tensor add_cuda("
    )
    assert CheatKind.TORCH_COMPUTE_OP in _kinds(kernelbench(cuda), fmt="kernelbench")


@pytest.mark.parametrize(
    ("snippet", "flagged"),
    [
        ("wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;", False),
        ("float hi = wmma::__float_to_tf32(x);", False),
        ('asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));', False),
        ("wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;", True),
        ("wmma::fragment<wmma::accumulator, 16, 16, 16, int> c;", True),
        ("wmma::fragment<wmma::matrix_a, 8, 8, 128, wmma::experimental::precision::b1, wmma::row_major> a;", True),
        ('asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 ...");', True),
        ('asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(v));', True),
    ],
)
def test_tensor_cores_in_an_fp32_task_are_flagged_only_below_tf32(snippet: str, flagged: bool) -> None:
    """TF32 (and its conversions) is left to the precision probe: compensated 3xTF32 is as
    accurate as fp32 FMAs. 16-bit, 8-bit, integer and binary tensor-core types stay findings."""
    head = '#include <mma.h>\nnamespace wmma = nvcuda::wmma;\nextern "C" __global__ void k(float* y) {\n'
    cuda = f"{head}    {snippet}\n}}\n"
    kinds = _kinds(native(LAUNCH, cuda=cuda))
    assert (CheatKind.PRECISION_DOWNGRADE in kinds) is flagged, kinds
