"""The tolerances a candidate's outputs are compared with (docs/judge.md): KernelBench's,
widened only by the reference's own rounding error against a float64 reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from htam_graph.runner import compare
from htam_graph.runner.referee.reference import Reference

# On the probe sets an honest kernel may round differently from the reference (cancellation
# in signed sums): its error may reach this multiple of the reference's own error against a
# float64 reference before it counts.
NOISE_FACTOR = 16.0


@dataclass(frozen=True)
class Tolerance:
    atol: float | None
    rtol: float | None
    noise_norm: float | None = None  # ||reference - float64 reference||, when known


def float64_deviations(
    reference: Reference, drawn: list[Any], expected: list[torch.Tensor]
) -> list[tuple[float, float] | None]:
    """Per output, (max, norm) of |reference - float64 reference| on these inputs; None for
    an output that is not floating or has no float64 twin (too large, or no float64 kernel)."""
    exact = reference.forward64(drawn)
    return [
        compare.deviation(ref, exact[i])
        if exact is not None and i < len(exact) and ref.is_floating_point() and exact[i].shape == ref.shape
        else None
        for i, ref in enumerate(expected)
    ]


class Tolerances:
    """One job's tolerances: the configured ones, and those measured on the task's own inputs."""

    def __init__(self, atol: float | None, rtol: float | None) -> None:
        self.atol, self.rtol = atol, rtol
        self.task: list[Tolerance] | None = None  # on the task's own inputs; set by measure_task

    def measure_task(self, reference: Reference, drawn: list[Any], expected: list[torch.Tensor]) -> None:
        """KernelBench's tolerances on the task's own inputs, widened only where the reference
        itself is further than that from float64: on an ill-conditioned task (a sum over a
        GEMM's output cancels to a small value) two honest fp32 kernels that add in different
        orders differ beyond 1e-4, as much as either differs from the exact result. Measured
        on the first task set of the reference as prepared (the referee keeps one task's, so
        once per job when jobs alternate between tasks); the reference's arithmetic, never
        the candidate's."""
        if reference.task_noise is None:
            deviations = float64_deviations(reference, drawn, expected)
            reference.task_noise = [d[0] if d is not None else 0.0 for d in deviations]
        found = []
        for ref, distance in zip(expected, reference.task_noise, strict=False):
            atol, rtol = compare.tolerance(ref.dtype, self.atol, self.rtol)
            if ref.is_floating_point() and NOISE_FACTOR * distance > atol:
                found.append(Tolerance(NOISE_FACTOR * distance, rtol))
            else:
                found.append(Tolerance(self.atol, self.rtol))
        self.task = found

    def task_output(self, output: int) -> tuple[float | None, float | None]:
        """(atol, rtol) for an output on the task's own inputs (see measure_task)."""
        if self.task is not None and output < len(self.task):
            tol = self.task[output]
            return tol.atol, tol.rtol
        return self.atol, self.rtol

    def outputs(self, count: int) -> list[Tolerance]:
        """Per output: the task's tolerances once measured, else the configured ones."""
        return self.task or [Tolerance(self.atol, self.rtol)] * count

    def probe(self, reference: Reference, drawn: list[Any], expected: list[torch.Tensor]) -> list[Tolerance]:
        """Tolerances for a probe set: KernelBench's, widened to NOISE_FACTOR times the
        reference's own rounding error (against float64), or, without a float64 reference,
        to the relative tolerance times the output's RMS."""
        found = []
        for ref, deviation in zip(expected, float64_deviations(reference, drawn, expected), strict=True):
            if not ref.is_floating_point():
                found.append(Tolerance(self.atol, self.rtol))
                continue
            atol, rtol = compare.tolerance(ref.dtype, self.atol, self.rtol)
            if deviation is not None:
                largest, norm = deviation
                found.append(Tolerance(max(atol, NOISE_FACTOR * largest), rtol, norm))
            else:
                found.append(Tolerance(max(atol, rtol * compare.rms(ref)), rtol))
        return found
