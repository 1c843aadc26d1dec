"""The like-for-like selection of a partial bench, and the progress the reward does not see
(no bench run needed)."""

import pandas as pd

from htam_graph.bench.metrics import finished_everywhere, per_method, per_seed, unseen_progress


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


def _step(run: str, method: str, index: int, verdict: str, speedup: float | None, reward: float) -> dict[str, object]:
    return {"run_id": run, "method": method, "index": index, "verdict": verdict, "speedup": speedup, "reward": reward}


def test_progress_below_eager_is_counted_where_the_reward_is_zero():
    steps = pd.DataFrame(
        [
            _step("g", "htam", 1, "ok", 0.75, 0.0),  # 6x the fastest so far, below eager: reward 0
            _step("g", "htam", 0, "ok", 0.125, 0.0),  # the first kernel: nothing to be faster than
            _step("g", "htam", 2, "compile_error", None, -1.0),
            _step("g", "htam", 3, "ok", 0.76, 0.0),  # 1.3% faster: under the 2% that counts
            _step("g", "htam", 4, "ok", 1.5, 0.585),  # beats eager: rewarded
            _step("g", "htam", 5, "ok", 0.9, 0.0),  # slower than the fastest
            _step("f", "feedback", 0, "ok", 1.2, 0.263),
            _step("f", "feedback", 1, "ok", 0.6, 0.0),
        ]
    )
    table = unseen_progress(steps).set_index("method")
    assert table.loc["htam"].tolist() == [5, 1, 1, 1]
    assert table.loc["feedback"].tolist() == [2, 1, 0, 0]
    assert list(table.index) == ["htam", "feedback"]
