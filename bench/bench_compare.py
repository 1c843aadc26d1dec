"""Compare methods across several finished benches on the tasks they all finished.

    python bench/bench_compare.py LABEL=BENCH_DIR [LABEL=BENCH_DIR ...] [--json OUT]

Each BENCH_DIR is an `htam bench --out` folder (its results/runs.csv). Every (label,
method) pair becomes one row: correct runs, fast_1 and the geomean of the runs' best
speedups over eager and over torch.compile, over the tasks every pair finished (so a
partial bench is compared on the same tasks, and the table says how many). The metrics are
the bench report's own (htam_graph/bench/metrics.py: a task whose run has no correct
candidate counts 1.0; the mean over seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

from htam_graph.bench.metrics import per_method, per_seed


class BadInput(ValueError):
    """A bench argument that names no finished bench."""


def _runs(spec: str) -> pd.DataFrame:
    label, sep, folder = spec.partition("=")
    if not sep or not label:
        raise BadInput(f"bad bench {spec!r}: give LABEL=BENCH_DIR")
    path = Path(folder) / "results" / "runs.csv"
    if not path.is_file():
        raise BadInput(f"{path} is missing: give an `htam bench --out` folder (or run --report-only on it)")
    runs = pd.read_csv(path)
    runs["group"] = label + ": " + runs["method"]
    return runs


def compare(specs: list[str]) -> tuple[pd.DataFrame, list[str]]:
    runs = pd.concat([_runs(s) for s in specs], ignore_index=True)
    common = sorted(set.intersection(*(set(group["task_id"]) for _, group in runs.groupby("group", sort=False))))
    # the bench's own metrics (htam_graph/bench/metrics.py), each (label, method) a method
    seeds = per_seed(runs[runs["task_id"].isin(common)].assign(method=lambda r: r["group"]))
    table = per_method(seeds)
    rows = [
        {
            "group": m["method"],
            "seeds": int(m["seeds"]),
            "runs": int(m["tasks"] * m["seeds"]),
            "correct": m["correct"],
            "fast_1": m["fast_1"],
            "geomean_vs_eager": m["geomean"],
            "geomean_vs_compile": None if math.isnan(m["geomean_compile"]) else m["geomean_compile"],
        }
        for _, m in table.iterrows()
    ]
    return pd.DataFrame(rows), common


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benches", nargs="+", metavar="LABEL=BENCH_DIR")
    parser.add_argument("--json", type=Path, help="also write the table and the task list here")
    args = parser.parse_args(argv)
    try:
        table, common = compare(args.benches)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"{len(common)} tasks finished by every group\n")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.json:
        payload = {"benches": args.benches, "tasks": common, "rows": table.to_dict(orient="records")}
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
        print(f"\nwritten: {args.json}")


if __name__ == "__main__":
    main(sys.argv[1:])
