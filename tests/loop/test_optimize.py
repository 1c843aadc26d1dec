"""`htam optimize` end to end as a user runs it: a real process, the real SDKs against
local servers that speak each wire protocol (tests/loop/fake_llm.py), real nvcc builds
and static checks (the stand-in evaluator: no GPU here, and every output says so), and
the real memory stores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.vocab import Method, Verdict
from tests.conftest import neo4j_env
from tests.llm.fakes import API_KEY, closed_port_url
from tests.loop.fake_llm import KernelWritingAnthropic, KernelWritingOpenAI

MODEL = "claude-sonnet-5-5"  # priced in the shipped table
TASK = "level1/19_ReLU"
pytestmark = pytest.mark.nvcc


def htam(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HTAM_", "ANTHROPIC_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "htam_graph", *args],
        cwd=cwd,
        env={**base, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def anthropic_env(server: KernelWritingAnthropic) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": API_KEY, "HTAM_LLM__BASE_URL": server.url, "HTAM_LLM__MODEL": MODEL}


def local_env(path: Path) -> dict[str, str]:
    return {"HTAM_STORE": "local", "HTAM_LOCAL_PATH": str(path)}


def seeded_local(path: Path) -> Path:
    with SQLiteStore(path) as store:
        store.seed(load_seed_bank())
    return path


def optimize(*extra: str, cwd: Path, env: dict[str, str], out: Path | None = None) -> dict:
    out = out or cwd / "runs"
    r = htam("optimize", TASK, "--evaluator", "stand-in", "--out", str(out), "--json", *extra, cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.neo4j
@pytest.mark.parametrize("method", [m.value for m in Method])
def test_every_method_runs_against_the_anthropic_protocol_and_real_neo4j(method, neo4j_store, tmp_path):
    neo4j_store.seed(load_seed_bank())
    with KernelWritingAnthropic({MODEL}) as server:
        summary = optimize(
            "--method", method, "--steps", "6", cwd=tmp_path, env={**neo4j_env(), **anthropic_env(server)}
        )
    planned = 1 if method == "vanilla" else 6
    assert (summary["steps_done"], summary["steps_planned"], summary["stopped"]) == (planned, planned, "done")
    assert summary["evaluator"] == "stand-in" and "synthetic" in summary["device"]
    verdicts = [Verdict(t["verdict"]) for t in summary["trajectory"]]
    if planned == 6:  # the fake's script: step 2 repaired, 4 a cheat, 5 no code
        assert verdicts[1] == Verdict.OK and verdicts[3] == Verdict.REJECTED and verdicts[4] == Verdict.NO_CANDIDATE
    steps = neo4j_store.get_steps(summary["run_id"])
    assert [s.verdict for s in steps] == verdicts
    assert [s.reward for s in steps] == [t["reward"] for t in summary["trajectory"]]
    # random draws a strategy (and so its direction) uniformly; the memory methods choose theirs
    chose = method in ("htam", "htam-no-prefix", "htam-no-local", "htam-no-hierarchy", "htam-no-family", "random")
    assert all((s.global_id is not None) == chose for s in steps)
    assert all((s.local_id is not None) == (chose and method != "htam-no-local") for s in steps)
    attempts = sum(g.attempts for g in neo4j_store.get_globals())
    assert attempts == (planned if chose else 0)
    folder = Path(summary["folder"])
    assert (folder / "best.py").is_file() == (summary["best_step"] is not None)
    assert len(list((folder / "steps").glob("*.json"))) == planned
    usage = summary["usage"]
    assert usage["input_tokens"] > 0 and usage["cache_read_tokens"] > 0 and usage["cost_usd"] is not None


def test_a_run_against_an_openai_compatible_endpoint(tmp_path):
    store = seeded_local(tmp_path / "m.sqlite")
    with KernelWritingOpenAI({"deepseek-reasoner"}) as server:
        env = {
            **local_env(store),
            "OPENAI_API_KEY": API_KEY,
            "HTAM_LLM__BACKEND": "openai",
            "HTAM_LLM__MODEL": "deepseek-reasoner",
            "HTAM_LLM__BASE_URL": f"{server.url}/v1",
        }
        summary = optimize("--steps", "3", cwd=tmp_path, env=env)
        # deepseek-reasoner takes no forced tool call: JSON mode, with its reasoning budget on top
        structured = [r for r in server.generation_requests() if "response_format" in r.body]
        assert not any("tools" in r.body for r in server.generation_requests())
    assert summary["steps_done"] == 3 and len(structured) == 3
    assert all(r.body["max_tokens"] > 16000 for r in structured)
    assert summary["events"] == {}
    record = json.loads((Path(summary["folder"]) / "steps" / "000.json").read_text())
    assert record["calls"][1]["reasoning"] == "thinking about memory access"  # kept apart from the code


def test_the_run_folder_replays_exactly_with_the_script_backend(tmp_path):
    store = seeded_local(tmp_path / "m.sqlite")
    with KernelWritingAnthropic({MODEL}) as server:
        first = optimize(
            "--steps", "4", "--run-id", "first", cwd=tmp_path, env={**local_env(store), **anthropic_env(server)}
        )
    script = Path(first["folder"]) / "responses.yaml"
    other = seeded_local(tmp_path / "other.sqlite")
    again = optimize("--llm", "script", "--script", str(script), "--steps", "4", "--run-id", "first",
                     cwd=tmp_path, env=local_env(other), out=tmp_path / "replay")  # fmt: skip
    unpaid = dict.fromkeys(("cost_usd", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"))
    assert [t | unpaid for t in again["trajectory"]] == [t | unpaid for t in first["trajectory"]]


def _export_without_times(path: Path) -> dict:
    with SQLiteStore(path) as store:
        snap = store.export().model_dump(mode="json", exclude={"runs": {"__all__": {"started_at"}}})
    for step in snap["steps"]:
        step.pop("created_at")
    return snap


def test_a_run_killed_mid_step_resumes_to_the_same_memory(tmp_path):
    """SIGKILL while step 4 waits for its kernel, resume, compare with an uninterrupted run."""
    whole = seeded_local(tmp_path / "whole.sqlite")
    with KernelWritingAnthropic({MODEL}) as server:
        optimize("--run-id", "r1", "--seed", "7", cwd=tmp_path, env={**local_env(whole), **anthropic_env(server)},
                 out=tmp_path / "a")  # fmt: skip
    killed = seeded_local(tmp_path / "killed.sqlite")
    out = tmp_path / "b"
    with KernelWritingAnthropic({MODEL}) as server:
        server.hold_at_step = 4
        base = {k: v for k, v in os.environ.items() if not k.startswith(("HTAM_", "ANTHROPIC_"))}
        env = {**base, **local_env(killed), **anthropic_env(server)}
        args = ["optimize", TASK, "--evaluator", "stand-in", "--out", str(out), "--run-id", "r1", "--seed", "7"]
        proc = subprocess.Popen([sys.executable, "-m", "htam_graph", *args], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 300
        while not server.held.is_set():
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended before step 4"
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        server.release()
    with SQLiteStore(killed) as store:
        assert len(store.get_steps("r1")) == 3  # steps 1-3 were recorded, step 4 was not
    with KernelWritingAnthropic({MODEL}) as server:
        r = htam("optimize", TASK, "--evaluator", "stand-in", "--out", str(out), "--resume", "r1", "--json",
                 cwd=tmp_path, env={**local_env(killed), **anthropic_env(server)})  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["steps_done"] == 6
    assert _export_without_times(killed) == _export_without_times(whole)


@pytest.mark.parametrize(
    "args, env, message, code",
    [
        ([], {"ANTHROPIC_API_KEY": ""}, "ANTHROPIC_API_KEY", 2),
        ([], {"HTAM_LLM__MODEL": "claude-nope"}, "claude-nope", 2),
        ([], {"HTAM_LLM__BASE_URL": closed_port_url()}, "no answer", 4),  # BackendError
        (["--resume", "no-such-run"], {}, "no such run", 2),
        ([], {"HTAM_STORE": "neo4j", "HTAM_NEO4J_URI": "bolt://127.0.0.1:1"}, "cannot reach Neo4j", 3),  # StoreError
        (["--llm", "script"], {}, "--script", 2),
        (["--llm", "catalog", "--model", "gpt-x"], {}, "the strategy catalog is catalog-v1", 2),
    ],
)
def test_bad_input_is_one_line_before_any_work(args, env, message, code, tmp_path):
    store = seeded_local(tmp_path / "m.sqlite")
    with KernelWritingAnthropic({MODEL}) as server:
        full = {**local_env(store), **anthropic_env(server), **env}
        r = htam("optimize", TASK, "--evaluator", "stand-in", "--out", str(tmp_path / "runs"), *args, cwd=tmp_path,
                 env=full)  # fmt: skip
        generated = server.generation_requests()
    assert r.returncode == code, r.stderr
    assert r.stderr.startswith("error: ") and r.stderr.strip().count("\n") == 0 and message in r.stderr, r.stderr
    assert not generated and not (tmp_path / "runs").exists()


def test_a_task_that_does_not_load_and_a_resume_of_another_task(tmp_path):
    store = seeded_local(tmp_path / "m.sqlite")
    bad = tmp_path / "bad_task.py"
    bad.write_text("import torch\nclass Model:\n    pass\n")
    with KernelWritingAnthropic({MODEL}) as server:
        env = {**local_env(store), **anthropic_env(server)}
        r = htam(
            "optimize", str(bad), "--evaluator", "stand-in", "--out", str(tmp_path / "runs"), cwd=tmp_path, env=env
        )
        assert r.returncode == 2 and "get_inputs" in r.stderr and r.stderr.count("\n") == 1, r.stderr
        done = optimize("--steps", "1", "--run-id", "relu-run", cwd=tmp_path, env=env)
        r = htam("optimize", "level1/11_GELU", "--evaluator", "stand-in", "--out", str(tmp_path / "runs"),
                 "--resume", done["run_id"], cwd=tmp_path, env=env)  # fmt: skip
    assert r.returncode == 2 and "optimizes level1/19_ReLU, not level1/11_GELU" in r.stderr, r.stderr


def test_max_cost_ends_the_run_cleanly(tmp_path):
    store = seeded_local(tmp_path / "m.sqlite")
    with KernelWritingAnthropic({MODEL}) as server:
        summary = optimize("--max-cost", "0.000001", cwd=tmp_path, env={**local_env(store), **anthropic_env(server)})
    assert summary["steps_done"] == 1 and summary["stopped"].startswith("max cost")


def test_a_script_of_kernels_alone_leaves_strategies_and_notes_to_the_memory(tmp_path):
    """bench/scripts/softmax: six hand-written kernels and one repair, nothing else."""
    script = Path(__file__).resolve().parents[2] / "bench" / "scripts" / "softmax" / "script.yaml"
    store = seeded_local(tmp_path / "m.sqlite")
    r = htam("optimize", "level1/7_Softmax", "--llm", "script", "--script", str(script), "--evaluator", "stand-in",
             "--out", str(tmp_path / "runs"), "--json", cwd=tmp_path, env=local_env(store))  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert [t["verdict"] for t in summary["trajectory"]] == ["ok"] * 6  # step 4 compiled on its repair
    step4 = json.loads((Path(summary["folder"]) / "steps" / "003.json").read_text())
    assert [a["result"]["verdict"] for a in step4["attempts"]] == ["compile_error", "ok"]
    assert step4["local_fallback"] and "level1/7_Softmax: ok" in step4["update"]["note"]
