"""Starting and resuming runs: run ids, run folders, the manifest, the task's context.

Everything here is checked before any LLM call or evaluation, so bad input (an unknown
run, a resume of another task) is one clear error with nothing written.
"""

from __future__ import annotations

import logging
import re
import secrets
from pathlib import Path
from typing import Any

from htam_graph import __version__
from htam_graph.errors import BadInput, TaskError
from htam_graph.loop.records import RunManifest, atomic_write
from htam_graph.loop.state import TaskContext
from htam_graph.memory.models import RunConfig, RunRecord
from htam_graph.tasks import Task, task_dtype
from htam_graph.vocab import Method

log = logging.getLogger(__name__)

MANIFEST = "run.json"


RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_run_id(run_id: str) -> str:
    """A run id names a folder and a graph node: letters, digits, '.', '_', '-'."""
    if not RUN_ID.fullmatch(run_id):
        raise BadInput(
            f"--run-id {run_id!r}: use 1-128 letters, digits, '.', '_' or '-' (starting with a letter or digit)",
            option="--run-id",
            value=run_id,
        )
    return run_id


def new_run_id(task_id: str, method: Method, seed: int, suffix: str | None = None) -> str:
    """`task-method-seed-suffix`; a random suffix unless one is given (a bench names its
    runs by its grid, so that running the same command again finds them)."""
    slug = re.sub(r"[^a-z0-9]+", "-", task_id.lower()).strip("-")
    return f"{slug}-{method.value}-s{seed}-{suffix or secrets.token_hex(3)}"


def create_run(
    *,
    out: Path,
    task: Task,
    method: Method,
    seed: int,
    config: RunConfig,
    llm: str,
    evaluator: str,
    device: str,
    target: str,
    run_id: str | None = None,
    sandbox: bool | None = None,
) -> tuple[RunManifest, Path]:
    """A new run folder with its manifest (`run_id`: a name of the user's, else a fresh one)."""
    run_id = run_id or new_run_id(task.id, method, seed)
    if (out / run_id).exists():
        raise BadInput(
            f"--run-id {run_id}: {out / run_id} exists already; resume it with --resume {run_id}",
            option="--run-id",
            value=run_id,
        )
    # the run record names its writer too: the memory then says which start each run had
    run = RunRecord(id=run_id, task_id=task.id, method=method, seed=seed, config=config.model_copy(update={"llm": llm}))
    manifest = RunManifest(
        run=run,
        task_path=str(task.path),
        task_sha256=task.sha256,
        llm=llm,
        evaluator=evaluator,
        device=device,
        target=target,
        sandbox=sandbox,
        htam_version=__version__,
    )
    folder = out / run.id
    folder.mkdir(parents=True)
    atomic_write(folder / MANIFEST, manifest.model_dump_json(indent=1))
    return manifest, folder


def open_run(out: Path, run_id: str, task: Task) -> tuple[RunManifest, Path]:
    """A run to resume: it must exist under `out` and be a run of this very task file."""
    folder = out / run_id
    path = folder / MANIFEST
    if not path.is_file():
        known = sorted(p.parent.name for p in out.glob(f"*/{MANIFEST}"))[-5:]
        hint = f"; runs in {out}: {', '.join(known)}" if known else f"; {out} holds no runs (pass --out)"
        raise BadInput(f"--resume {run_id}: no such run in {out}{hint}", option="--resume", value=run_id)
    manifest = RunManifest.model_validate_json(path.read_text())
    if manifest.run.task_id != task.id:
        raise TaskError(
            f"--resume {run_id}: that run optimizes {manifest.run.task_id}, not {task.id}; give the run's own task",
            task=task.id,
            path=task.path,
        )
    if manifest.task_sha256 != task.sha256:
        raise TaskError(
            f"--resume {run_id}: {task.path} changed since the run started (sha256 {manifest.task_sha256[:12]}, "
            f"now {task.sha256[:12]}); resume with the file the run started with",
            task=task.id,
            path=task.path,
        )
    return manifest, folder


def task_context(task: Task) -> TaskContext:
    """The task's dtype and input shapes (get_inputs() on the meta device: no memory), and
    the bytes and FLOPs the judge's roofline counts, from the reference run on the meta
    device (None where an operator has no meta kernel)."""
    import torch  # the task module needs torch anyway; `htam --help` should not

    module = task.load_module()
    with torch.device("meta"):
        inputs = module.get_inputs()
    shapes = [list(x.shape) for x in inputs if isinstance(x, torch.Tensor)]
    dtype = str(task_dtype(module)).removeprefix("torch.")
    moved, flops = _roofline_counts(module, inputs)
    return TaskContext(
        id=task.id, name=task.name, source=task.source, dtype=dtype, input_shapes=shapes, bytes_moved=moved,
        flops=flops, family=_family(task),
    )  # fmt: skip


def _family(task: Task) -> str | None:
    """The operator family the catalog reads from the reference's graph (None where it cannot):
    recorded with the task, conditioning the evidence, and naming the strategies that fit."""
    from htam_graph.catalog.families import family_of  # the catalog needs torch

    return family_of(task.source)


def _roofline_counts(module: Any, inputs: list[Any]) -> tuple[int | None, int | None]:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from htam_graph.runner.referee.roofline import moved_bytes

    try:
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
            counter = FlopCounterMode(display=False)
            with counter, torch.no_grad():
                out = model(*inputs)
    except Exception:  # an operator without a meta kernel: the prompt then states no count
        log.debug("%s: no meta run of the reference", module.__name__, exc_info=True)
        return None, None
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return moved_bytes(inputs, model, outs), int(counter.get_total_flops())
