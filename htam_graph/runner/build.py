"""Build CUDA source to a cubin with nvcc, behind a content-hash cache.

A cubin is ~50-100x cheaper than a torch extension (0.55 s against 55-64 s for a
`load_inline` build of the same kernel), so every native candidate goes through here.
Failed builds are cached as well, so a broken candidate is never compiled twice. The cache
lives on disk and is shared by the parent process and the candidate processes; writes are
atomic (htam_graph/files.py), so concurrent builders of the same key are harmless.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, Field

from htam_graph.config import Settings, data_dir, load_settings
from htam_graph.errors import ConfigError
from htam_graph.files import atomic_write
from htam_graph.runner.models import BuildResult
from htam_graph.runner.sandbox import python_env

logger = logging.getLogger(__name__)

DEFAULT_FLAGS: tuple[str, ...] = ("-O3", "-lineinfo")
DEFAULT_ARCH = "sm_90"  # the H200 the project targets, used when no GPU is visible
NVCC_TIMEOUT_S = 120.0
SOURCE_NAME = "kernel.cu"
# How the condensed errors name the candidate's source: the contract calls it CUDA_SRC.
SOURCE_LABEL = "CUDA_SRC"
MAX_ERRORS = 8
MAX_LINES = 20
MAX_CHARS = 2000


class BuildSettings(BaseModel):
    """Where and how candidates are built, resolved once from Settings by the process that
    starts the judge and sent with every job: GPU processes never read the environment."""

    model_config = {"frozen": True}

    nvcc: Path
    cache_dir: Path = Field(description="cubins under <cache_dir>/cubin, load_inline builds under torch_ext/")
    arch: str | None = Field(None, description="e.g. sm_90; None: the GPU's own, filled in where the GPU is")
    sandbox: bool = Field(True, description="run nvcc confined (runner/confined.py); False: --no-sandbox")

    @classmethod
    def resolve(cls, settings: Settings | None = None) -> BuildSettings:
        """HTAM_NVCC / HTAM_CACHE_DIR / HTAM_CUDA_ARCH (flags, environment, the settings file) or their defaults."""
        settings = settings or load_settings()
        return cls(nvcc=find_nvcc(settings), cache_dir=settings.cache_dir or data_dir(), arch=settings.cuda_arch)

    def for_arch(self, arch: str) -> BuildSettings:
        """These settings with the architecture fixed (kept when one was configured)."""
        return self if self.arch else self.model_copy(update={"arch": arch})


def find_nvcc(settings: Settings | None = None) -> Path:
    """HTAM_NVCC, then PATH, then what cuda.pathfinder finds (NVIDIA's PyPI wheels, which
    this package installs on Linux; a conda environment; $CUDA_PATH or $CUDA_HOME; the
    toolkit of the CUDA runtime the system loads), then /usr/local/cuda."""
    if path := (settings or load_settings()).nvcc:
        if not path.is_file():
            raise ConfigError(
                f"HTAM_NVCC={path} is not a file; point it at an nvcc executable", setting="HTAM_NVCC", value=path
            )
        return path
    if on_path := shutil.which("nvcc"):
        return Path(on_path)
    from cuda.pathfinder import find_nvidia_binary_utility  # here: ~50 ms to import, needed only now

    if found := find_nvidia_binary_utility("nvcc"):
        return Path(found)
    toolkit = Path("/usr/local/cuda/bin/nvcc")
    if toolkit.is_file():
        return toolkit
    raise ConfigError(
        "nvcc not found: set HTAM_NVCC, put nvcc on PATH, or `pip install htam-graph[nvcc]`", setting="HTAM_NVCC"
    )


# nvcc_version's answers, by nvcc path; a sandboxed candidate's process, which cannot run
# nvcc, is told the version by the referee (remember_nvcc_version).
_NVCC_VERSIONS: dict[Path, str] = {}


def remember_nvcc_version(nvcc: Path, version: str) -> None:
    _NVCC_VERSIONS[nvcc] = version


def nvcc_version(nvcc: Path) -> str:
    """The 'release X.Y, VX.Y.Z' part of `nvcc --version` (part of every cache key)."""
    if nvcc not in _NVCC_VERSIONS:
        _NVCC_VERSIONS[nvcc] = _ask_nvcc_version(nvcc)
    return _NVCC_VERSIONS[nvcc]


def _ask_nvcc_version(nvcc: Path) -> str:
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r"release \S+ V[\d.]+", out.stdout)
    if out.returncode != 0 or not match:
        raise ConfigError(
            f"{nvcc} --version failed ({out.stderr.strip() or out.stdout.strip()}); check the CUDA install",
            setting="HTAM_NVCC",
            value=nvcc,
        )
    return match.group(0)


def gpu_arch() -> str:
    """sm_XY of the current GPU, else sm_90 when there is no GPU."""
    # torch only here: the CLI's listing and precheck paths never pay for it otherwise.
    import torch

    if not torch.cuda.is_available():
        return DEFAULT_ARCH
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def build_key(source: str, arch: str, flags: Sequence[str], version: str) -> str:
    payload = "\0".join([source, arch, " ".join(flags), version])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# Set in a confined candidate process, which cannot start nvcc: who builds a cache miss
# for it (the referee, asked over its channel), and why a miss fails when no one can.
_NO_BUILDS: str | None = None
_DELEGATE: Callable[[str], None] | None = None


def forbid_builds(reason: str, delegate: Callable[[str], None] | None = None) -> None:
    """From now on this process runs no nvcc: a source not in the cache goes to `delegate`
    (which builds it into the cache), else the build fails with `reason`."""
    global _NO_BUILDS, _DELEGATE
    _NO_BUILDS, _DELEGATE = reason, delegate


def build_cubin(
    source: str, settings: BuildSettings, flags: Sequence[str] = (), timeout_s: float = NVCC_TIMEOUT_S
) -> BuildResult:
    """Compile `source` to a cubin for `settings.arch` (None: this machine's GPU), cached by content."""
    started = time.perf_counter()
    arch = settings.arch or gpu_arch()
    all_flags = (*DEFAULT_FLAGS, *flags)
    key = build_key(source, arch, all_flags, nvcc_version(settings.nvcc))
    folder = settings.cache_dir / "cubin"
    meta_path = folder / f"{key}.json"
    if meta_path.is_file():
        cached = _cached(BuildResult.model_validate_json(meta_path.read_text()), key)
        if cached is not None:
            return cached.model_copy(update={"cached": True, "seconds": time.perf_counter() - started})
    if _NO_BUILDS is not None:
        if _DELEGATE is not None and not flags:  # the referee builds with the default flags only
            _DELEGATE(source)
            if meta_path.is_file() and (found := _cached(BuildResult.model_validate_json(meta_path.read_text()), key)):
                return found.model_copy(update={"seconds": time.perf_counter() - started})
        return BuildResult(ok=False, key=key, arch=arch, cached=False, seconds=0.0, errors=_NO_BUILDS, log=_NO_BUILDS)
    result = _run_nvcc(settings, source, arch, all_flags, key, folder, timeout_s)
    return result.model_copy(update={"seconds": time.perf_counter() - started})


def _cached(record: BuildResult, key: str) -> BuildResult | None:
    """A cache record, if it is one for `key` whose cubin still has the recorded hash."""
    if record.key != key:
        return None
    if not record.ok:
        return record
    if not record.cubin_path or not record.cubin_sha256:
        return None
    try:
        data = Path(record.cubin_path).read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != record.cubin_sha256:
        logger.warning("cached cubin %s does not match its record; rebuilding", record.cubin_path)
        return None
    return record


# The judge's own kernels (timing gate, fused comparisons), by build key: built once per
# process into a private folder, never read back from the shared cache.
_JUDGE_CUBINS: dict[str, bytes] = {}


def judge_cubin(source: str, settings: BuildSettings, flags: Sequence[str] = ()) -> bytes:
    """The cubin of one of the judge's own kernels, from this process's memory."""
    arch = settings.arch or gpu_arch()
    all_flags = (*DEFAULT_FLAGS, *flags)
    key = build_key(source, arch, all_flags, nvcc_version(settings.nvcc))
    if key not in _JUDGE_CUBINS:
        with tempfile.TemporaryDirectory(prefix="htam-judge-") as private:
            os.chmod(private, 0o700)
            trusted = settings.model_copy(update={"sandbox": False})  # our own source
            result = _run_nvcc(trusted, source, arch, all_flags, key, Path(private), NVCC_TIMEOUT_S)
            if not result.ok or result.cubin_path is None:
                from htam_graph.runner.native import CudaBuildError

                raise CudaBuildError(result)
            _JUDGE_CUBINS[key] = Path(result.cubin_path).read_bytes()
    return _JUDGE_CUBINS[key]


def confined_command(cmd: Sequence[str], writable: Path) -> list[str]:
    """`cmd` run by runner/confined.py: sandboxed, writing only `writable`."""
    return [sys.executable, "-m", "htam_graph.runner.confined", "--write", str(writable), "--", *cmd]


def _run_nvcc(
    settings: BuildSettings, source: str, arch: str, flags: Sequence[str], key: str, folder: Path, timeout_s: float
) -> BuildResult:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="htam-nvcc-") as tmp:
        src = Path(tmp) / SOURCE_NAME
        src.write_text(source, encoding="utf-8")
        out = Path(tmp) / "kernel.cubin"
        cmd = [str(settings.nvcc), "-cubin", f"-arch={arch}", *flags, "-o", str(out), str(src)]
        env = None
        if settings.sandbox:
            cmd, env = confined_command(cmd, Path(tmp)), {**os.environ, **python_env()}
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp, check=False, env=env)
        except subprocess.TimeoutExpired:
            # Not cached: a timeout may be the machine's load rather than the source.
            msg = f"nvcc timed out after {timeout_s:.0f} s"
            logger.warning("%s (key %s); not cached", msg, key[:12])
            return BuildResult(ok=False, key=key, arch=arch, cached=False, seconds=0.0, errors=msg, log=msg)
        log = (proc.stdout + proc.stderr).replace(tmp + os.sep, "")
        ok = proc.returncode == 0 and out.is_file() and not out.is_symlink()
        cubin_path, digest = None, None
        if ok:
            cubin_path = folder / f"{key}.cubin"
            data = out.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            atomic_write(cubin_path, data)
        errors = "" if ok else condense_errors(log, source)
    result = BuildResult(
        ok=ok,
        key=key,
        arch=arch,
        cached=False,
        seconds=0.0,
        cubin_path=str(cubin_path) if cubin_path else None,
        cubin_sha256=digest,
        errors=errors,
        log=log,
    )
    atomic_write(folder / f"{key}.json", result.model_dump_json().encode("utf-8"))
    return result


def build_many(
    sources: Iterable[str], settings: BuildSettings, flags: Sequence[str] = (), jobs: int | None = None
) -> list[BuildResult]:
    """Build several sources at once: threads each driving one nvcc process, one per core."""
    sources = list(sources)
    settings = settings.for_arch(settings.arch or gpu_arch())
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda src: build_cubin(src, settings, flags), sources))


# nvcc front end: "kernel.cu(12): error: ..."; host compiler / preprocessor: "file:12:5: error: ...";
# ptxas: "ptxas error   : ..." or "ptxas fatal   : ...".
_FRONTEND = re.compile(r"^(?P<file>[^\s:()]+)\((?P<line>\d+)\): (?P<sev>[a-z ]*error)\s*(?:#\S+)?:?\s*(?P<msg>.*)$")
_HOSTCC = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:\d+:)? (?P<sev>(?:fatal )?error): (?P<msg>.*)$")
_TOOL = re.compile(r"^(?P<tool>ptxas|nvlink|nvcc|fatbinary)\s*(?P<sev>error|fatal)\s*:\s*(?P<msg>.*)$")


def condense_errors(log: str, source: str | None = None) -> str:
    """The few lines an LLM needs to fix a failed build.

    Keeps the first distinct error lines (warnings, remarks and the compiler's own echo of
    the source dropped), names the candidate's file CUDA_SRC with its line number, shows
    the offending source line, strips folder paths, and caps the excerpt.
    """
    source_lines = source.splitlines() if source is not None else []
    seen: set[str] = set()
    out: list[str] = []
    for raw in log.splitlines():
        entry = _error_entry(raw.strip(), source_lines)
        if entry is None or entry[0] in seen:
            continue
        seen.add(entry[0])
        out.extend(entry)
        if len(seen) >= MAX_ERRORS:
            break
    if not out:  # an unrecognised failure: the tail of the log beats nothing
        out = [line for line in log.splitlines() if line.strip()][-MAX_LINES:]
    return _cap(out)


def _error_entry(line: str, source_lines: list[str]) -> list[str] | None:
    if tool := _TOOL.match(line):
        return [f"{tool['tool']} {tool['sev']}: {tool['msg'].strip()}"]
    match = _FRONTEND.match(line) or _HOSTCC.match(line)
    if match is None:
        return None
    lineno = int(match["line"])
    name = os.path.basename(match["file"])
    if name == SOURCE_NAME:
        head = f"{SOURCE_LABEL} line {lineno}: {match['sev']}: {match['msg'].strip()}"
        if 0 < lineno <= len(source_lines):
            return [head, f"    {source_lines[lineno - 1].strip()}"]
        return [head]
    return [f"{name}:{lineno}: {match['sev']}: {match['msg'].strip()}"]


def _cap(lines: list[str]) -> str:
    text = "\n".join(lines[:MAX_LINES])
    if len(text) > MAX_CHARS:
        text = text[: MAX_CHARS - 4].rstrip() + "\n..."
    return text
