"""The inputs a candidate is judged on: more than the task's get_inputs() ever draws.

KernelBench's tasks mostly draw torch.rand (non-negative, in [0, 1)): on those a plain copy
of x passes for ReLU, ReLU passes for ELU, and a TF32 matmul stays within 1e-4. Besides
the task's own sets (each from a fresh secret seed), the judge draws sets from other
distributions, applied to every floating-point input at once; integer inputs (indices,
targets) keep the task's values. docs/judge.md has the table and the tolerances.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from enum import StrEnum
from types import ModuleType
from typing import Any

import torch


class InputKind(StrEnum):
    TASK = "task"  # the task's own get_inputs()
    NORMAL = "normal"  # signed standard normal
    LARGE = "large"  # signed normal x 100
    SMALL = "small"  # signed normal x 0.01
    ZEROS = "zeros"  # signed normal with a third of the elements exactly zero
    PRECISION = "precision"  # fp32 tasks: signed values that need all 24 bits of fp32's mantissa


_SCALE = {InputKind.NORMAL: 1.0, InputKind.LARGE: 100.0, InputKind.SMALL: 0.01, InputKind.ZEROS: 1.0}
PERTURBED_ELEMENTS = 8  # elements per tensor a perturbation changes


@dataclass(frozen=True)
class Recipe:
    """How to draw one input set, reproducibly within the job (never across jobs)."""

    name: str
    kind: InputKind
    seed: int


def secret_seed() -> int:
    return secrets.randbits(62)


def plan(correctness_trials: int, probes: bool, fp32: bool, seed: int | None) -> list[Recipe]:
    """The correctness sets of one job: the task's own draws first, then the probes."""
    draw = (lambda i: seed * 1009 + i) if seed is not None else (lambda i: secret_seed())
    recipes = [Recipe(f"task-{i + 1}", InputKind.TASK, draw(i)) for i in range(correctness_trials)]
    if probes:
        kinds = [InputKind.NORMAL, InputKind.LARGE, InputKind.SMALL, InputKind.ZEROS]
        if fp32:
            kinds.append(InputKind.PRECISION)
        start = len(recipes)
        recipes += [Recipe(kind.value, kind, draw(start + i)) for i, kind in enumerate(kinds)]
    return recipes


def task_inputs(module: ModuleType, seed: int, device: torch.device) -> list[Any]:
    """get_inputs() under `seed`, drawn on the GPU (drawing GBs on the CPU, as KernelBench
    does, takes seconds per call); tensors it pins to the CPU move over, contiguous."""
    seed_rngs(seed)
    with torch.device(device):
        inputs = list(module.get_inputs())
    return [x.to(device).contiguous() if isinstance(x, torch.Tensor) else x for x in inputs]


def seed_rngs(seed: int) -> None:
    """torch.manual_seed, for the generators a task can draw from (CPU and CUDA) only: on a
    process whose CUDA is up, torch.manual_seed also queues a lazy seeding with a formatted
    stack trace for each backend that is not (XPU, MTIA), about 1 ms a call in the referee."""
    if torch.cuda.is_initialized():
        torch.default_generator.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)
    else:
        torch.manual_seed(seed)


def generate(module: ModuleType, recipe: Recipe, device: torch.device) -> list[Any]:
    inputs = task_inputs(module, recipe.seed, device)
    if recipe.kind == InputKind.TASK:
        return inputs
    generator = torch.Generator(device).manual_seed(recipe.seed)
    return [
        _draw(recipe.kind, x, generator) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
    ]


def _draw(kind: InputKind, like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Values of `like`'s shape and dtype; built in place, since inputs reach 8 GB."""
    shape, device = like.shape, like.device
    if kind == InputKind.PRECISION:
        # (1 + u) * 2^e with u uniform on 23+ bits and e in -2..2, random sign: rounding any
        # of them to tf32 (10 bits) or half (10 bits) moves it by up to 2^-11.
        values = torch.rand(shape, generator=generator, device=device, dtype=torch.float32).add_(1.0)
        exponent = torch.randint(-2, 3, shape, generator=generator, device=device, dtype=torch.int8)
        values.mul_(exponent.to(torch.float32).exp2_())
        del exponent
        sign = torch.randint(0, 2, shape, generator=generator, device=device, dtype=torch.int8)
        values.mul_(sign.to(torch.float32).mul_(2.0).sub_(1.0))
        return values.to(like.dtype)
    values = torch.randn(shape, generator=generator, device=device, dtype=torch.float32).mul_(_SCALE[kind])
    if kind == InputKind.ZEROS:
        values.masked_fill_(torch.rand(shape, generator=generator, device=device) < 1 / 3, 0.0)
    return values.to(like.dtype)


def perturb(pairs: list[tuple[torch.Tensor, torch.Tensor]], generator: torch.Generator) -> None:
    """Copy PERTURBED_ELEMENTS values of each tensor onto other random positions of it, in
    place and the same in both tensors of each pair (the referee's copy and the candidate's
    buffer): values stay in the task's distribution and the addresses do not change, so a
    result cached on addresses, or on a fingerprint of a few sampled values, goes stale."""
    for master, theirs in pairs:
        if master.numel() < 2:
            continue
        flat, other = master.view(-1), theirs.view(-1)
        device = master.device
        src = torch.randint(0, flat.numel(), (PERTURBED_ELEMENTS,), generator=generator, device=device)
        dst = torch.randint(0, flat.numel(), (PERTURBED_ELEMENTS,), generator=generator, device=device)
        values = flat[src]
        flat[dst] = values
        other[dst] = values
