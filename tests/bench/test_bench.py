"""`htam bench` end to end without a GPU: real processes (the bench and its workers), the
real Anthropic SDK against a local fake endpoint (fake_llm.py), real nvcc builds and
static checks under the stand-in evaluator, real SQLite memories. One bench (2 tasks x 3
methods x 2 seeds x 2 steps, 2 workers) is run once and checked from every side; a second
is killed mid-run and continued, and must end exactly where the first did."""

from __future__ import annotations

import hashlib
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from htam_graph.bench.metrics import per_family, task_metrics, unseen_progress
from htam_graph.bench.plan import BenchManifest, Layout, MemorySource, streams
from htam_graph.bench.report import per_task_table, sandbox_text, write_report
from htam_graph.bench.results import collect, task_family
from htam_graph.bench.worker import read_snapshot
from htam_graph.cli import cli
from htam_graph.errors import UserError
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.runner.sandbox import ON_BY_DEFAULT
from htam_graph.tasks import builtin_suite_dir, load_tasks
from tests.bench.example import bench_args, environment, htam
from tests.bench.fake_llm import MODEL, SCRIPT, BenchAnthropic, env

TASKS = ("level1/19_ReLU", "level1/11_GELU")
METHODS = ("htam", "flat", "feedback")
SEEDS, STEPS = 2, 2
pytestmark = pytest.mark.nvcc


def args(out: Path, workers: int) -> list[str]:
    return bench_args(out, *TASKS, methods=",".join(METHODS), seeds=SEEDS, steps=STEPS, workers=workers)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, int]:
    """The bench run once, uninterrupted: its folder, its --json summary, the kernels it asked for."""
    out = tmp_path_factory.mktemp("bench") / "out"
    with BenchAnthropic() as server:
        done = htam(*args(out, workers=2), "--json", env=env(server))
    assert done.returncode == 0, done.stderr
    return out, json.loads(done.stdout), server.kernel_calls


def _steps(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((folder / "steps").glob("*.json"))]


def _by_hand(out: Path) -> pd.DataFrame:
    """The metrics per method and seed, from the run folders' JSON and docs/method.md alone."""
    rows = []
    for folder in sorted((out / "runs").iterdir()):
        run = json.loads((folder / "run.json").read_text())["run"]
        steps = _steps(folder)
        speedups = [s["attempts"][-1]["result"]["speedup_eager"] for s in steps if s["update"]["verdict"] == "ok"]
        cost = sum(call["usage"]["cost_usd"] for s in steps for call in s["calls"])
        rows.append({"method": run["method"], "seed": run["seed"], "best": max(speedups, default=None), "cost": cost})
    runs = pd.DataFrame(rows)
    table = []
    for (method, seed), group in runs.groupby(["method", "seed"]):
        best = [b for b in group["best"] if not pd.isna(b)]
        table.append(
            {
                "method": method,
                "seed": seed,
                "correct": len(best) / len(group),
                "fast_1": sum(b > 1 for b in best) / len(group),
                "geomean": math.prod(best) ** (1 / len(group)),  # failed tasks count 1.0
                "geomean_correct": math.prod(best) ** (1 / len(best)) if best else math.nan,
                "cost_usd": group["cost"].mean(),
            }
        )
    return pd.DataFrame(table)


def test_tables_hold_a_row_per_run_and_per_step(finished):
    out, summary, _ = finished
    runs = pd.read_parquet(out / "results" / "runs.parquet")
    steps = pd.read_parquet(out / "results" / "steps.parquet")
    assert len(runs) == len(TASKS) * len(METHODS) * SEEDS and len(steps) == len(runs) * STEPS
    assert set(runs["evaluator"]) == {"stand-in"} and set(runs["llm"]) == {f"anthropic:{MODEL}"}
    assert runs["device"].str.contains("synthetic").all()
    assert (runs["input_tokens"] > 0).all() and (runs["cache_read_tokens"] > 0).all() and (runs["cost_usd"] > 0).all()
    csv = pd.read_csv(out / "results" / "runs.csv")
    assert csv["run_id"].tolist() == runs["run_id"].tolist()
    assert csv["speedup"].tolist() == pytest.approx(runs["speedup"].tolist(), nan_ok=True)
    # The *_ms columns are the costs the speedups divide (GPU or host time, the larger), the
    # *_gpu_ms columns the GPU times alone.
    ok = runs[runs["correct"]]
    assert len(ok) and ok["speedup"].tolist() == pytest.approx((ok["eager_ms"] / ok["candidate_ms"]).tolist())
    assert (ok["candidate_ms"] >= ok["candidate_gpu_ms"]).all() and (ok["eager_ms"] >= ok["eager_gpu_ms"]).all()
    assert len(pd.read_csv(out / "results" / "steps.csv")) == len(steps)
    assert summary["runs"] == len(runs) and [m["method"] for m in summary["methods"]] == list(METHODS)


def test_metrics_agree_with_a_hand_computation(finished):
    out, summary, _ = finished
    hand = _by_hand(out).sort_values(["method", "seed"]).reset_index(drop=True)
    table = pd.read_csv(out / "results" / "metrics_per_seed.csv").sort_values(["method", "seed"])
    table = table.reset_index(drop=True)
    for column in ("correct", "fast_1", "geomean", "geomean_correct", "cost_usd"):
        assert table[column].tolist() == pytest.approx(hand[column].tolist(), nan_ok=True), column
    # The fake fails the baselines on GELU, so the two geomeans differ there and not for htam.
    assert set(hand.loc[hand["method"] != "htam", "correct"]) == {0.5} and set(
        hand.loc[hand["method"] == "htam", "correct"]
    ) == {1.0}
    mean = hand.groupby("method")["geomean"].mean()
    assert {m["method"]: m["geomean"] for m in summary["methods"]} == pytest.approx(mean.to_dict())
    assert (
        table["compile_timed"].eq(0).all() and table["geomean_compile"].isna().all()
    )  # the stand-in times no torch.compile


def test_the_policys_draws_agree_with_the_step_records(finished):
    """steps.csv's p_chosen, draw_entropy and score_spread, recomputed from each step's
    recorded probabilities and scores; the report's table is their mean (median spread)."""
    out, _, _ = finished
    steps = pd.read_csv(out / "results" / "steps.csv").set_index(["run_id", "index"])
    for folder in sorted((out / "runs").iterdir()):
        for record in _steps(folder):
            row = steps.loc[(folder.name, record["index"])]
            drawable = {g: p for g, p in record["probabilities"].items() if p > 0}
            if not drawable:  # flat and feedback draw no global direction
                assert pd.isna(row["p_chosen"]) and pd.isna(row["draw_entropy"])
                continue
            assert row["p_chosen"] == pytest.approx(drawable[record["update"]["global_id"]])
            scores = [record["scores"][g] for g in drawable]
            assert row["score_spread"] == pytest.approx(max(scores) - min(scores))
            n = len(drawable)
            entropy = -sum(p * math.log(p) for p in drawable.values()) / math.log(n) if n > 1 else math.nan
            assert row["draw_entropy"] == pytest.approx(entropy, nan_ok=True)
    table = pd.read_csv(out / "results" / "metrics_policy.csv").set_index("method")
    assert list(table.index) == ["htam"]  # flat and feedback draw no global direction
    for method, t in table.iterrows():
        mine = steps[steps["method"] == method]
        assert t["steps_drawn"] == len(mine) and t["p_chosen"] == pytest.approx(mine["p_chosen"].mean())
        assert t["score_spread"] == pytest.approx(mine["score_spread"].median())
    report = (out / "report.md").read_text()
    assert "## The policy's draws" in report and f"| htam | {table.loc['htam', 'steps_drawn']} |" in report


def test_the_report_counts_progress_the_reward_does_not_see(finished):
    """metrics_unseen_progress.csv is unseen_progress over steps.csv, one row per method, and
    the report shows it."""
    out, _, _ = finished
    steps = pd.read_csv(out / "results" / "steps.csv")
    table = pd.read_csv(out / "results" / "metrics_unseen_progress.csv")
    assert table.to_dict("records") == unseen_progress(steps).to_dict("records")
    assert sorted(table["method"]) == sorted(steps["method"].unique())
    assert (
        table.set_index("method")["steps_ok"].to_dict()
        == steps[steps["verdict"] == "ok"].groupby("method").size().to_dict()
    )
    report = (out / "report.md").read_text()
    assert "## Progress the reward does not see" in report
    first = table.iloc[0]
    assert f"| {first['method']} | {first['steps_ok']} | {first['rewarded']} |" in report
    assert "reward_from = fastest, which" not in report
    assert "This bench ran with reward_from = parent" in report  # the default reward says what it counts


@pytest.mark.parametrize(
    ("reward_from", "says"),
    [
        ("fastest", "This bench ran with reward_from = fastest, which measures a step's gain"),
        ("best", "A step's reward is the gain in the run's best speedup, which starts at the reference's 1.0"),
    ],
)
def test_the_report_says_what_the_reward_is_measured_from(finished, tmp_path, reward_from, says):
    """A bench configured with reward_from = fastest gets a report whose unseen-progress
    paragraph says its last two columns are 0 by construction; one with best (the tuned-start
    tables' reward) says a step below eager earns 0."""
    out, _, _ = finished
    manifest = BenchManifest.read(Layout(out))
    results = collect(Layout(out), manifest, streams(manifest.config))
    scoring = manifest.config.scoring.model_copy(update={"reward_from": reward_from})
    other = manifest.model_copy(update={"config": manifest.config.model_copy(update={"scoring": scoring})})
    layout = Layout(tmp_path)
    write_report(layout, other, results)
    report = layout.report.read_text()
    assert f"reward_from = {reward_from}" in report.split("## Results")[0]  # the scoring line
    assert says in report and "reward_from = parent" not in report


def test_the_report_says_where_its_numbers_come_from(finished):
    out, _, _ = finished
    report = (out / "report.md").read_text()
    assert "Synthetic numbers, not a benchmark" in report and "**stand-in**" in report
    assert (
        "| scoring (docs/method.md) | K = 3, lam = 0.5, alpha = 2, beta = 0.5, tau = 0.5, reward_from = parent, "
        "by_family = true, by_shape = false, deadband = 0.03 |" in report
    )
    assert f"anthropic:{MODEL}" in report and "not timed: the stand-in evaluator does not time it" in report
    assert f"| sandbox | {sandbox_text('stand-in', ON_BY_DEFAULT)} |" in report  # the default, said as it is
    for method in METHODS:
        assert f"| **{method}** |" in report
    assert (
        "| method | dollars | input tokens | cache reads tokens | cache writes tokens | output tokens | cached share |"
        in report
    )
    for plot in ("fast_p", "speedup", "cost"):
        assert f"(plots/{plot}.png)" in report
        assert (out / "plots" / f"{plot}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (out / "memory").glob("*.json")) == sorted(
        f"{m}-s{s}.json" for m in METHODS for s in range(SEEDS)
    )


def _without_times(export: Path) -> dict:
    snapshot = read_snapshot(export)[0].model_dump(mode="json")
    for run in snapshot["runs"]:
        run.pop("started_at")
    for step in snapshot["steps"]:
        step.pop("created_at")
    return snapshot


def _table(out: Path, name: str) -> pd.DataFrame:
    """The table without what depends on timing: seconds, and which judgements were served
    again (two workers may judge the same code at once; one worker judges it once)."""
    table = pd.read_parquet(out / "results" / f"{name}.parquet").drop(columns="seconds")
    return table.drop(columns=[c for c in ("reused",) if c in table])


def test_a_killed_bench_continues_where_it_stopped_and_runs_nothing_twice(finished, tmp_path):
    """SIGKILL the bench (one worker) while its sixth kernel is being written, in the
    second step of the first flat run; report what is there (--report-only); run the same
    command again."""
    whole, _, whole_calls = finished
    out = tmp_path / "out"
    with BenchAnthropic(hold_at=6) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "htam_graph", *args(out, workers=1)],
            env=environment(env(server)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while not server.held.is_set():
            assert proc.poll() is None and time.monotonic() < deadline, "the bench ended before the sixth kernel"
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        server.release()
        seen = len(server.requests)
        time.sleep(1.0)
        assert len(server.requests) == seen, "a worker outlived the killed bench"
    finished_runs = sorted(p.name for p in (out / "runs").iterdir() if (p / "trajectory.json").is_file())
    assert len(finished_runs) == 2 and all("-htam-s0-" in n for n in finished_runs)  # the first stream
    partial = [p for p in (out / "runs").iterdir() if not (p / "trajectory.json").is_file()]
    assert len(partial) == 1 and "-flat-s0-" in partial[0].name and len(_steps(partial[0])) == 1
    assert not (out / "report.md").exists()
    partial = CliRunner().invoke(cli, ["bench", "--report-only", "--out", str(out)])  # no GPU, no LLM needed
    assert partial.exit_code == 0, partial.output
    report = (out / "report.md").read_text()
    assert "Partial: 2 of 12 runs have finished" in report
    assert "No task has all its runs finished yet" in report  # only htam's first stream finished
    with BenchAnthropic() as server:
        done = htam(*args(out, workers=1), env=env(server))
        assert done.returncode == 0, done.stderr
        assert "(2 done)" in done.stdout
        assert server.kernel_calls == whole_calls - 5  # the held sixth is asked again; nothing else
    assert "Partial" not in (out / "report.md").read_text()
    assert pd.read_parquet(out / "results" / "steps.parquet")["reused"].any()  # seeds meet the same kernels
    for name in ("runs", "steps"):
        pd.testing.assert_frame_equal(_table(out, name), _table(whole, name))
    for export in sorted((whole / "memory").glob("*.json")):
        assert _without_times(out / "memory" / export.name) == _without_times(export), export.name


def test_a_bench_starts_each_memory_from_an_export(finished, tmp_path):
    """--memory-from with the script backend: the imported runs are in the new memory."""
    source = finished[0] / "memory" / "htam-s0.json"
    imported, _ = read_snapshot(source)  # the bench wrote it as `htam memory export` does
    assert json.loads(source.read_text().splitlines()[0]) == {"format": "htam-graph/memory", "version": 3}
    out = tmp_path / "out"
    done = htam(
        "bench",
        "level1/7_Softmax",
        "--method",
        "htam",
        "--steps",
        "1",
        "--llm",
        "script",
        "--script",
        str(SCRIPT),
        "--evaluator",
        "stand-in",
        "--memory-from",
        str(source),
        "--out",
        str(out),
        "--json",
        env={},
    )
    assert done.returncode == 0, done.stderr
    with SQLiteStore(out / "memory" / "htam-s0.sqlite") as store:
        runs = {r.id for r in store.get_runs()}
        assert len(store.get_steps()) == len(imported.steps) + 1
    assert {r.id for r in imported.runs} < runs and len(runs) == len(imported.runs) + 1
    report = (out / "report.md").read_text()
    assert f"imported into each from `{source}`" in report and "replayed from a script" in report


def test_compile_metrics_count_failed_tasks_as_one_and_leave_out_untimed_ones():
    runs = pd.DataFrame(
        {
            "correct": [True, True, True, False],
            "speedup": [2.0, 0.5, 4.0, math.nan],
            "speedup_compile": [1.0, 0.25, math.nan, math.nan],  # the third was not timed against torch.compile
            **{
                c: [0.0] * 4
                for c in ("cost_usd", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
            },
        }
    )
    m = task_metrics(runs)
    assert m["correct"] == 0.75 and m["fast_1"] == 0.5 and m["fast_2"] == 0.25  # fast_p is strictly faster than p
    assert m["geomean"] == pytest.approx((2.0 * 0.5 * 4.0 * 1.0) ** 0.25)
    assert m["geomean_correct"] == pytest.approx((2.0 * 0.5 * 4.0) ** (1 / 3))
    assert m["compile_timed"] == 2
    assert m["geomean_compile"] == pytest.approx((1.0 * 0.25 * 1.0) ** (1 / 3))  # the failed task counts 1.0
    assert m["geomean_compile_correct"] == pytest.approx((1.0 * 0.25) ** 0.5)


def test_tasks_are_grouped_by_the_family_the_catalog_recognises(finished):
    out, _, _ = finished
    runs = pd.read_csv(out / "results" / "runs.csv")
    assert set(runs["family"]) == {"elementwise"}  # ReLU and GELU
    report = (out / "report.md").read_text()
    assert "## Per operator family" in report and "| elementwise | htam | 2 |" in report
    assert "| `level1/19_ReLU` | elementwise |" in report
    assert len(pd.read_csv(out / "results" / "metrics_per_family.csv")) == len(METHODS)


def test_a_task_file_gone_is_found_in_the_suite_by_its_hash_and_otherwise_unknown(tmp_path):
    relu = next(t for t in load_tasks(builtin_suite_dir()) if t.id == "level1/19_ReLU")
    assert task_family(str(tmp_path / "elsewhere.py"), relu.sha256) == "elementwise"
    assert task_family(str(tmp_path / "elsewhere.py"), "0" * 64) == "unknown"
    odd = tmp_path / "odd.py"
    odd.write_text("import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                   "        return torch.linalg.svd(x).S\n\ndef get_inputs():\n    return [torch.rand(8, 8)]\n\n"
                   "def get_init_inputs():\n    return []\n")  # fmt: skip
    assert task_family(str(odd), hashlib.sha256(odd.read_bytes()).hexdigest()) == "unsupported"


def test_per_family_adds_the_supported_tasks_when_some_are_unsupported():
    zeros = {
        c: [0.0] * 3 for c in ("cost_usd", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    }
    runs = pd.DataFrame(
        {
            "method": ["htam"] * 3,
            "seed": [0] * 3,
            "family": ["norm", "unsupported", "softmax"],
            "correct": [True, False, True],
            "speedup": [2.0, math.nan, 0.5],
            "speedup_compile": [math.nan] * 3,
            **zeros,
        }
    )
    table = per_family(runs).set_index("family")
    assert list(table.index) == ["norm", "softmax", "unsupported", "supported"]
    assert table.loc["supported", "tasks"] == 2 and table.loc["supported", "correct"] == 1.0
    assert table.loc["supported", "geomean"] == pytest.approx(1.0)
    assert table.loc["unsupported", "correct"] == 0.0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--method", "htam,nope"], "unknown method 'nope'"),
        (["--filter", "no-such-task"], "has no tasks left after --level/--filter"),
        (["--evaluator", "gpu", "--gpus", "99"], "GPU"),
        (["--memory-from", "BAD"], "not an htam-graph memory export"),
        (["--out", "FINISHED"], "holds another bench: its seeds: 0,1; this command's: 0"),
    ],
)
def test_bad_input_is_one_error_before_anything_is_written(extra, message, finished, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"globals": 3}')
    out = tmp_path / "out"
    manifest = finished[0] / "bench.json"
    before = manifest.read_bytes()
    given = [str(bad) if a == "BAD" else str(finished[0]) if a == "FINISHED" else a for a in extra]
    base = ["bench", *TASKS, "--llm", "script", "--script", str(SCRIPT), "--evaluator", "stand-in", "--out", str(out)]
    result = CliRunner().invoke(cli, [*base, *given])
    assert isinstance(result.exception, UserError) and result.exception.exit_code == 2, result.output
    assert message in str(result.exception)
    assert not out.exists() and manifest.read_bytes() == before


def test_the_per_task_table_marks_failed_and_untimed_runs():

    runs = pd.DataFrame(
        {
            "task_id": ["a", "a", "b", "b"],
            "family": ["softmax"] * 4,
            "method": ["htam", "feedback"] * 2,
            "seed": [0] * 4,
            "correct": [True, True, False, True],
            "speedup": [1.5, 2.0, math.nan, 0.5],
            "speedup_compile": [0.75, 1.0, math.nan, math.nan],
        }
    )
    over_compile = per_task_table(runs, ["feedback", "htam"], "speedup_compile").splitlines()
    assert over_compile[2:] == ["| `a` | softmax | 1.00 | 0.75 |", "| `b` | softmax | - | ✗ |"]
    assert per_task_table(runs, ["feedback", "htam"], "speedup").splitlines()[3] == "| `b` | softmax | 0.50 | ✗ |"


def test_the_bench_tag_follows_what_decides_the_runs_not_where_files_lie(finished):
    """Run ids end in the tag and seed every draw: a clone elsewhere (other task paths) or a
    memory export elsewhere or rewritten with new timestamps (other path, other file digest, the
    same content) gives the same tag; another task text or another memory, another tag."""
    config = BenchManifest.read(Layout(finished[0])).config
    moved = [t.model_copy(update={"path": "/another/clone/" + Path(t.path).name}) for t in config.tasks]
    assert config.model_copy(update={"tasks": moved, "suite": "/another/clone/tasks.txt"}).tag == config.tag
    # other methods or more seeds beside a run change none of its draws
    assert config.model_copy(update={"methods": config.methods[:1], "seeds": [0, 1, 2, 3]}).tag == config.tag
    edited = [config.tasks[0].model_copy(update={"sha256": "0" * 64}), *config.tasks[1:]]
    assert config.model_copy(update={"tasks": edited}).tag != config.tag
    memory = MemorySource(path="/here/memory", sha256="a" * 64, content="c" * 64)
    elsewhere = MemorySource(path="/there/memory", sha256="b" * 64, content="c" * 64)
    other = MemorySource(path="/here/memory", sha256="a" * 64, content="d" * 64)
    tags = [config.model_copy(update={"memory_from": m}).tag for m in (memory, elsewhere, other)]
    assert tags[0] == tags[1] != tags[2] and config.tag not in tags
    # a bench keeps the tag it began with: its manifest's names its runs
    assert {s.run_id.rsplit("-", 1)[1] for stream in streams(config, "abc123") for s in stream.runs} == {"abc123"}
