"""Host attacks from a native-format candidate's module, made when the module runs (the
judge's static checks would reject these imports: run with them off, so only the OS stands
in the way). Any attack that gets through is named in a load error; when all fail, an
honest ReLU is judged and passes. tests/runner/test_sandbox_gpu.py checks the side effects."""

import ctypes
import os
import signal
import socket
import subprocess
from pathlib import Path

import torch
import torch.nn as nn

import htam_graph.runner.timing
from htam_graph.runner.native import JUDGE_BUILD, load_cuda

got = []


def attempt(name, action):
    try:
        if action() is not False:
            got.append(name)
    except OSError:
        pass


def referee_pid():
    with open(f"/proc/{os.getppid()}/status") as status:
        return int(next(line.split()[1] for line in status if line.startswith("PPid:")))


parent, referee = os.getppid(), referee_pid()
cache = JUDGE_BUILD.get().cache_dir
attempt("write /root", lambda: open("/root/.htam-pwned-native", "w").close())
attempt("write /tmp", lambda: open("/tmp/htam-pwned-native", "w").close())
attempt("replace a cached cubin", lambda: open(cache / "cubin" / "htam-pwned.cubin", "wb").close())
attempt("append to the judge's source", lambda: open(htam_graph.runner.timing.__file__, "a").close())
attempt("read the settings", lambda: Path("/root/.config/htam-graph/htam.env").read_text())
attempt("read /etc/shadow", lambda: Path("/etc/shadow").read_text())
attempt("signal the fork server", lambda: os.kill(parent, signal.SIGKILL))
attempt("signal the referee", lambda: os.kill(referee, signal.SIGKILL))
attempt("open the referee's memory", lambda: open(f"/proc/{referee}/mem", "r+b").close())
attempt("ptrace the referee", lambda: ctypes.CDLL(None).ptrace(16, referee, 0, 0) == 0)
attempt("open a TCP socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
attempt("start a program", lambda: subprocess.run(["/bin/true"], check=False))
attempt("fork", lambda: os.fork() == 0 and os._exit(0))
if got:
    raise RuntimeError("ATTACK SUCCEEDED: " + ", ".join(got))

CUDA_SRC = r"""
extern "C" __global__ void relu(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaxf(x[i], 0.0f);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        blocks = max(1, min((n + 255) // 256, 132 * 16))
        self.kernels.launch("relu", grid=(blocks,), block=(256,), args=(x, y, n), shared_mem=0)
        return y
