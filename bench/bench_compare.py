"""Compare methods across several finished benches on the tasks they all finished.

    python bench/bench_compare.py LABEL=BENCH_DIR [LABEL=BENCH_DIR ...] [--json OUT]

Each BENCH_DIR is an `htam bench --out` folder (its results/runs.csv). Every (label,
method) pair becomes one row: correct runs, fast_1 and the geomean of the runs' best
speedups over eager and over torch.compile, over the tasks every pair finished (so a
partial bench is compared on the same tasks, and the table says how many). A task whose
run has no correct candidate counts 1.0, as in the bench's own *geomean*.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd


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


def _geomean(values: pd.Series) -> float:
    return math.exp(values.map(math.log).mean())


def compare(specs: list[str]) -> tuple[pd.DataFrame, list[str]]:
    runs = pd.concat([_runs(s) for s in specs], ignore_index=True)
    groups = list(dict.fromkeys(runs["group"]))
    seeds = runs.groupby("group")["seed"].nunique()
    common = sorted(set.intersection(*(set(runs.loc[runs.group == g, "task_id"]) for g in groups)))
    runs = runs[runs.task_id.isin(common)].copy()
    # as the bench's own geomeans (htam_graph/bench/metrics.py): a run without a correct
    # candidate counts 1.0; a correct one whose torch.compile was not timed is left out
    correct = runs["correct"].astype(bool)
    runs["x_eager"] = runs["speedup"].where(correct, 1.0).fillna(1.0)
    runs["x_compile"] = runs["speedup_compile"].where(correct, 1.0)
    rows = []
    for group in groups:
        g = runs[runs.group == group]
        rows.append(
            {
                "group": group,
                "seeds": int(seeds[group]),
                "runs": len(g),
                "correct": float(g["correct"].mean()),
                "fast_1": float((g["x_eager"] > 1.0).mean()),
                "geomean_vs_eager": _geomean(g["x_eager"]),
                "geomean_vs_compile": _geomean(g["x_compile"].dropna()) if g["x_compile"].notna().any() else None,
            }
        )
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
