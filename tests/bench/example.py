"""`htam bench` as a user runs it, against the fake endpoint of fake_llm.py with the
stand-in evaluator: the tests' bench, and the synthetic example report in docs/.

    python -m tests.bench.example docs/bench-example   # rewrite the example report
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.bench.fake_llm import BenchAnthropic, env

NOTE = (
    "Example of the report, made without a GPU or an LLM: a fake Anthropic endpoint "
    "(tests/bench/fake_llm.py) writes ReLU kernels for every task, and the stand-in evaluator invents their "
    "times. Regenerate it with `python -m tests.bench.example docs/bench-example`."
)


def environment(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without the user's HTAM_* and provider settings, plus `extra`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HTAM_", "ANTHROPIC_", "OPENAI_"))}
    return {**base, "COLUMNS": "200", **extra}


def htam(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "htam_graph", *args],
        env=environment(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def bench_args(out: Path, *tasks: str, methods: str, seeds: int, steps: int, workers: int) -> list[str]:
    return [
        "bench",
        *tasks,
        "--method",
        methods,
        "--seeds",
        str(seeds),
        "--steps",
        str(steps),
        "--evaluator",
        "stand-in",
        "--workers",
        str(workers),
        "--out",
        str(out),
    ]


def main(target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp, BenchAnthropic() as server:
        out = Path(tmp) / "bench"
        methods = "htam,htam-no-prefix,flat,feedback,vanilla"
        args = bench_args(out, "builtin", "--filter", "level1/1[0-9]_*", methods=methods, seeds=2, steps=4, workers=2)
        done = htam(*args, "--note", NOTE, env=env(server), timeout=3600)
        if done.returncode != 0:
            sys.exit(done.stderr)
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        shutil.copy(out / "report.md", target / "report.md")
        shutil.copytree(out / "plots", target / "plots")
        shutil.copytree(out / "results", target / "results", ignore=shutil.ignore_patterns("*.parquet"))
    print(f"example report in {target}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
