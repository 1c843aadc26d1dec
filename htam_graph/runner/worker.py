"""A GPU worker process: loads, checks and times one candidate per job.

The parent (pool.py) starts it with the spawn method, so torch and CUDA are initialised
here once and reused for many jobs. After a CUDA error, a cheat, or a load failure the
worker answers and exits: a sticky CUDA error poisons the context, and a candidate that
cheated or crashed may have left patched functions or threads behind. This module stays
free of torch at import time: the parent imports it for `worker_main`.
"""

from __future__ import annotations

import functools
import linecache
import os
import sys
import time
import traceback
import types
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from htam_graph.runner.build import condense_errors, device_arch, find_nvcc, nvcc_version
from htam_graph.runner.jobs import EvalConfig, Job, WorkerInfo, WorkerReply
from htam_graph.runner.models import CheatFinding, CheatKind, EvalResult, Timing, Verdict

SUSPICIOUS_SPEEDUP = 10.0
TIMING_INPUT_SETS = 4  # separately allocated input sets the timed trials rotate over
TIMING_INPUT_BYTES = 4 * 1024**3  # fewer sets when the inputs are larger than this together
MAX_ERROR_LINES = 20
MAX_ERROR_CHARS = 2000
# Verdicts after which the worker is kept: nothing of the candidate ran, or it ran to the
# end without any check firing (an incorrect result is not a cheat).
_KEEP_WORKER = {Verdict.OK, Verdict.INCORRECT, Verdict.COMPILE_ERROR}


class Stop(Exception):
    """Ends a job early with a verdict."""

    def __init__(self, verdict: Verdict, errors: str = "", restart: bool = False) -> None:
        super().__init__(errors)
        self.verdict, self.errors, self.restart = verdict, errors, restart


def worker_main(conn: Connection, device_index: int) -> None:
    """Entry point of the spawned process: say hello, then serve jobs until told to stop."""
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no compile subprocesses
    state = WorkerState(device_index)
    conn.send(state.info)
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        reply = run_job(job, state)
        conn.send(reply)
        if reply.restart:
            return


class WorkerState:
    """What a worker sets up once: CUDA, the L2 flush buffer, versions."""

    def __init__(self, device_index: int) -> None:
        import torch

        from htam_graph.runner.timing import L2Flusher

        torch.cuda.set_device(device_index)
        # The reference in true fp32: cuDNN's default TF32 convolutions miss fp32's 1e-4
        # tolerance against an exact candidate. Candidates are held to the same flags.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.device = torch.device("cuda", device_index)
        self.flusher = L2Flusher()
        self.info = WorkerInfo(
            pid=os.getpid(),
            device_index=device_index,
            device=torch.cuda.get_device_name(device_index),
            arch=device_arch(),
            versions=_versions(),
        )

    @functools.cached_property
    def sync_latency_ms(self) -> float:
        """Host latency of a device-wide synchronize (timing.host_sync_latency), measured once."""
        from htam_graph.runner.timing import host_sync_latency

        return host_sync_latency(self.flusher)


def _versions() -> dict[str, str]:
    import torch
    from cuda.bindings import driver

    _, driver_version = driver.cuDriverGetVersion()
    try:
        nvcc = nvcc_version(find_nvcc())
    except Exception as exc:  # the versions are informative; a missing nvcc shows up at build time
        nvcc = f"unavailable ({exc})"
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "driver": f"{driver_version // 1000}.{driver_version % 1000 // 10}",
        "nvcc": nvcc,
    }


def run_job(job: Job, state: WorkerState) -> WorkerReply:
    started = time.perf_counter()
    result = EvalResult(
        task_id=job.task.id,
        task_sha256=job.task.sha256,
        candidate_sha256=job.candidate_sha256,
        candidate_format=job.fmt,
        verdict=Verdict.RUNTIME_ERROR,
        device=state.info.device,
        versions=state.info.versions,
    )
    restart = False
    try:
        _Judge(job, state, result).run()
    except Stop as stop:
        result.verdict, result.errors, restart = stop.verdict, stop.errors, stop.restart
    except Exception as exc:  # a fault of the judge itself: report it, start afresh
        result.verdict, result.errors = Verdict.RUNTIME_ERROR, f"judge error: {condense_exception(exc, None)}"
        restart = True
    if result.cheats and result.verdict != Verdict.REJECTED:
        result.verdict = Verdict.REJECTED
    result.eval_seconds = time.perf_counter() - started
    restart = restart or result.verdict not in _KEEP_WORKER or not _device_healthy()
    return WorkerReply(result=result, restart=restart)


def _device_healthy() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def condense_exception(exc: BaseException, filename: str | None) -> str:
    """The exception and the candidate's own frames, capped for an LLM."""
    lines = [f"{type(exc).__name__}: {exc}".strip()]
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if filename and f.filename == filename] or frames[-1:]
    for frame in own[-3:]:
        where = "candidate" if frame.filename == filename else os.path.basename(frame.filename)
        lines.append(f"  at {where} line {frame.lineno}, in {frame.name}: {(frame.line or '').strip()}")
    text = "\n".join("\n".join(lines).splitlines()[:MAX_ERROR_LINES])
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 4] + "\n..."


def _is_cuda_error(exc: BaseException) -> bool:
    from htam_graph.runner.native import CudaDriverError

    text = str(exc)
    return isinstance(exc, CudaDriverError) or "CUDA error" in text or type(exc).__name__ == "AcceleratorError"


class _Judge:
    """One job's steps, in the order a candidate can fail them."""

    def __init__(self, job: Job, state: WorkerState, result: EvalResult) -> None:
        import torch

        self.torch = torch
        self.job, self.state, self.result = job, state, result
        self.config: EvalConfig = job.config
        self.filename = job.candidate_path or f"<candidate {job.candidate_sha256[:12]}>"
        self.findings: dict[CheatKind, CheatFinding] = {}

    # -- pipeline ---------------------------------------------------------------------
    def run(self) -> None:
        from htam_graph.runner import checks, timing
        from htam_graph.tasks import task_dtype

        task_module = self.job.task.load_module()
        self.get_inputs = task_module.get_inputs
        self._static_checks(str(task_dtype(task_module)).removeprefix("torch."))
        snapshot = checks.JudgeSnapshot([checks, timing, sys.modules[__name__]])
        flags, before = checks.precision_flags(), checks.Concurrency.now()
        try:
            ref, new = self._build_models(task_module, self._load_candidate())
        except Stop as stop:
            # A compile error keeps the worker only if the code that did run left no trace.
            self._check_judge(snapshot, flags, before, "loading the candidate")
            raise stop
        self._check_judge(snapshot, flags, before, "loading the candidate")
        self.result.compiled = True
        self._correctness(ref, new)
        self._check_judge(snapshot, flags, before, "running the candidate")
        if not self.result.correct:
            raise Stop(Verdict.INCORRECT, self.result.errors)
        self._time(ref, new)
        self._check_judge(snapshot, flags, before, "timing the candidate")
        self.result.verdict = Verdict.OK

    def _flag(self, kind: CheatKind, detail: str) -> None:
        from htam_graph.runner.checks import finding

        if kind not in self.findings:
            self.findings[kind] = finding(kind, detail)
            self.result.cheats.append(self.findings[kind])

    def _check_judge(self, snapshot: Any, flags: dict[str, object], before: Any, when: str) -> None:
        """Flag replaced judge functions, changed precision flags, leftover threads; stop on any finding."""
        from htam_graph.runner.checks import precision_flags

        if replaced := snapshot.replaced():
            self._flag(CheatKind.TIMER_PATCH, f"{when} replaced " + ", ".join(replaced[:6]))
        now = precision_flags()
        if changed := [k for k in flags if now[k] != flags[k]]:
            self._flag(CheatKind.PRECISION_DOWNGRADE, f"{when} changed " + ", ".join(changed))
        if grown := before.grown():
            self._flag(CheatKind.SIDE_STREAM, f"{when} left {grown} running")
        if self.findings:
            raise Stop(Verdict.REJECTED, "; ".join(f.detail for f in self.findings.values()), restart=True)

    # -- static checks ------------------------------------------------------------------
    def _static_checks(self, dtype_name: str) -> None:
        from htam_graph.runner.static_checks import static_check

        if not self.config.static_checks:
            return
        found = static_check(self.job.candidate_source, dtype_name, self.job.fmt)
        if found:
            self.result.cheats.extend(found)
            raise Stop(Verdict.REJECTED, "; ".join(f.detail for f in found))

    # -- loading --------------------------------------------------------------------------
    def _load_candidate(self) -> types.ModuleType:
        from htam_graph.runner.build import cache_root

        name = f"htam_candidate_{self.job.candidate_sha256[:16]}"
        module = types.ModuleType(name)
        module.__file__ = self.filename
        source = self.job.candidate_source
        linecache.cache[self.filename] = (len(source), None, source.splitlines(True), self.filename)
        if self.job.fmt == "kernelbench":
            # One build folder per candidate: KernelBench solutions reuse extension names.
            os.environ["TORCH_EXTENSIONS_DIR"] = str(cache_root() / "torch_ext" / self.job.candidate_sha256[:16])
        sys.modules[name] = module  # dataclasses and pickling look modules up by name
        try:
            exec(compile(source, self.filename, "exec"), module.__dict__)
        except Exception as exc:
            raise self._load_failure(exc) from exc
        finally:
            sys.modules.pop(name, None)
        if not isinstance(getattr(module, "ModelNew", None), type):
            raise Stop(Verdict.LOAD_ERROR, "the candidate defines no class ModelNew(nn.Module)")
        return module

    def _load_failure(self, exc: Exception) -> Stop:
        from htam_graph.runner.native import CudaBuildError

        if isinstance(exc, CudaBuildError):
            return Stop(Verdict.COMPILE_ERROR, exc.result.errors)
        if self.job.fmt == "kernelbench" and "Error building extension" in str(exc):
            return Stop(Verdict.COMPILE_ERROR, condense_errors(str(exc)))
        return Stop(Verdict.LOAD_ERROR, condense_exception(exc, self.filename), restart=_is_cuda_error(exc))

    def _build_models(self, task_module: types.ModuleType, candidate: types.ModuleType) -> tuple[Any, Any]:
        torch = self.torch
        init = list(task_module.get_init_inputs())
        torch.manual_seed(self.config.seed)
        ref = task_module.Model(*init).to(self.state.device)
        try:
            torch.manual_seed(self.config.seed)
            new = candidate.ModelNew(*init)
            new = new.to(self.state.device) if isinstance(new, torch.nn.Module) else new
        except Exception as exc:
            raise self._load_failure(exc) from exc
        if isinstance(new, torch.nn.Module):
            _copy_matching_weights(ref, new)
        return ref, new

    # -- running ------------------------------------------------------------------------
    def _inputs(self, seed: int) -> list[Any]:
        """get_inputs() with the GPU as default device: drawing GBs of random numbers on the
        CPU, as KernelBench does, takes seconds per call; tensors it pins to the CPU move over."""
        torch = self.torch
        torch.manual_seed(seed)
        with torch.device(self.state.device):
            inputs = self.get_inputs()
        return [x.to(self.state.device) if isinstance(x, torch.Tensor) else x for x in inputs]

    def _call(self, fn: Callable[..., Any], inputs: list[Any], what: str) -> Any:
        """Run `fn(*inputs)` to completion; exceptions become RUNTIME_ERROR."""
        torch = self.torch
        try:
            with torch.no_grad():
                out = fn(*inputs)
            torch.cuda.synchronize()
        except Exception as exc:
            raise Stop(
                Verdict.RUNTIME_ERROR,
                f"{what}: {condense_exception(exc, self.filename)}",
                restart=_is_cuda_error(exc) or not _device_healthy(),
            ) from exc
        return out

    def _run_candidate(self, new: Any, inputs: list[Any], specs: list[Any], poison: Any) -> list[Any]:
        from htam_graph.runner import checks

        checks.poison_memory(specs, poison, self.config.poison_blocks, self.state.device)
        before = checks.Concurrency.now()
        outs = checks.flatten_outputs(self._call(new, inputs, "ModelNew.forward raised"))
        if grown := before.grown():
            self._flag(CheatKind.SIDE_STREAM, f"forward left {grown} running")
        for i, out in enumerate(outs):
            if type(out) is not self.torch.Tensor or not out.is_cuda:
                is_tensor = isinstance(out, self.torch.Tensor)
                got = f"{type(out).__name__} on {out.device}" if is_tensor else type(out).__name__
                self._flag(CheatKind.LAZY_OUTPUT, f"output {i} is a {got}, not a plain torch.Tensor on the GPU")
                raise Stop(Verdict.REJECTED, self.findings[CheatKind.LAZY_OUTPUT].detail, restart=True)
        return outs

    def _correctness(self, ref: Any, new: Any) -> None:
        from htam_graph.runner import checks

        torch, cfg = self.torch, self.config
        probe = checks.flatten_outputs(self._call(ref, self._inputs(cfg.seed + 1), "the reference Model raised"))
        if not all(isinstance(t, torch.Tensor) for t in probe):
            raise Stop(Verdict.RUNTIME_ERROR, "the reference Model returned something other than tensors")
        specs = [checks.OutputSpec(tuple(t.shape), t.dtype) for t in probe]
        del probe
        failures: list[str] = []
        # Every trial's inputs stay alive, so each trial's buffers have new addresses and a
        # cache keyed on addresses cannot answer a later trial.
        all_inputs: list[list[Any]] = []
        prev: tuple[list[Any], list[Any]] | None = None  # candidate and reference outputs
        for trial in range(cfg.correctness_trials):
            all_inputs.append(self._inputs(cfg.seed + 1000 + trial))
            outs, refs = self._trial(ref, new, all_inputs[-1], specs, failures)
            if prev is not None and checks.same_values(outs, prev[0]) and not checks.same_values(refs, prev[1]):
                self._flag(
                    CheatKind.INPUT_INDEPENDENT, "outputs identical for different inputs while the reference's differ"
                )
            prev = (outs, refs)
        inputs = all_inputs[-1]
        del all_inputs[:-1]
        self.result.correctness_trials = cfg.correctness_trials
        self._uninitialized_read(new, inputs, prev[0] if prev else [], specs)
        self._pointer_cache(ref, new, inputs, specs, correct=not failures)
        if self.job.fmt == "native":
            self._torch_ops(new, inputs)
        self._off_stream(new, inputs, specs)
        self.result.correct = not failures
        self.result.errors = "\n".join(failures[:3])

    def _trial(
        self, ref: Any, new: Any, inputs: list[Any], specs: list[Any], failures: list[str]
    ) -> tuple[list[Any], list[Any]]:
        """Candidate first (no reference result for these inputs exists yet), then the reference."""
        from htam_graph.runner import checks

        clones = [x.clone() if isinstance(x, self.torch.Tensor) else x for x in inputs]
        outs = self._run_candidate(new, inputs, specs, checks.NAN_POISON)
        for i, (x, c) in enumerate(zip(inputs, clones, strict=True)):
            if isinstance(x, self.torch.Tensor) and not _bitwise_equal(x, c):
                self._flag(CheatKind.INPUT_MUTATION, f"forward modified input {i}")
        for i, out in enumerate(outs):
            if checks.storage_overlaps(out, inputs):
                self._flag(CheatKind.INPUT_ALIAS, f"output {i} shares storage with an input")
        refs = checks.flatten_outputs(self._call(ref, clones, "the reference Model raised"))
        errors, max_abs, max_rel = self._compare(outs, refs, checks.NAN_POISON)
        failures.extend(errors)
        self.result.max_abs_error = max(self.result.max_abs_error or 0.0, max_abs)
        self.result.max_rel_error = max(self.result.max_rel_error or 0.0, max_rel)
        return outs, refs

    def _compare(self, outs: list[Any], refs: list[Any], poison: Any) -> tuple[list[str], float, float]:
        """Mismatch messages and the largest errors; flags surviving markers and constant outputs."""
        from htam_graph.runner import checks

        if len(outs) != len(refs):
            return [f"forward returned {len(outs)} outputs, the reference {len(refs)}"], float("inf"), float("inf")
        errors: list[str] = []
        max_abs = max_rel = 0.0
        for i, (out, want) in enumerate(zip(outs, refs, strict=True)):
            cmp = checks.compare(i, out, want, self.config.atol, self.config.rtol)
            max_abs, max_rel = max(max_abs, cmp.max_abs), max(max_rel, cmp.max_rel)
            if not cmp.ok:
                errors.append(cmp.message)
            if out.shape != want.shape or out.dtype != want.dtype:
                continue
            if survivors := checks.marker_survivors(out, want, poison):
                self._flag(
                    CheatKind.UNWRITTEN_OUTPUT,
                    f"output {i}: {survivors} of {out.numel()} elements never written "
                    f"(the {poison.name} marker survived)",
                )
            if checks.is_constant(out) and not checks.is_constant(want):
                self._flag(CheatKind.CONSTANT_OUTPUT, f"output {i} is constant while the reference's is not")
        return errors, max_abs, max_rel

    def _uninitialized_read(self, new: Any, inputs: list[Any], outs: list[Any], specs: list[Any]) -> None:
        """The same inputs under a second marker must give the same outputs."""
        from htam_graph.runner import checks

        unwritten_before = CheatKind.UNWRITTEN_OUTPUT in self.findings  # that finding already explains a difference
        again = self._run_candidate(new, inputs, specs, checks.GARBAGE_POISON)
        errors, _, _ = self._compare(again, outs, checks.GARBAGE_POISON)
        if errors and not unwritten_before:
            self._flag(
                CheatKind.UNINITIALIZED_READ,
                "the same inputs gave different outputs when free memory held other values: "
                + errors[0].split(": ", 1)[-1],
            )

    def _pointer_cache(self, ref: Any, new: Any, inputs: list[Any], specs: list[Any], correct: bool) -> None:
        """New values written into the same input buffers must give the new answer."""
        fresh = self._inputs(self.config.seed + 999)
        for x, y in zip(inputs, fresh, strict=True):
            if isinstance(x, self.torch.Tensor):
                x.copy_(y)
        del fresh
        failures: list[str] = []
        self._trial(ref, new, inputs, specs, failures)
        if correct and failures:
            self._flag(CheatKind.POINTER_CACHE, "after the inputs were rewritten in place: " + failures[0])

    def _torch_ops(self, new: Any, inputs: list[Any]) -> None:
        from htam_graph.runner.checks import OpRecorder

        recorder = OpRecorder()
        with recorder:
            self._call(new, inputs, "ModelNew.forward raised")
        if ops := recorder.disallowed():
            self._flag(CheatKind.TORCH_COMPUTE_OP, "forward runs PyTorch compute ops: " + ", ".join(ops[:8]))

    def _off_stream(self, new: Any, inputs: list[Any], specs: list[Any]) -> None:
        """Outputs must not be ready while the current stream is held (checks.held_stream_snapshot)."""
        from htam_graph.runner import checks
        from htam_graph.runner.timing import spin_cycles_per_ms

        before = [t.clone() for t in self._run_candidate(new, inputs, specs, checks.NAN_POISON)]
        fresh = self._inputs(self.config.seed + 3000)
        checks.poison_memory(specs, checks.NAN_POISON, self.config.poison_blocks, self.state.device)
        copies, outs = self._call(
            lambda: checks.held_stream_snapshot(lambda: new(*fresh), spin_cycles_per_ms()),
            [],
            "ModelNew.forward raised",
        )
        if copies is None:  # forward waited for the device itself: the test says nothing
            return
        early = checks.early_fraction(copies, outs, before)
        if early > 0.5:
            self._flag(
                CheatKind.SIDE_STREAM,
                f"{early:.0%} of the output was final while torch's current stream was still blocked: "
                "the work ran on another stream or thread",
            )

    # -- timing -------------------------------------------------------------------------
    def _timing_inputs(self) -> list[list[Any]]:
        """Separately allocated input sets for the timed trials to rotate over (timing.py)."""
        sets = [self._inputs(self.config.seed + 2000)]
        size = sum(x.nbytes for x in sets[0] if isinstance(x, self.torch.Tensor))
        count = max(1, min(TIMING_INPUT_SETS, TIMING_INPUT_BYTES // max(size, 1)))
        sets += [self._inputs(self.config.seed + 2000 + i) for i in range(1, count)]
        return sets

    def _time(self, ref: Any, new: Any) -> None:
        from htam_graph.runner import checks
        from htam_graph.runner.timing import hidden_work_ms, hidden_work_tolerance, time_gpu

        torch, cfg, flusher = self.torch, self.config, self.state.flusher
        sets = self._timing_inputs()
        latency = self.state.sync_latency_ms

        def calls(model: Any) -> list[Callable[[], Any]]:
            return [lambda x=x: model(*x) for x in sets]

        before = checks.Concurrency.now()
        with torch.no_grad():
            self.result.candidate = time_gpu(calls(new), flusher, cfg.warmup, cfg.trials)
            if grown := before.grown():
                self._flag(CheatKind.SIDE_STREAM, f"timed runs left {grown} running")
            hidden = hidden_work_ms(self.result.candidate, latency)
            if hidden > hidden_work_tolerance(self.result.candidate):
                self._flag(
                    CheatKind.SIDE_STREAM,
                    f"timed runs: work went on {hidden:.3f} ms past the timed stream's end event "
                    "(seen after a device-wide synchronize)",
                )
            self.result.reference_eager = time_gpu(calls(ref), flusher, cfg.warmup, cfg.trials)
            if cfg.compile_reference:
                compiled = torch.compile(ref)
                self.result.reference_compile = time_gpu(calls(compiled), flusher, cfg.warmup, cfg.trials)
        self.result.speedup_eager = _speedup(self.result.reference_eager, self.result.candidate)
        self.result.speedup_compile = _speedup(self.result.reference_compile, self.result.candidate)
        best = max(self.result.speedup_eager or 0.0, self.result.speedup_compile or 0.0)
        self.result.suspicious = best > SUSPICIOUS_SPEEDUP


def _speedup(reference: Timing | None, candidate: Timing | None) -> float | None:
    if reference is None or candidate is None or candidate.cost_ms <= 0:
        return None
    return reference.cost_ms / candidate.cost_ms


def _bitwise_equal(a: Any, b: Any) -> bool:
    import torch

    if a.dtype.itemsize in (1, 2, 4, 8):
        view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.dtype.itemsize]
        return bool(torch.equal(a.view(view), b.view(view)))
    return bool(torch.equal(a, b))


def _copy_matching_weights(ref: Any, new: Any) -> None:
    """Give ModelNew the reference's weights wherever names and shapes match, so the
    order in which either constructor draws its random initial weights does not matter."""
    import torch

    theirs = ref.state_dict()
    with torch.no_grad():
        for name, tensor in new.state_dict().items():
            src = theirs.get(name)
            if src is not None and src.shape == tensor.shape and src.dtype == tensor.dtype:
                tensor.copy_(src)
