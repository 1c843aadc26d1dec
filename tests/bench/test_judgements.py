"""A bench serves an identical candidate's earlier judgement again instead of judging it twice."""

from __future__ import annotations

from htam_graph.bench.worker import Judgements
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import EvalResult, Verdict
from htam_graph.tasks import resolve_task


class Counting:
    """An evaluator that records what it was asked to judge."""

    label, device, target = "gpu", "a GPU", "a GPU"

    def __init__(self, verdict: Verdict = Verdict.OK, errors: str = "") -> None:
        self.calls: list[str] = []
        self.verdict, self.errors = verdict, errors

    def __enter__(self) -> Counting:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def evaluate(self, task, source: str) -> EvalResult:
        self.calls.append(source)
        return EvalResult(
            task_id=task.id,
            task_sha256=task.sha256,
            candidate_sha256=str(len(self.calls)),
            candidate_format="native",
            verdict=self.verdict,
            errors=self.errors,
            speedup_eager=1.5,
        )


def test_the_same_code_for_the_same_task_is_judged_once(tmp_path):
    inner = Counting()
    judged = Judgements(inner, tmp_path / "judged", EvalConfig())
    relu, gelu = resolve_task("level1/19_ReLU"), resolve_task("level1/11_GELU")
    first = judged.evaluate(relu, "code A")
    again = judged.evaluate(relu, "code A")
    assert inner.calls == ["code A"]
    assert not first.reused and again.reused and again.speedup_eager == first.speedup_eager
    other_code = judged.evaluate(relu, "code B")
    other_task = judged.evaluate(gelu, "code A")
    assert inner.calls == ["code A", "code B", "code A"] and not other_code.reused and not other_task.reused


def test_a_later_worker_finds_the_judgements_on_disk_but_not_under_other_settings(tmp_path):
    relu = resolve_task("level1/19_ReLU")
    Judgements(Counting(), tmp_path, EvalConfig()).evaluate(relu, "code A")
    later = Counting()
    assert Judgements(later, tmp_path, EvalConfig()).evaluate(relu, "code A").reused and not later.calls
    other = Counting()
    assert not Judgements(other, tmp_path, EvalConfig(trials=10)).evaluate(relu, "code A").reused
    assert other.calls == ["code A"]


def test_timeouts_and_faults_of_the_judge_are_judged_again(tmp_path):
    relu = resolve_task("level1/19_ReLU")
    for inner in (Counting(Verdict.TIMEOUT), Counting(Verdict.RUNTIME_ERROR, "judge error: KeyError: 'x'")):
        judged = Judgements(inner, tmp_path / inner.verdict.value, EvalConfig())
        judged.evaluate(relu, "code A")
        assert not judged.evaluate(relu, "code A").reused and len(inner.calls) == 2
    wrong = Counting(Verdict.INCORRECT, "output 0: 3 of 4 elements outside tolerance")
    judged = Judgements(wrong, tmp_path / "wrong", EvalConfig())
    judged.evaluate(relu, "code A")
    assert judged.evaluate(relu, "code A").reused and len(wrong.calls) == 1
