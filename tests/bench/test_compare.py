"""bench/bench_compare.py: methods of several benches compared on the tasks all finished."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
COST = dict.fromkeys(["cost_usd", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"], 0.0)
_spec = importlib.util.spec_from_file_location("bench_compare", REPO / "bench" / "bench_compare.py")
assert _spec is not None and _spec.loader is not None
bench_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_compare)


def _bench(folder: Path, method: str, rows: list[tuple[str, bool, float | None, float | None]]) -> str:
    (folder / "results").mkdir(parents=True)
    pd.DataFrame(
        [
            {"task_id": t, "method": method, "seed": 0, "correct": ok, "speedup": x, "speedup_compile": c, **COST}
            for t, ok, x, c in rows
        ]
    ).to_csv(folder / "results" / "runs.csv", index=False)
    return str(folder)


def test_groups_are_compared_on_the_tasks_every_one_finished(tmp_path: Path) -> None:
    full = _bench(tmp_path / "full", "htam", [("t1", True, 2.0, 1.0), ("t2", True, 0.5, 0.25), ("t3", True, 8.0, 4.0)])
    partial = _bench(tmp_path / "partial", "htam", [("t1", True, 4.0, 2.0), ("t2", False, None, None)])
    table, common = bench_compare.compare([f"full={full}", f"warm={partial}"])
    assert common == ["t1", "t2"]  # t3 is left out: the partial bench did not finish it
    rows = table.set_index("group")
    assert rows.loc["full: htam", "geomean_vs_eager"] == pytest.approx(1.0)  # sqrt(2 * 0.5)
    assert rows.loc["full: htam", "geomean_vs_compile"] == pytest.approx(0.5)
    # a run without a correct candidate counts 1.0 against both references
    assert rows.loc["warm: htam", "geomean_vs_eager"] == pytest.approx(2.0)
    assert rows.loc["warm: htam", "geomean_vs_compile"] == pytest.approx(math.sqrt(2.0))
    assert rows.loc["warm: htam", "correct"] == pytest.approx(0.5) and rows.loc["warm: htam", "fast_1"] == 0.5


@pytest.mark.parametrize("spec", ["nolabel", "=x"])
def test_a_bench_without_a_label_is_a_clear_error(spec: str) -> None:
    with pytest.raises(bench_compare.BadInput, match="give LABEL=BENCH_DIR"):
        bench_compare.compare([spec])


def test_a_folder_without_results_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(bench_compare.BadInput, match="runs.csv is missing"):
        bench_compare.compare([f"a={tmp_path}"])


def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_compare.main([f"a={tmp_path}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "runs.csv is missing" in err
