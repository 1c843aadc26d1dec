"""Does the GPU agree with the replay? (issue 30 item 7; docs/method.md, "Comparing methods")

    python bench/bench_gpu_confirm.py GPU_MEMORY GPU_CONTROL REPLAY_MEMORY REPLAY_CONTROL [--json OUT]

Each argument is an `htam bench --out` folder (its results/metrics_per_seed.csv): the memory method
(htam with a trained memory) and the control (e.g. feedback), once judged on the GPU and once replayed
on the recorded table with the same protocol. Prints, for each world, each method's geomean over the
tasks (the mean over seeds of log geomeans, with a 95% t-CI) and the paired ratio memory / control (per
seed, 95% t-CI). The GPU agrees with the replay when each GPU interval holds the replay's estimate or the
two intervals overlap; the table says which.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from htam_graph.bench.memory_value import t_ci


def _per_seed(folder: Path) -> pd.Series:
    path = folder / "results" / "metrics_per_seed.csv"
    if not path.is_file():
        sys.exit(f"error: {path} does not exist: pass an `htam bench --out` folder of a finished bench")
    frame = pd.read_csv(path)
    if frame["method"].nunique() != 1:
        sys.exit(f"error: {path} holds several methods ({', '.join(frame['method'].unique())}): pass one per folder")
    return frame.set_index("seed")["geomean"].astype(float)


def _ci(logs: np.ndarray) -> dict[str, float | int]:
    m, lo, hi = t_ci(logs)
    return {"seeds": len(logs), "value": math.exp(m), "ci_lo": math.exp(lo), "ci_hi": math.exp(hi)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("gpu_memory", "gpu_control", "replay_memory", "replay_control"):
        parser.add_argument(name, type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for world in ("gpu", "replay"):
        memory, control = _per_seed(getattr(args, f"{world}_memory")), _per_seed(getattr(args, f"{world}_control"))
        seeds = memory.index.intersection(control.index)
        rows.append({"world": world, "what": "memory", **_ci(np.log(memory.loc[seeds].to_numpy()))})
        rows.append({"world": world, "what": "control", **_ci(np.log(control.loc[seeds].to_numpy()))})
        ratio = np.log(memory.loc[seeds].to_numpy() / control.loc[seeds].to_numpy())
        rows.append({"world": world, "what": "memory / control", **_ci(ratio)})
    table = pd.DataFrame(rows)
    for what in ("memory", "control", "memory / control"):
        gpu, replay = (table[(table.world == w) & (table.what == what)].iloc[0] for w in ("gpu", "replay"))
        holds = gpu.ci_lo <= replay.value <= gpu.ci_hi
        overlap = gpu.ci_lo <= replay.ci_hi and replay.ci_lo <= gpu.ci_hi
        table.loc[table.what == what, "agrees"] = "yes" if holds else "overlap" if overlap else "no"
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if args.json:
        args.json.write_text(json.dumps(table.to_dict(orient="records"), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
