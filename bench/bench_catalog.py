"""The strategy catalog over the built-in suite (or a KernelBench checkout) with the real
judge: `htam bench` with the catalog's defaults.

    python bench/bench_catalog.py [SUITE ...] [any htam bench option]

is `htam bench --llm catalog --method htam,feedback,htam-no-prefix --steps 6
--compile-reference --out bench-catalog SUITE` (SUITE: `builtin` unless given; options
given here override the defaults). Every method gets a fresh seeded memory that carries
over from task to task; torch.compile of every reference is timed in the same judge. The
report (docs/bench.md) has correctness, fast_1 and geomean speedups over eager and
torch.compile per method, per operator family (with the families the catalog supports
together) and per task. The bench saves every finished run: run the same command again to
continue one that was cut short. `--evaluator stand-in` tries it without a GPU (synthetic
times; never a result to quote).

The catalog's defaults are the honest ones: every run starts from the task's base kernel
(catalog-space-v1) and a step is rewarded against the kernel it modified (reward_from =
parent). The published GPU tables of docs/results.md used the tuned start; to run that again:

    HTAM_SCORING__REWARD_FROM=best python bench/bench_catalog.py --model catalog-v1
"""

from __future__ import annotations

import sys

import click

from htam_graph.cli import cli

DEFAULTS = [
    "--llm", "catalog",
    "--method", "htam,feedback,htam-no-prefix",
    "--steps", "6",
    "--compile-reference",
    "--out", "bench-catalog",
    "--note", "the strategy catalog (--llm catalog) with the real judge: bench/bench_catalog.py",
]  # fmt: skip


def given_suite(argv: list[str]) -> bool:
    """Whether the command line names a SUITE anywhere (before, between or after options):
    `htam bench`'s own parser reads it, so an option's value is never taken for a task."""
    bench = cli.get_command(click.Context(cli), "bench")
    assert bench is not None
    ctx = bench.make_context("htam bench", [*DEFAULTS, *argv], resilient_parsing=True)
    return bool(ctx.params.get("suite"))


def main(argv: list[str]) -> None:
    suite = [] if given_suite(argv) else ["builtin"]
    cli.main(["bench", *DEFAULTS, *suite, *argv], prog_name="htam")


if __name__ == "__main__":
    main(sys.argv[1:])
