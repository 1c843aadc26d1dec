"""The sandbox on the GPU: confined candidate processes still run CUDA, build with the
confined builder (both formats), and host attacks from both formats fail at the OS with the
static checks off. bench/scripts/sandbox_gpu_check.sh runs this on the H200."""

from __future__ import annotations

from pathlib import Path

import pytest

from htam_graph.runner.evaluate import Evaluator
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import Verdict
from htam_graph.tasks import resolve_task

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]

REDTEAM = Path(__file__).resolve().parents[1] / "redteam"
HONEST = REDTEAM / "candidates" / "honest_relu.py"
WRITTEN = [
    Path("/root/.htam-pwned-native"),
    Path("/tmp/htam-pwned-native"),
    Path("/root/.htam-pwned-inline"),
    Path("/tmp/htam-pwned-inline"),
]


@pytest.fixture(scope="module")
def relu():
    return resolve_task("level1/19_ReLU")


def _clean() -> None:
    for path in WRITTEN:
        path.unlink(missing_ok=True)


def test_an_honest_candidate_passes_in_the_sandbox(relu):
    with Evaluator(EvalConfig(trials=20, sandbox=True), workers=1) as ev:
        result = ev.evaluate(relu, HONEST)
    assert result.verdict == Verdict.OK, result.errors
    assert result.sandboxed


@pytest.mark.parametrize("candidate", ["native_attacks.py", "inline_attacks.py"])
def test_host_attacks_fail_at_the_os(relu, candidate):
    """Static checks off: the attacks run; each fails, so the honest kernel after them is
    judged and passes, and the next candidate is judged as before."""
    _clean()
    config = EvalConfig(trials=20, static_checks=False, sandbox=True)
    with Evaluator(config, workers=1) as ev:
        result = ev.evaluate(relu, REDTEAM / "host" / candidate)
        after = ev.evaluate(relu, HONEST)  # the judge survived, unharmed
    assert "ATTACK SUCCEEDED" not in result.errors, result.errors
    assert result.verdict == Verdict.OK, result.errors
    assert after.verdict == Verdict.OK, after.errors
    assert not [p for p in WRITTEN if p.exists()]
    assert not any(p.name == "htam-pwned.cubin" for p in Path(ev.build.cache_dir).rglob("*"))


# The control's attack: one write outside the scratch folder (not the kills: they would
# end this judge).
CONTROL = """
open("/tmp/htam-pwned-native", "w").close()
raise RuntimeError("ATTACK SUCCEEDED: write /tmp")
"""


def test_without_the_sandbox_the_attack_gets_through(relu):
    """The control: --no-sandbox, the same write succeeds, and the result says so."""
    _clean()
    config = EvalConfig(trials=20, static_checks=False, sandbox=False)
    try:
        with Evaluator(config, workers=1) as ev:
            result = ev.evaluate(relu, CONTROL)
        assert Path("/tmp/htam-pwned-native").exists()
    finally:
        _clean()
    assert not result.sandboxed
    assert result.verdict == Verdict.LOAD_ERROR
    assert "ATTACK SUCCEEDED" in result.errors
