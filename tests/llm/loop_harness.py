"""A 3-step optimization through the real loop and memory, without a GPU or nvcc: the
kernels are numbered (`// kernel N` in their CUDA source) and a scripted judge gives the
n-th kernel the n-th outcome. Step 1 is correct but slower than eager (0.797x), step 2 is
wrong (its candidate a small edit of step 1's, so the prompts show it as a diff), step 3
beats eager. Used by the prompt and the model-family tests."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, ClassVar

from htam_graph.config import ScoringParams
from htam_graph.llm.base import Completion, LLMClient, Prompt, T
from htam_graph.loop.evaluators import HoldsNothing
from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.records import RunSummary, StepRecord
from htam_graph.loop.runs import create_run
from htam_graph.memory.models import RunConfig
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.runner.models import EvalResult, HardwareFacts, Roofline, Timing
from htam_graph.tasks import Task, resolve_task
from htam_graph.vocab import Method, Verdict

TASK = "level1/19_ReLU"
STEPS = 3
TARGET = "an NVIDIA H200 (sm_90)"
EAGER_MS = 0.3  # the reference's time: 1 GiB moved at 4.8 TB/s takes 0.2237 ms at least
# kernel n's verdict and speedup over eager
OUTCOMES: list[tuple[Verdict, float | None]] = [(Verdict.OK, 0.797), (Verdict.INCORRECT, None), (Verdict.OK, 1.25)]


def kernel(n: int) -> str:
    """The n-th kernel file: the same ReLU, the 2nd one with a wrong bound."""
    bound = "i <= n" if n == 2 else "i < n"
    return f'''import torch
import torch.nn as nn
from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
// kernel {n}
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if ({bound}) y[i] = fmaxf(x[i], 0.0f);
}}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n))
        return y
'''


def kernel_answer(n: int) -> str:
    return f"Here is the kernel.\n```python\n{kernel(n)}```\n"


# What an H200's referee measures (runner/hardware.py), as the scripted judge's facts.
H200 = HardwareFacts(
    judged_by="NVIDIA H200 (sm_90)", measured=True, gpu="NVIDIA H200", capability="9.0", sm_count=132,
    memory_gib=139.8, peak_bandwidth_gbs=4800, l2_mib=50.0, shared_per_block_kib=227.0, shared_per_sm_kib=228.0,
    registers_per_sm=65536, max_threads_per_sm=2048, arch="sm_90", nvcc_flags=["-O3", "-lineinfo", "-arch=sm_90"],
    nvcc_version="release 12.8, V12.8.93", cuda_runtime="12.8",
)  # fmt: skip


class ScriptedJudge(HoldsNothing):
    label, device, target = "scripted", "scripted timings (no GPU)", TARGET
    hardware = H200

    def evaluate(self, task: Task, source: str) -> EvalResult:
        n = int(re.search(r"// kernel (\d+)", source)[1])  # type: ignore[index]
        verdict, speedup = OUTCOMES[n - 1]
        ok = verdict == Verdict.OK
        ms = EAGER_MS / speedup if speedup else EAGER_MS
        timing = Timing(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, trials=100)
        eager = Timing(median_ms=EAGER_MS, mean_ms=EAGER_MS, min_ms=EAGER_MS, max_ms=EAGER_MS, trials=100)
        return EvalResult(
            task_id=task.id,
            task_sha256=hashlib.sha256(task.source.encode()).hexdigest(),
            candidate_sha256=hashlib.sha256(source.encode()).hexdigest(),
            candidate_format="native",
            verdict=verdict,
            compiled=True,
            correct=ok,
            errors="" if ok else "output mismatch: 1 of 262144 elements off, worst at (15, 16383): 0.731 vs 0.0",
            max_abs_error=3e-7 if ok else 0.731,
            max_rel_error=1e-7 if ok else 1.0,
            candidate=timing if ok else None,
            reference_eager=eager,
            speedup_eager=speedup,
            device=self.device,
        )

    def reference(self, task: Task) -> EvalResult:
        """A reference-only job's result: the reference's times and its own roofline."""
        eager = Timing(median_ms=EAGER_MS, mean_ms=EAGER_MS, min_ms=EAGER_MS, max_ms=EAGER_MS, trials=100)
        line = Roofline(
            bytes_moved=1 << 30, flops=0, peak_bandwidth_gbs=4800.0, peak_tflops=None, floor_ms=0.2237,
            bandwidth_fraction=0.2237 / EAGER_MS, compute_fraction=None,
        )  # fmt: skip
        return EvalResult(
            task_id=task.id, task_sha256=task.sha256, candidate_sha256="0" * 64, candidate_format="native",
            verdict=Verdict.CHECKED, reference_eager=eager, roofline=line, device=self.device,
        )  # fmt: skip


class RecordingWriter(LLMClient):
    """Writes kernel n at the n-th generate call, notes and the first offered strategy;
    keeps every prompt it was sent."""

    name: ClassVar[str] = "openai"
    writes_reflections: ClassVar[bool] = True  # as a language model does: the loop asks it for notes
    model = "recording"

    def __init__(self) -> None:
        self.prompts: list[Prompt] = []
        self.written = 0

    def check(self) -> None:
        pass

    def complete(self, prompt: Prompt, max_tokens: int | None = None) -> Completion:
        self.prompts.append(prompt)
        if prompt.template == "reflect":
            return Completion(text="A note on the step.", model=self.model)
        self.written += 1
        return Completion(text=kernel_answer(self.written), model=self.model)

    def structured(self, prompt: Prompt, schema: type[T], max_tokens: int | None = None) -> tuple[T, Completion]:
        self.prompts.append(prompt)
        assert prompt.context is not None
        answer: dict[str, Any] = {"local_id": prompt.context.locals[0].id, "reason": "first offered"}
        return schema.model_validate(answer), Completion(text=str(answer), model=self.model)


def run_loop(
    method: Method, client: LLMClient, tmp: Path, steps: int = STEPS, task_id: str = TASK
) -> tuple[RunSummary, list[StepRecord]]:
    task = resolve_task(task_id)
    with SQLiteStore(tmp / "memory.sqlite") as store:
        store.seed(load_seed_bank())
        manifest, folder = create_run(
            out=tmp / "runs", task=task, method=method, seed=0,
            config=RunConfig(steps=steps, scoring=ScoringParams()), llm=f"{client.name}:{client.model}",
            evaluator="scripted", device=ScriptedJudge.device, target=TARGET, run_id=f"run-{method.value}",
        )  # fmt: skip
        optimizer = Optimizer(
            store=store, client=client, evaluator=ScriptedJudge(), task=task, manifest=manifest, folder=folder
        )
        summary = optimizer.run()
    records = [StepRecord.model_validate_json(p.read_text()) for p in sorted((folder / "steps").glob("*.json"))]
    return summary, records
