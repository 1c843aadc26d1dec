"""A suspicious result earns nothing until it holds a second judgement in a fresh process
(runner/evaluate.py `reverified`), and the loop's reward only counts verified ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from htam_graph.loop.optimizer import _trusted
from htam_graph.runner.build import BuildSettings
from htam_graph.runner.evaluate import make_job, reverified
from htam_graph.runner.jobs import EvalConfig, RefereeInfo
from htam_graph.runner.models import EvalResult, Verdict

FIXTURES = Path(__file__).parent / "fixtures"


class ScriptedReferee:
    """Answers each job with the next scripted result (a fresh process per run, as the real one)."""

    def __init__(self, *results: EvalResult) -> None:
        self.results, self.runs = list(results), 0

    def info(self) -> RefereeInfo:
        return RefereeInfo(pid=1, device_index=0, device="test", arch="sm_90", versions={})

    def run(self, job: Any, timeout_s: float) -> EvalResult:
        self.runs += 1
        return self.results.pop(0)


def _result(verdict: Verdict, speedup: float | None, suspicious: bool) -> EvalResult:
    return EvalResult(
        task_id="relu",
        task_sha256="0" * 64,
        candidate_sha256="0" * 64,
        candidate_format="native",
        verdict=verdict,
        speedup_eager=speedup,
        suspicious=suspicious,
        suspicious_reason="speedup above 10x" if suspicious else "",
        errors="" if verdict == Verdict.OK else "timed run 3 returned a wrong result",
    )


@pytest.fixture
def job(tmp_path: Path):
    build = BuildSettings(nvcc=Path("/bin/true"), cache_dir=tmp_path, arch="sm_90")
    return make_job(FIXTURES / "relu_small.py", FIXTURES / "relu_small.py", EvalConfig(), build)


def test_an_unsuspicious_result_is_judged_once(job):
    referee = ScriptedReferee()
    first = _result(Verdict.OK, 1.5, suspicious=False)
    assert reverified(referee, job, first) is first  # type: ignore[arg-type]
    assert referee.runs == 0 and _trusted(first)


def test_a_suspicious_result_that_holds_is_verified_with_the_smaller_speedup(job):
    referee = ScriptedReferee(_result(Verdict.OK, 11.0, suspicious=True))
    result = reverified(referee, job, _result(Verdict.OK, 14.0, suspicious=True))  # type: ignore[arg-type]
    assert referee.runs == 1
    assert result.verified and result.speedup_eager == 11.0 and _trusted(result)


def test_a_suspicious_result_that_does_not_hold_earns_nothing(job):
    referee = ScriptedReferee(_result(Verdict.REJECTED, None, suspicious=False))
    first = _result(Verdict.OK, 8.3, suspicious=True)
    assert not _trusted(first)  # before the second judgement: nothing
    result = reverified(referee, job, first)  # type: ignore[arg-type]
    assert result.verdict == Verdict.REJECTED and not result.verified
    assert "did not hold" in result.errors
