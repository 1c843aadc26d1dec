"""The like-for-like selection of a partial bench (no bench run needed)."""

import pandas as pd

from htam_graph.bench.metrics import finished_everywhere, per_method, per_seed


def _run(task: str, method: str, seed: int, speedup: float) -> dict[str, object]:
    return {
        "task_id": task, "method": method, "seed": seed, "correct": True, "speedup": speedup,
        "speedup_compile": speedup / 2, "cost_usd": 0.0, "input_tokens": 0, "output_tokens": 0,
        "cache_read_tokens": 0, "cache_write_tokens": 0,
    }  # fmt: skip


def test_a_partial_bench_compares_methods_on_the_tasks_every_run_finished():
    runs = pd.DataFrame(
        [
            _run("a", "htam", 0, 2.0), _run("a", "feedback", 0, 1.0),  # both methods finished a
            _run("b", "htam", 0, 8.0),  # feedback has not finished b: b would flatter htam
        ]
    )  # fmt: skip
    common = finished_everywhere(runs, planned_per_task=2)
    assert sorted(common["task_id"].unique()) == ["a"]
    table = per_method(per_seed(common)).set_index("method")
    assert table.loc["htam", "geomean"] == 2.0 and table.loc["feedback", "geomean"] == 1.0
    assert table.loc["htam", "geomean_compile"] == 1.0
    assert finished_everywhere(runs, planned_per_task=3).empty
