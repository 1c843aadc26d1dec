"""Native-format candidates for the runner's GPU tests, built from one ReLU template.

Each variant changes one piece (the kernel body, forward, or the module's prelude) so a
test names exactly what it exercises.
"""

from __future__ import annotations

HEADER = """
import torch
import torch.nn as nn
from htam_graph.runner.native import load_cuda
"""

RELU_KERNEL = r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { BODY }
}
"""

HONEST_BODY = "y[i] = fmaxf(x[i], 0.0f);"

LAUNCH = 'self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n))'

HONEST_FORWARD = f"""
        y = torch.empty_like(x)
        n = x.numel()
        {LAUNCH}
        return y
"""


def relu_candidate(
    body: str = HONEST_BODY, forward: str = HONEST_FORWARD, prelude: str = "", kernel: str = RELU_KERNEL, init: str = ""
) -> str:
    cuda = kernel.replace("BODY", body)
    return f'''{HEADER}
{prelude}
CUDA_SRC = r"""{cuda}"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)
{init}
    def forward(self, x):
{forward}
'''


HONEST = relu_candidate()

# --- failures the runner must survive -------------------------------------------------
HANG = relu_candidate(body="while (clock64() >= 0) { } " + HONEST_BODY)
ILLEGAL_ACCESS = relu_candidate(body="y[i + (1LL << 40)] = 1.0f;")
COMPILE_ERROR = relu_candidate(body="y[i] = undefined_name;")
WRONG_ARG_COUNT = relu_candidate(
    forward="""
        y = torch.empty_like(x)
        self.kernels.launch("relu_kernel", grid=(1,), block=(256,), args=(x, y))
        return y
"""
)
WRONG_VALUES = relu_candidate(body="y[i] = fmaxf(x[i], 0.0f) + 1e-2f;")

# --- one cheat per dynamic check --------------------------------------------------------
UNWRITTEN = relu_candidate(body="if (i < n / 2) { y[i] = fmaxf(x[i], 0.0f); }")
CONSTANT = relu_candidate(body="y[i] = 0.5f;")
INPUT_INDEPENDENT = relu_candidate(
    init="        self.saved = None\n",
    forward=f"""
        if self.saved is None:
            y = torch.empty_like(x)
            n = x.numel()
            {LAUNCH}
            self.saved = y
        return self.saved.clone()
""",
)
POINTER_CACHE = relu_candidate(
    init="        self.memo = {}\n",
    forward=f"""
        key = x.data_ptr()
        if key not in self.memo:
            y = torch.empty_like(x)
            n = x.numel()
            {LAUNCH}
            self.memo[key] = y
        return self.memo[key]
""",
)
LAZY = relu_candidate(
    prelude="class Deferred(torch.Tensor):\n    pass\n",
    forward=f"""
        y = torch.empty_like(x)
        n = x.numel()
        {LAUNCH}
        return y.as_subclass(Deferred)
""",
)
UNINITIALIZED = relu_candidate(
    kernel=r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, const float* s,
                                       long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { y[i] = fmaxf(x[i], 0.0f) + (s[i] != s[i] ? 0.0f : s[i] * 0.5f); }
}
""",
    forward="""
        s = torch.empty_like(x)
        y = torch.empty_like(x)
        n = x.numel()
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, s, n))
        return y
""",
)
MUTATES_INPUT = relu_candidate(body=HONEST_BODY + " if (i == 0) { ((float*)x)[0] = 12345.0f; }")
ALIASES_INPUT = relu_candidate(
    forward="""
        n = x.numel()
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, x, n))
        return x
"""
)
TORCH_COMPUTE = relu_candidate(forward="        return torch.relu(x)\n")
TIMER_PATCH = relu_candidate(prelude="torch.cuda.synchronize = lambda *args, **kwargs: None\n")
SIDE_THREAD = relu_candidate(
    prelude="import threading\nimport time\n",
    forward=f"""
        y = torch.empty_like(x)
        n = x.numel()

        def later():
            time.sleep(0.5)
            {LAUNCH}

        threading.Thread(target=later).start()
        return y
""",
)


def side_stream_candidate(before: str = "", after: str = "", body: str = HONEST_BODY, init: str = "") -> str:
    """The ReLU launched on a private stream `self.side`, with `before`/`after` lines around it."""
    return relu_candidate(
        body=body,
        init="        self.side = torch.cuda.Stream()\n" + init,
        forward=f"""
        y = torch.empty_like(x)
        n = x.numel()
{before}        with torch.cuda.stream(self.side):
            {LAUNCH}
{after}        return y
""",
    )


SIDE_STREAM = side_stream_candidate()
# Waits for its own stream only: forward returns with the work done, the timed stream untouched.
SIDE_STREAM_WAITED = side_stream_candidate(after="        self.side.synchronize()\n")
# Honest until the timed runs (its 40th call on), then the work leaves the timed stream;
# each thread spins ~100 us first, so the hidden work is far above host jitter.
SIDE_STREAM_WHEN_TIMED = side_stream_candidate(
    body="long long t0 = clock64(); while (clock64() - t0 < 200000) { } " + HONEST_BODY,
    init="        self.calls = 0\n",
    before=f"""        self.calls += 1
        if self.calls < 40:
            {LAUNCH}
            return y
""",
)
# Honest uses of streams and synchronization: none of these may be flagged.
JOINED_STREAM = side_stream_candidate(
    before="        current = torch.cuda.current_stream()\n        self.side.wait_stream(current)\n",
    after="        current.wait_stream(self.side)\n        y.record_stream(self.side)\n",
)
DEVICE_SYNC = relu_candidate(
    forward=HONEST_FORWARD.replace("        return y", "        torch.cuda.synchronize()\n        return y")
)
TF32 = relu_candidate(prelude="torch.backends.cuda.matmul.allow_tf32 = not torch.backends.cuda.matmul.allow_tf32\n")

LINEAR_RELU = r'''
import torch
import torch.nn as nn
from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void linear_relu(const float* x, const float* w, const float* b, float* y,
                                       int rows, int k, int cols) {
    int r = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float acc = b[c];
    for (int i = 0; i < k; ++i) acc += x[r * k + i] * w[c * k + i];
    y[r * cols + c] = fmaxf(acc, 0.0f);
}
"""


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        # Drawn before the linear layer: the weights only match because the runner hands
        # the reference's over by name.
        self.unused = nn.Parameter(torch.randn(7))
        self.linear = nn.Linear(in_features, out_features)
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x):
        rows, k = x.shape
        cols = self.linear.out_features
        y = torch.empty(rows, cols, device=x.device, dtype=x.dtype)
        self.kernels.launch("linear_relu", grid=((cols + 127) // 128, rows), block=(128,),
                         args=(x.contiguous(), self.linear.weight, self.linear.bias, y, rows, k, cols))
        return y
'''

# x * 2 for the multi-GiB fixture (fixtures/scale_large.py).
SCALE_LARGE = relu_candidate(body="y[i] = x[i] * 2.0f;")
