"""--llm catalog through the real loop: strategies chosen from the memory's offer and applied
to the best kernel, the family's order for methods without a memory, no candidate (with
the reason) for what the catalog cannot do, deterministic answers. Judged by the stand-in
(real static checks and nvcc builds; no GPU here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from htam_graph.catalog import strategies
from htam_graph.catalog.client import CATALOG_MODEL, CatalogClient, best_record
from htam_graph.catalog.families import recognize
from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.render import Header, render_candidate
from htam_graph.catalog.strategies import STRATEGIES
from htam_graph.catalog.variants import render
from htam_graph.config import ScoringParams
from htam_graph.llm.request import KernelRef, PastStep, Pick, Request, StepView, TaskRef
from htam_graph.loop.evaluators import StandInEvaluator
from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.records import RunSummary, StepRecord
from htam_graph.loop.runs import create_run
from htam_graph.memory.models import RunConfig
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.tasks import builtin_suite_dir, load_task, resolve_task
from htam_graph.vocab import Method, Verdict

pytestmark = pytest.mark.nvcc
OWN = Path(__file__).with_name("tasks")


def run(task: str, method: Method, steps: int, tmp: Path, store: SQLiteStore, run_id: str) -> RunSummary:
    resolved = load_task(OWN / f"{task}.py") if (OWN / f"{task}.py").exists() else resolve_task(task)
    client, judge = CatalogClient(CATALOG_MODEL), StandInEvaluator()
    manifest, folder = create_run(
        out=tmp / "runs",
        task=resolved,
        method=method,
        seed=0,
        config=RunConfig(steps=steps, scoring=ScoringParams(reward_from="best")),  # the tuned start, as recorded
        llm="catalog:catalog-v1",
        evaluator=judge.label,
        device=judge.device,
        target=judge.target,
        run_id=run_id,
    )
    return Optimizer(
        store=store,
        client=client,
        evaluator=judge,
        task=resolved,
        manifest=manifest,
        folder=folder,
    ).run()


def built_on(source: str | None) -> StepView:
    """A state whose best is `source` (all best_record reads)."""
    return StepView(task=TaskRef(id="t", source=""), step_index=1, best=KernelRef(step_index=0, source=source))


def steps(summary: RunSummary) -> list[StepRecord]:
    folder = Path(summary.folder) / "steps"
    return [StepRecord.model_validate_json(p.read_text()) for p in sorted(folder.glob("*.json"))]


@pytest.fixture
def store(tmp_path: Path):
    with SQLiteStore(tmp_path / "memory.sqlite") as s:
        s.seed(load_seed_bank())
        yield s


def test_htam_applies_the_memorys_strategies_to_the_best_kernel(tmp_path: Path, store: SQLiteStore) -> None:
    summary = run("level1/7_Softmax", Method.HTAM, 5, tmp_path, store, "softmax")
    records = steps(summary)
    assert [r.verdict for r in records if r.verdict != Verdict.NO_CANDIDATE]  # some strategies composed
    for record in records:
        source = record.final.source
        if record.verdict == Verdict.NO_CANDIDATE:
            answer = record.calls[-1].text
            assert answer.startswith("No candidate: nothing in the strategy") and record.local_id in answer
            continue
        assert source is not None and "Strategy-catalog candidate (catalog-v1)" in source
        assert f"Applied this step: {record.local_id}." in source  # the memory's choice is what was applied
        choice = json.loads(next(c for c in record.calls if c.template == "select_local").text)
        assert choice["local_id"] == record.local_id and choice["reason"]
    improved = [r for r in records if r.best_after > r.best_before]
    if len(improved) >= 2:  # a later improvement builds on the earlier one
        first, later = best_record(built_on(improved[0].final.source))[1], improved[-1]
        assert set(first) <= set(best_record(built_on(later.final.source))[1])


@pytest.mark.parametrize("method", [Method.HTAM, Method.HTAM_NO_PREFIX])
def test_htam_draws_only_directions_with_a_composing_template(
    method: Method, tmp_path: Path, store: SQLiteStore
) -> None:
    """An elementwise chain: no template in data_reuse, reduction_sync, algorithmic or
    precision_tensor_cores, so without the catalog's directions many steps gave no candidate."""
    summary = run("level2/2_Swish_Bias_Scale", method, 6, tmp_path, store, f"swish-{method.value}")
    for record in steps(summary):
        assert record.verdict == Verdict.OK and record.offered and record.global_id in record.offered
        assert not {"data_reuse", "reduction_sync", "algorithmic", "precision_tensor_cores"} & set(record.offered)


def test_expert_walks_the_familys_order(tmp_path: Path, store: SQLiteStore) -> None:
    summary = run("level2/2_Swish_Bias_Scale", Method.EXPERT, 4, tmp_path, store, "swish")
    segments: list[list[str]] = [[]]  # strategies tried while the best stood still
    for record in steps(summary):
        assert record.verdict == Verdict.OK and record.local_id is None
        source = record.final.source or ""
        segments[-1].append(source.split("Applied this step: ", 1)[1].split(".\n", 1)[0])
        if record.best_after > record.best_before:
            segments.append([])
    # The first step starts from the family's first kernel and applies the family's next strategy
    first = steps(summary)[0].final.source or ""
    assert "first kernel for the family: memory_access.vectorized_float4." in first
    assert segments[0][0] == "parallelism.multi_element_ilp"  # after vectorized_float4 in the elementwise order
    assert all(len(set(s)) == len(s) for s in segments)


def test_feedback_draws_among_the_strategies_not_tried_since_the_best(tmp_path: Path, store: SQLiteStore) -> None:
    """No expert order: the loop draws among the strategies the catalog names (docs/method.md)."""
    summary = run("level2/2_Swish_Bias_Scale", Method.FEEDBACK, 4, tmp_path, store, "swish")
    segments: list[list[str]] = [[]]
    for record in steps(summary):
        assert record.verdict == Verdict.OK and record.local_id is not None
        assert f"Applied this step: {record.local_id}." in (record.final.source or "")
        segments[-1].append(record.local_id)
        if record.best_after > record.best_before:
            segments.append([])
    assert all(len(set(s)) == len(s) for s in segments)


def test_an_unsupported_model_is_a_failed_generation_not_a_crash(tmp_path: Path, store: SQLiteStore) -> None:
    summary = run("unsupported_attention", Method.HTAM, 2, tmp_path, store, "sdpa")
    assert summary.steps_done == 2 and not summary.correct
    for record in steps(summary):
        assert record.verdict == Verdict.NO_CANDIDATE and record.update.reward == -1
        answer = next(c for c in record.calls if c.template == "generate").text
        assert "no kernel templates for this model" in answer and "scaled_dot_product_attention" in answer
    assert sum(g.generation_failures for g in store.get_globals()) == 2


def test_answers_are_deterministic(tmp_path: Path) -> None:
    hashes = []
    for n in range(2):
        with SQLiteStore(tmp_path / f"m{n}.sqlite") as store:
            store.seed(load_seed_bank())
            summary = run("level1/10_RMSNorm", Method.HTAM, 3, tmp_path / str(n), store, "rms")
        hashes.append([r.update.candidate_sha256 for r in steps(summary)])
    assert hashes[0] == hashes[1]


def test_while_the_reference_is_best_strategies_build_on_the_fastest_kernel() -> None:
    # A GEMM's register tiles (0.6x eager) are slower than cuBLAS, so the reference stays the
    # best; the next strategy must still apply to them, not to the family's first kernel.
    client = CatalogClient(CATALOG_MODEL)
    task = resolve_task("level2/4_Gemm_GELU").source
    rec = recognize(task)
    tiled = render_candidate(
        rec, Knobs(reg_tile=True), Header(CATALOG_MODEL, rec.describe(), [], [], ["data_reuse.register_tiling"])
    )
    state = StepView(
        task=TaskRef(id="level2/4_Gemm_GELU", source=task),
        best=KernelRef(),
        fastest=KernelRef(step_index=0, source=tiled),
        step_index=1,
        path=(PastStep(index=0, local_id="data_reuse.register_tiling", verdict="ok"),),
    )
    second = client.generate(Request(state=state, local=Pick(id="memory_access.vectorized_float4")))
    knobs, applied = best_record(built_on(second.split("```python\n", 1)[1]))
    assert knobs.reg_tile and knobs.vec, knobs
    assert applied == ["data_reuse.register_tiling", "memory_access.vectorized_float4"]
    # Once a kernel beats the reference it is the best, and the fastest is no longer given.
    state = state.model_copy(update={"best": state.fastest, "fastest": None})
    assert best_record(state)[0].reg_tile


def test_the_first_step_starts_from_the_familys_first_kernel_until_a_step_fails() -> None:
    client = CatalogClient(CATALOG_MODEL)
    task = resolve_task("level1/20_Cumsum").source
    state = StepView(task=TaskRef(id="level1/20_Cumsum", source=task), step_index=0)
    local = Pick(id="compute_efficiency.unroll_and_specialize")
    first = client.generate(Request(state=state, local=local))
    assert "first kernel for the family: reduction_sync.parallel_scan" in first
    assert best_record(built_on(first.split("```python\n", 1)[1]))[1] == [
        "reduction_sync.parallel_scan", "compute_efficiency.unroll_and_specialize"
    ]  # fmt: skip
    # A step built on it failed and nothing correct came: the next builds on the plain base kernel.
    failed = (PastStep(index=0, local_id=local.id, verdict="incorrect"),)
    second = client.generate(Request(state=state.model_copy(update={"step_index": 1, "path": failed}), local=local))
    assert "first kernel" not in second
    assert best_record(built_on(second.split("```python\n", 1)[1]))[1] == [local.id]


def test_every_first_kernel_names_implemented_strategies_of_its_familys_order() -> None:
    """A misspelt id would be skipped silently (it changes no kernel), so the first kernel
    would lose a strategy without a word."""
    for family, entries in strategies.FIRST_KERNEL.items():
        for entry in entries:
            for sid in (entry,) if isinstance(entry, str) else entry:
                assert sid in STRATEGIES and STRATEGIES[sid].does, (family, sid)
                assert sid in strategies.curriculum(family), (family, sid)


@pytest.mark.parametrize(
    ("task", "first"),
    [
        ("level1/20_Cumsum", ["reduction_sync.parallel_scan"]),
        ("level2/3_Gemm_Bias_ReLU", ["fusion.gemm_epilogue", "precision_tensor_cores.tf32_3x_split"]),
        # four rows of 1M elements: one-pass statistics and the rows split over blocks, together
        ("level1/9_LayerNorm", ["fusion.stats_and_normalize", "reduction_sync.welford_one_pass",
                                "parallelism.split_long_rows", "memory_access.vectorized_float4",
                                "reduction_sync.block_two_level"]),
        # many short rows: no split, so no one-pass statistics; the row stays in registers
        ("level1/8_LogSoftmax", ["fusion.stats_and_normalize", "memory_access.vectorized_float4",
                                 "data_reuse.row_in_registers", "reduction_sync.block_two_level"]),
    ],
)  # fmt: skip
def test_the_first_kernel_follows_the_tasks_shapes(task: str, first: list[str]) -> None:
    rec = recognize(resolve_task(task).source)
    assert strategies.first_kernel(rec, lambda k: render(rec, k))[1] == first


def test_directions_whose_strategies_were_all_tried_on_the_kernel_are_not_offered() -> None:
    client = CatalogClient(CATALOG_MODEL)
    state = StepView(task=TaskRef(id="level1/7_Softmax", source=resolve_task("level1/7_Softmax").source), step_index=0)
    offered = client.directions(state)
    assert offered and "memory_access" in offered

    def after(tried: list[str]) -> StepView:
        path = tuple(PastStep(index=i, local_id=sid, verdict="ok") for i, sid in enumerate(tried))
        return state.model_copy(update={"path": path, "step_index": len(tried)})

    assert client.directions(after([sid for sid in STRATEGIES if sid.startswith("memory_access.")])) == offered - {
        "memory_access"
    }
    # Once every strategy was tried on the kernel, every direction that composes is offered again.
    assert client.directions(after(list(STRATEGIES))) == offered


def test_the_cli_runs_the_catalog_with_the_honest_defaults(tmp_path: Path) -> None:
    """No --model and no HTAM_SCORING__REWARD_FROM: the run starts from the task's base kernel
    (catalog-space-v1) and its reward is measured against each step's parent, and both the
    run's manifest and its record in the memory say so."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    env.update({"HTAM_STORE": "local", "HTAM_LOCAL_PATH": str(tmp_path / "m.sqlite"), "COLUMNS": "200"})
    subprocess.run([sys.executable, "-m", "htam_graph", "memory", "seed"], env=env, check=True, capture_output=True)
    args = ["optimize", "level1/19_ReLU", "--llm", "catalog", "--evaluator", "stand-in", "--steps", "2"]
    done = subprocess.run(
        [sys.executable, "-m", "htam_graph", *args, "--out", str(tmp_path / "runs"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["steps_done"] == 2 and summary["evaluator"] == "stand-in"
    assert "llm catalog:catalog-space-v1" in done.stderr
    manifest = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())
    assert manifest["llm"] == "catalog:catalog-space-v1"
    assert manifest["run"]["config"]["llm"] == "catalog:catalog-space-v1"
    assert manifest["run"]["config"]["scoring"]["reward_from"] == "parent"
    assert (next((tmp_path / "runs").glob("*/start.json"))).is_file()  # the base kernel, judged before step 1
    with SQLiteStore(tmp_path / "m.sqlite") as store:
        (record,) = store.get_runs()
    assert record.config.llm == "catalog:catalog-space-v1" and record.config.scoring.reward_from == "parent"


def test_the_tuned_start_and_the_best_reward_stay_named_options(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    env.update({"HTAM_STORE": "local", "HTAM_LOCAL_PATH": str(tmp_path / "m.sqlite"), "COLUMNS": "200"})
    env["HTAM_SCORING__REWARD_FROM"] = "best"
    subprocess.run([sys.executable, "-m", "htam_graph", "memory", "seed"], env=env, check=True, capture_output=True)
    args = ["optimize", "level1/19_ReLU", "--llm", "catalog", "--model", "catalog-v1", "--evaluator", "stand-in"]
    done = subprocess.run(
        [sys.executable, "-m", "htam_graph", *args, "--steps", "1", "--out", str(tmp_path / "runs"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())
    assert manifest["run"]["config"]["llm"] == "catalog:catalog-v1"
    assert manifest["run"]["config"]["scoring"]["reward_from"] == "best"
    first = StepRecord.model_validate_json(next((tmp_path / "runs").glob("*/steps/*.json")).read_text())
    assert "first kernel for the family" in (first.final.source or "")


def test_3xtf32_is_not_offered_on_a_gpu_without_tf32_tensor_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a pre-Ampere GPU the 3xTF32 GEMM could only fail to build: the strategy says why
    instead of composing; with no GPU to ask (replay, stand-in) it composes."""
    source = (builtin_suite_dir() / "level1" / "1_Square_matmul.py").read_text()
    rec = recognize(source)
    tiled = Knobs(reg_tile=True)

    def render_with(knobs: Knobs) -> str:
        return render(rec, knobs)

    strategies._no_tf32_tensor_cores.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 5))
    result = strategies.apply(rec, tiled, "precision_tensor_cores.tf32_3x_split", render_with)
    assert result.reason == "TF32 tensor cores need sm_80 or newer; this GPU is sm_75"
    strategies._no_tf32_tensor_cores.cache_clear()
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    assert strategies.apply(rec, tiled, "precision_tensor_cores.tf32_3x_split", render_with).knobs.tf32x3
    strategies._no_tf32_tensor_cores.cache_clear()
