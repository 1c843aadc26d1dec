"""The red-team suite (tests/redteam/manifest.yaml) through the whole runner on a GPU, three
times: as users run it, with the static checks off (the run-time layer alone), and with the
static checks off and the sandbox on (the run-time layer and the OS's walls).
Every cheat is rejected for its kind (or judged incorrect), every honest control passes, and
an honest candidate judged after all the cheats gets the speedup it got before them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from htam_graph.runner.evaluate import Evaluator
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import EvalResult, Feedback, Verdict
from htam_graph.runner.sandbox import ON_BY_DEFAULT
from htam_graph.tasks import Task, load_task, resolve_task

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]

REDTEAM = Path(__file__).resolve().parents[1] / "redteam"
HONEST_CONTROL = "candidates/honest_relu.py"


def _entries() -> list[dict[str, Any]]:
    return yaml.safe_load((REDTEAM / "manifest.yaml").read_text())["candidates"]


def _task(spec: str) -> Task:
    return load_task(REDTEAM / spec) if spec.endswith(".py") else resolve_task(spec)


def _as_expected(result: EvalResult, outcomes: list[str]) -> bool:
    kinds = {f.kind.value for f in result.cheats}
    for outcome in outcomes:
        if outcome == "ok" and result.verdict == Verdict.OK:
            return True
        if outcome == "incorrect" and result.verdict == Verdict.INCORRECT:
            return True
        if outcome == "load_error" and result.verdict == Verdict.LOAD_ERROR:
            return True
        if result.verdict == Verdict.REJECTED and outcome in kinds:
            return True
    return False


def _expected(entry: dict[str, Any], static_checks: bool, sandbox: bool) -> list[str]:
    if static_checks and entry["static"] != "none":
        return [entry["static"]]
    dynamic = entry["dynamic"] if sandbox or "unconfined" not in entry else entry["unconfined"]
    return dynamic if isinstance(dynamic, list) else [dynamic]


@pytest.mark.parametrize(
    ("static_checks", "sandbox"),
    [(True, ON_BY_DEFAULT), (False, False), (False, True)],
    ids=["as-users-run-it", "run-time-checks-alone", "run-time-checks-and-sandbox"],
)
def test_redteam_suite(static_checks: bool, sandbox: bool):
    entries = _entries()
    control = next(e for e in entries if e["file"] == HONEST_CONTROL)
    pairs = [(_task(e["task"]), REDTEAM / e["file"]) for e in entries]
    config = EvalConfig(trials=20, static_checks=static_checks, sandbox=sandbox)
    with Evaluator(config, workers=1) as ev:
        before = ev.evaluate(_task(control["task"]), REDTEAM / HONEST_CONTROL)
        results = ev.evaluate_many(pairs)
        after = ev.evaluate(_task(control["task"]), REDTEAM / HONEST_CONTROL)
    wrong = {}
    for entry, result in zip(entries, results, strict=True):
        expected = _expected(entry, static_checks, sandbox)
        if not _as_expected(result, expected):
            wrong[entry["file"]] = {"expected": expected, **Feedback.of(result).model_dump(mode="json")}
    assert not wrong, wrong
    # Nothing a cheat did reached the reference or the next candidate.
    assert before.verdict == after.verdict == Verdict.OK
    assert after.reference_eager.median_ms == pytest.approx(before.reference_eager.median_ms, rel=0.05)
    assert after.speedup_eager == pytest.approx(before.speedup_eager, rel=0.2)
