"""Paired comparison of two `htam bench --train --test` outputs that differ in one setting:
htam (trained) with by_shape on against off, paired by seed, on the test tasks; the same
statistics as htam_graph/bench/memory_value.py (log geomean over tasks of the best speedup
per seed; mean difference with a 10,000-resample bootstrap 95% CI, rng seed 0).

    python pair.py OFF_DIR ON_DIR [--phase trained]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from htam_graph.bench.memory_value import boot_ci, geomeans, t_ci


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("off", type=Path)
    ap.add_argument("on", type=Path)
    ap.add_argument("--phase", default="trained")
    args = ap.parse_args()
    out = {}
    by = {}
    for label, folder in (("off", args.off), ("on", args.on)):
        runs = pd.read_csv(folder / args.phase / "results" / "runs.csv")
        gm = geomeans(runs[runs["method"] == "htam"])
        by[label] = gm.set_index("seed")["log_gm"]
        m, lo, hi = t_ci(by[label].to_numpy())
        out[label] = {"seeds": len(by[label]), "geomean": math.exp(m), "ci": [math.exp(lo), math.exp(hi)]}
    seeds = by["on"].index.intersection(by["off"].index)
    diffs = (by["on"][seeds] - by["off"][seeds]).to_numpy()
    m, lo, hi = boot_ci(diffs, np.random.default_rng(0))
    out["on_vs_off"] = {
        "seeds": len(seeds),
        "ratio": math.exp(m),
        "ci": [math.exp(lo), math.exp(hi)],
        "seeds_differing": int(np.sum(np.abs(diffs) > 1e-12)),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
