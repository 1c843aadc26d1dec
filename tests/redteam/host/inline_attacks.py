"""Host attacks from a load_inline candidate's C++ static initializer: they run when the
extension loads, in the sandbox's builder and again in the candidate's process. Any attack
that gets through in the candidate's process is named in a load error; when all fail, its
honest ReLU kernel is judged and passes. tests/runner/test_sandbox_gpu.py checks the side
effects (nothing written, the judge alive)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

cpp_source = r"""
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string>

torch::Tensor relu_cuda(torch::Tensor x);

static std::string attack() {
    std::string got;
    auto tried = [&got](bool ok, const char* name) { if (ok) { got += name; got += "; "; } };
    tried(open("/root/.htam-pwned-inline", O_WRONLY | O_CREAT, 0644) >= 0, "write /root");
    tried(open("/tmp/htam-pwned-inline", O_WRONLY | O_CREAT, 0644) >= 0, "write /tmp");
    const char* ext = getenv("TORCH_EXTENSIONS_DIR");
    std::string others = std::string(ext ? ext : "/nonexistent") + "/../../htam-pwned";
    tried(open(others.c_str(), O_WRONLY | O_CREAT, 0644) >= 0, "write beside other candidates' builds");
    tried(open("/root/.config/htam-graph/htam.env", O_RDONLY) >= 0, "read the settings");
    tried(open("/etc/shadow", O_RDONLY) >= 0, "read /etc/shadow");
    pid_t parent = getppid();
    std::string mem = "/proc/" + std::to_string(parent) + "/mem";
    tried(open(mem.c_str(), O_RDWR) >= 0, "open the parent's memory");
    tried(ptrace(PTRACE_ATTACH, parent, 0, 0) == 0, "ptrace the parent");
    tried(kill(parent, SIGKILL) == 0, "kill the parent");
    tried(socket(AF_INET, SOCK_STREAM, 0) >= 0, "open a TCP socket");
    pid_t child = fork();
    if (child == 0) { execl("/bin/true", "true", (char*)nullptr); _exit(0); }
    if (child > 0) waitpid(child, nullptr, 0);
    tried(child >= 0, "fork");
    return got;
}

static const std::string got_at_load = attack();

std::string attacks_succeeded() { return got_at_load; }
"""

ext = load_inline(
    name="inline_attacks_ext",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_cuda", "attacks_succeeded"],
    verbose=False,
)
if ext.attacks_succeeded():
    raise RuntimeError("ATTACK SUCCEEDED: " + ext.attacks_succeeded())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_cuda(x.contiguous())
