"""The red-team suite (tests/redteam/manifest.yaml) through the whole runner on a GPU:
every cheating candidate is rejected for its expected kind, every honest control passes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from htam_graph.runner.evaluate import Evaluator, to_feedback
from htam_graph.runner.models import Verdict
from htam_graph.tasks import load_task, resolve_task

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]

REDTEAM = Path(__file__).resolve().parents[1] / "redteam"


def _entries() -> list[dict]:
    return yaml.safe_load((REDTEAM / "manifest.yaml").read_text())["candidates"]


def _task(spec: str):
    return load_task(REDTEAM / spec) if spec.endswith(".py") else resolve_task(spec)


def test_redteam_suite():
    entries = _entries()
    with Evaluator(workers=1, trials=10) as ev:
        results = ev.evaluate_many([(_task(e["task"]), REDTEAM / e["file"]) for e in entries], progress=False)
    wrong = {}
    for entry, result in zip(entries, results, strict=True):
        kinds = {f.kind.value for f in result.cheats}
        if entry["expected_kind"] == "honest":
            passed = result.verdict == Verdict.OK
        else:
            passed = result.verdict == Verdict.REJECTED and entry["expected_kind"] in kinds
        if not passed:
            wrong[entry["file"]] = {"expected": entry["expected_kind"], **to_feedback(result)}
    assert not wrong, wrong
