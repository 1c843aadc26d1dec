"""`htam eval TASK CANDIDATE`: judge one candidate on this machine's GPU."""

from __future__ import annotations

import json
from pathlib import Path

import click

from htam_graph.cli.common import require_sandbox, sandbox_option
from htam_graph.errors import CandidateError
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import Verdict

_DEFAULTS = EvalConfig()


@click.command("eval")
@click.argument("task")
@click.argument("candidate", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="print the full result record as JSON")
@click.option(
    "--trials",
    default=_DEFAULTS.trials,
    show_default=True,
    type=click.IntRange(min=1),
    help="timed runs (median reported)",
)
@click.option(
    "--timeout",
    "timeout_s",
    default=_DEFAULTS.timeout_s,
    show_default=True,
    type=click.FloatRange(min=1),
    help="seconds per candidate (load_inline candidates get --kernelbench-timeout)",
)
@click.option(
    "--kernelbench-timeout",
    "kernelbench_timeout_s",
    default=_DEFAULTS.kernelbench_timeout_s,
    show_default=True,
    type=click.FloatRange(min=1),
    help="seconds for a KernelBench-format (load_inline) candidate",
)
@click.option("--compile-reference", is_flag=True, help="also time torch.compile of the reference")
@sandbox_option
@click.option(
    "--no-run", is_flag=True, help="no GPU needed: only the static cheat checks and the nvcc build (verdict 'checked')"
)
def eval_cmd(
    task: str,
    candidate: Path,
    as_json: bool,
    trials: int,
    timeout_s: float,
    kernelbench_timeout_s: float,
    compile_reference: bool,
    sandbox: bool,
    no_run: bool,
) -> None:
    """Check, build, verify and time CANDIDATE (a file defining ModelNew) against TASK
    (a built-in task id such as level1/19_ReLU, or a KernelBench-format task file).
    Exits 0 when the verdict is ok (checked, with --no-run), 1 otherwise; 2 when CANDIDATE
    cannot be a candidate at all (empty, not Python, no ModelNew)."""
    from htam_graph.cli.common import settings
    from htam_graph.cli.display import print_result
    from htam_graph.runner.build import BuildSettings
    from htam_graph.runner.evaluate import Evaluator, precheck
    from htam_graph.runner.formats import candidate_problem
    from htam_graph.tasks import resolve_task

    require_sandbox(sandbox)
    resolved = resolve_task(task)
    if problem := candidate_problem(candidate.read_text(encoding="utf-8", errors="replace")):
        raise CandidateError(f"{candidate}: {problem}", path=candidate)
    build = BuildSettings.resolve(settings()).model_copy(update={"sandbox": sandbox})
    if no_run:
        result = precheck(resolved, candidate, build)
    else:
        config = EvalConfig(
            trials=trials,
            timeout_s=timeout_s,
            kernelbench_timeout_s=kernelbench_timeout_s,
            compile_reference=compile_reference,
            sandbox=sandbox,
        )
        with Evaluator(config, workers=1, build=build) as ev:
            result = ev.evaluate(resolved, candidate)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        print_result(result)
    if result.verdict not in (Verdict.OK, Verdict.CHECKED):
        raise SystemExit(1)
