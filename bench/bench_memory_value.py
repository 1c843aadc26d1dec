"""Does the memory earn its place? A train/test comparison of HTAM against its controls,
replayed on a recorded table of the catalog's kernel space (no GPU; docs/method.md,
"Comparing methods"). A thin wrapper over `htam bench --train --test` that fixes the world:

- the table (`htam catalog record`), the catalog's space (`--model catalog-space-v1`): every run
  starts from the task's base kernel; reward_from = parent (signed gain over the kernel the step
  modified, 0 within the dead-band); T steps (--steps); tau (--tau);
- tasks: bench/tables/suite-train.txt and suite-test.txt (alternate tasks of each family, fixed
  before any outcome) unless --train/--test say otherwise;
- the protocol and statistics: htam_graph/bench/memory_value.py (PROTOCOL, written into the report).

    python bench/bench_memory_value.py --table bench/results/table-.../table.parquet --seeds 50 --out OUT

Writes OUT/memory-value.md and .json (and OUT/fresh, OUT/train, OUT/trained: the three benches).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMORY = ["htam", "htam-no-prefix", "htam-no-family", "flat"]
CONTROLS = ["random", "feedback", "expert"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--table", type=Path, required=True)
    p.add_argument("--train", type=Path, default=ROOT / "bench/tables/suite-train.txt")
    p.add_argument("--test", type=Path, default=ROOT / "bench/tables/suite-test.txt")
    p.add_argument("--methods", default=",".join(MEMORY + CONTROLS), help="comma-separated [%(default)s]")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--tau", type=float, default=0.5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    cmd = [
        sys.executable, "-m", "htam_graph", "bench", "--train", str(args.train), "--test", str(args.test),
        "--llm", "catalog", "--model", "catalog-space-v1", "--evaluator", "replay", "--replay", str(args.table),
        "--method", ",".join(methods), "--seeds", str(args.seeds), "--steps", str(args.steps),
        "--workers", str(args.workers), "--no-compile-reference", "--out", str(args.out),
    ]  # fmt: skip
    env = {**os.environ, "HTAM_SCORING__REWARD_FROM": "parent", "HTAM_SCORING__TAU": str(args.tau)}
    print("$", " ".join(cmd), flush=True)
    began = time.monotonic()
    if code := subprocess.run(cmd, env=env).returncode:
        return code  # htam bench said why, in one line
    print(f"{time.monotonic() - began:.0f} s; report: {args.out / 'memory-value.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
