"""RMS normalization over dim 1 of (N, C, H, W): one thread per (sample, position), C strided reads."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void rms_norm_kernel(const float* __restrict__ x, float* __restrict__ y, long long points,
                                           int channels, long long plane, float eps) {
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= points) return;
    long long n = t / plane, pos = t - n * plane;
    const float* p = x + n * channels * plane + pos;
    float* q = y + n * channels * plane + pos;
    float s = 0.0f;
    for (int c = 0; c < channels; ++c) {
        float v = p[c * plane];
        s += v * v;
    }
    float inv = 1.0f / sqrtf(s / (float)channels + eps);
    for (int c = 0; c < channels; ++c) q[c * plane] = p[c * plane] * inv;
}
"""


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        channels = x.shape[1]
        plane = x.numel() // (x.shape[0] * channels)
        points = x.shape[0] * plane
        self.kernels.launch(
            "rms_norm_kernel",
            grid=((points + 255) // 256,),
            block=(256,),
            args=(x, y, points, channels, plane, float(self.eps)),
        )
        return y
