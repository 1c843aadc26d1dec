"""The referee process of one GPU: judges the jobs the parent sends, one at a time.

It is spawned (a fresh interpreter), drops every environment variable that is not needed
to build and run CUDA code, forks its fork server while CUDA is still untouched, makes
itself non-dumpable, and only then brings CUDA up. It never imports a candidate's code.
"""

from __future__ import annotations

import cProfile
import logging
import os
import sys
from multiprocessing.connection import Connection
from pathlib import Path

import torch
from cuda.bindings import driver
from torch.utils.flop_counter import FlopCounterMode

from htam_graph.runner import proc
from htam_graph.runner.build import gpu_arch
from htam_graph.runner.forkserver import Confinement, ForkServer
from htam_graph.runner.hardware import device_facts
from htam_graph.runner.harness.probes import OpRecorder
from htam_graph.runner.jobs import Job, JobReply, RefereeInfo
from htam_graph.runner.native import check_driver
from htam_graph.runner.referee.judge import Judge
from htam_graph.runner.referee.link import ForkedProcesses
from htam_graph.runner.referee.reference import References
from htam_graph.runner.referee.roofline import DevicePeaks
from htam_graph.runner.timing import L2Flusher

logger = logging.getLogger(__name__)

PROFILE_ENV = "HTAM_PROFILE_DIR"  # a folder: the referee writes its cProfile stats there when it stops

# What a candidate's process may still see of the environment (it inherits the referee's):
# the toolchain and the GPU, nothing of the user's keys, servers or settings.
_KEPT = {"PATH", "HOME", "USER", "LANG", "TMPDIR", "TMP", "TEMP", "LD_LIBRARY_PATH", "PYTHONPATH", "CC", "CXX"}
_KEPT_PREFIXES = ("CUDA_", "NVIDIA_", "LC_", "TORCH_EXTENSIONS", "TORCH_CUDA_ARCH", "TORCHINDUCTOR_", "TRITON_")


def scrub_environment() -> None:
    dropped = [name for name in os.environ if name not in _KEPT and not name.startswith(_KEPT_PREFIXES)]
    for name in dropped:
        del os.environ[name]
    logger.debug("dropped %d environment variables before starting candidate processes", len(dropped))


def versions() -> dict[str, str]:
    driver_version = check_driver(driver.cuDriverGetVersion(), "cuDriverGetVersion")
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "driver": f"{driver_version // 1000}.{driver_version % 1000 // 10}",
    }


def healthy(device: torch.device) -> bool:
    try:
        torch.cuda.synchronize(device)
        return True
    except Exception:
        logger.exception("the referee's CUDA context failed; it restarts")
        return False


def import_dispatch_modes() -> None:
    """Use torch's dispatch modes once, on the CPU: their first use imports seconds' worth of
    torch (dynamo) that the fork server's children then inherit instead of each paying it."""
    with FlopCounterMode(display=False), OpRecorder():
        torch.ones(2, 2) @ torch.ones(2, 2)


def serve(conn: Connection, device_index: int, sandbox_readable: list[str] | None = None) -> None:
    """Entry point of the spawned referee: say hello, then judge jobs until told to stop.
    With `sandbox_readable` (the judge's folders candidates read), candidate processes are
    confined (runner/sandbox.py); None runs them unconfined (--no-sandbox)."""
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no compile subprocesses
    profile_dir = os.environ.get(PROFILE_ENV)  # read before the scrub drops it
    scrub_environment()
    import_dispatch_modes()
    confinement = None if sandbox_readable is None else Confinement(tuple(Path(p) for p in sandbox_readable))
    # Before CUDA: a process that initialised CUDA cannot fork.
    server = ForkServer.start(device_index, profile_dir, confinement)
    # Profiling starts after the fork, so candidate processes never inherit the profiler.
    profiler = cProfile.Profile() if profile_dir else None
    if profiler is not None:
        profiler.enable()
    try:
        proc.refuse_inspection()
        device = torch.device("cuda", device_index)
        torch.cuda.set_device(device)
        # The reference in true fp32: cuDNN's default TF32 convolutions miss fp32's 1e-4
        # tolerance against an exact candidate. Candidates are held to the same flags.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        flusher = L2Flusher()
        info = RefereeInfo(
            pid=os.getpid(),
            device_index=device_index,
            device=torch.cuda.get_device_name(device),
            arch=gpu_arch(),
            versions=versions(),
            hardware=device_facts(device_index, gpu_arch()),
        )
        judge = Judge(
            device,
            References(device, flusher),
            ForkedProcesses(server, device),
            DevicePeaks.of(device),
            flusher.flush_ms(),
            info.device,
            info.versions,
        )
        server.warm()
        conn.send(info)
        while True:
            try:
                job: Job | None = conn.recv()
            except EOFError:
                return
            if job is None:
                return
            result, judge_failed = judge.judge(job)
            restart = judge_failed or not healthy(device)
            conn.send(JobReply(result=result, restart=restart))
            if restart:
                return
    finally:
        server.stop()
        if profiler is not None and profile_dir:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, f"referee-{os.getpid()}.prof"))
