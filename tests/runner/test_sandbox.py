"""The sandbox around candidate processes, proved by real attacks on this CPU machine.

Candidate processes come from the real fork server with the real confinement (the same
policy as on the GPU machine); only the harness is replaced by a small loop that loads a
shared library when told (no CUDA here). Each library's constructor makes one attack
(tests/redteam/host/attacks.c), as a load_inline extension's static initializer would. No
static check is involved: the source is never looked at, only the OS stands in the way.
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
import torch

import htam_graph
from htam_graph.runner import build, forkserver, sandbox
from htam_graph.runner.build import BuildSettings, build_cubin, find_nvcc, nvcc_version
from htam_graph.runner.harness import main as harness
from htam_graph.runner.protocol import Built, Finish, Finished, Health, NeedsBuild, Ready

ATTACKS = Path(__file__).resolve().parents[1] / "redteam" / "host" / "attacks.c"

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock and seccomp are Linux's"),
    pytest.mark.skipif(sandbox.missing() is not None, reason=f"no sandbox here: {sandbox.missing()}"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the attacks"),
]


def _loader(
    conn: Connection,
    device_index: int,
    profile_dir: str | None = None,
    confined: bool = False,
    forked_at: float | None = None,
) -> None:
    """The candidate process's loop in these tests: load a library, say how its attack went."""
    conn.send_bytes(Ready(pid=os.getpid(), start_seconds=0.01).model_dump_json().encode())
    while True:
        op, arg = conn.recv()
        if op == "load":
            lib = ctypes.CDLL(arg)
            detail = (ctypes.c_char * 512).in_dll(lib, "detail").value.decode()
            conn.send((ctypes.c_int.in_dll(lib, "outcome").value, detail))
        elif op == "state":
            status = Path("/proc/self/status").read_text()
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            conn.send(
                {
                    "confined": confined,
                    "environ": dict(os.environ),
                    "core": resource.getrlimit(resource.RLIMIT_CORE),
                    "no_new_privs": fields["NoNewPrivs"].strip(),
                    "seccomp": fields["Seccomp"].strip(),
                    "cap_eff": fields["CapEff"].strip(),
                    "uid": os.getuid(),
                    "cwd": os.getcwd(),
                }
            )


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Things a candidate must not touch: a judge stand-in process, a secret settings file,
    a cached cubin, a TCP port and an abstract unix socket of the judge's."""
    root = tmp_path_factory.mktemp("lab")
    secrets = root / "home" / ".config" / "htam-graph"
    secrets.mkdir(parents=True)
    (secrets / "htam.env").write_text("HTAM_ANTHROPIC_API_KEY=sk-secret\n")
    (root / "project").mkdir()
    (root / "project" / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    cache = root / "cache" / "cubin"
    cache.mkdir(parents=True)
    (cache / "judge.cubin").write_bytes(b"the judge's kernel")
    judge = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0htam-judge-{os.getpid()}")
    abstract.listen()
    by_path = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # as a docker.sock would be
    by_path.bind(str(root / "judge.sock"))
    by_path.listen()
    libs = root / "libs"
    libs.mkdir()
    yield {
        "root": root,
        "libs": libs,
        "cache": cache,
        "judge": judge,
        "port": listener.getsockname()[1],
        "abstract": f"htam-judge-{os.getpid()}",
        "unix": str(root / "judge.sock"),
    }
    judge.kill()
    judge.wait()
    listener.close()
    abstract.close()
    by_path.close()


def _build(lab: dict[str, Any], name: str, **defines: str | int) -> Path:
    out = lab["libs"] / f"{name.lower()}-{abs(hash(tuple(defines.items())))}.so"
    flags = [f"-DATTACK_{name}"] + [f'-D{k}="{v}"' if isinstance(v, str) else f"-D{k}={v}" for k, v in defines.items()]
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-pthread", *flags, "-o", str(out), str(ATTACKS)], check=True)
    return out


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, lab: dict[str, Any]):
    monkeypatch.setattr(harness, "serve", _loader)  # the fork copies this process, patch included
    monkeypatch.setenv("HTAM_ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    confinement = forkserver.Confinement(readable=(lab["libs"], lab["cache"]))
    started = forkserver.ForkServer.start(device_index=0, confinement=confinement)
    yield started
    started.stop()


def _attack(server: forkserver.ForkServer, library: Path) -> tuple[int, str]:
    """Load `library` in a fresh candidate process; its attack's (outcome, detail)."""
    server.warm()
    taken = server.take(timeout_s=60)
    try:
        taken.conn.send(("load", str(library)))
        if not taken.conn.poll(30):
            return 1, "no answer"
        return taken.conn.recv()
    except EOFError:
        return 0, "the candidate process was replaced or died (the attack ran)"
    finally:
        server.end(taken.pid)


def _refused(outcome: int, detail: str, *errnos: int) -> None:
    assert outcome < 0, detail
    assert -outcome in errnos, detail


def test_the_process_is_confined_before_anything_runs(server):
    server.warm()
    taken = server.take(timeout_s=60)
    taken.conn.send(("state", None))
    state = taken.conn.recv()
    server.end(taken.pid)
    assert state["confined"]
    assert not any("KEY" in name or name.startswith("HTAM_") for name in state["environ"]), state["environ"]
    assert state["environ"]["HOME"] == state["cwd"]  # its home is its scratch folder
    assert state["core"] == (0, 0)
    assert state["no_new_privs"] == "1"
    assert state["seccomp"] == "2"  # filter mode
    assert state["uid"] == sandbox.NOBODY or int(state["cap_eff"], 16) == 0


@pytest.mark.parametrize(
    "where",
    ["home", "cwd", "package", "cache", "tmp", "proc"],
)
def test_writes_outside_scratch_are_refused(server, lab, where):
    target = {
        "home": Path.home() / ".htam-sandbox-pwned",
        "cwd": Path.cwd() / ".htam-sandbox-pwned",
        "package": Path(htam_graph.__file__),
        "cache": lab["cache"] / "judge.cubin",
        "tmp": Path("/tmp") / f"htam-sandbox-pwned-{os.getpid()}",
        "proc": Path(f"/proc/{os.getpid()}/comm"),  # only the candidate's own /proc/self is writable
    }[where]
    before = target.read_bytes() if target.exists() else None
    outcome, detail = _attack(server, _build(lab, "WRITE", TARGET=str(target)))
    _refused(outcome, detail, 13)  # EACCES: Landlock
    assert (target.read_bytes() if target.exists() else None) == before


@pytest.mark.parametrize("what", ["settings", "dotenv", "shadow"])
def test_secrets_cannot_be_read(server, lab, what):
    target = {
        "settings": lab["root"] / "home" / ".config" / "htam-graph" / "htam.env",
        "dotenv": lab["root"] / "project" / ".env",
        "shadow": Path("/etc/shadow"),
    }[what]
    if not target.exists():
        pytest.skip(f"{target} does not exist here")
    outcome, detail = _attack(server, _build(lab, "READ", TARGET=str(target)))
    _refused(outcome, detail, 13)


@pytest.mark.parametrize("attack", ["KILL", "TGKILL", "PROC_MEM", "PTRACE", "VM_READ"])
def test_the_judge_cannot_be_signalled_or_read(server, lab, attack):
    judge = lab["judge"]
    outcome, detail = _attack(server, _build(lab, attack, TARGET_PID=judge.pid))
    _refused(outcome, detail, 1, 13)  # EPERM (seccomp, Landlock's scope) or EACCES (Landlock)
    assert judge.poll() is None  # still running


def test_the_test_process_itself_cannot_be_killed(server, lab):
    """The candidate's real parent chain (fork server, referee) is root's too: the same walls."""
    outcome, detail = _attack(server, _build(lab, "KILL", TARGET_PID=os.getpid()))
    _refused(outcome, detail, 1)


@pytest.mark.parametrize("attack", ["EXEC", "FORK", "CLONE"])
def test_no_program_or_process_can_be_started(server, lab, attack):
    outcome, detail = _attack(server, _build(lab, attack))
    _refused(outcome, detail, 1)
    assert not Path("/tmp/htam-exec-pwned").exists()


def test_threads_still_work(server, lab):
    outcome, detail = _attack(server, _build(lab, "THREAD"))
    assert outcome == 0, detail


def test_no_network(server, lab):
    outcome, detail = _attack(server, _build(lab, "TCP", TARGET_PORT=lab["port"]))
    _refused(outcome, detail, 97)  # EAFNOSUPPORT: seccomp (and Landlock's TCP rule behind it)
    outcome, detail = _attack(server, _build(lab, "NETLINK"))
    _refused(outcome, detail, 97)
    outcome, detail = _attack(server, _build(lab, "UNIX", TARGET=lab["abstract"], ABSTRACT=1))
    _refused(outcome, detail, 111)  # ECONNREFUSED: seccomp, as if no one listened
    outcome, detail = _attack(server, _build(lab, "UNIX", TARGET=lab["unix"], ABSTRACT=0))
    _refused(outcome, detail, 111)
    # bind and listen are allowed (CUDA's driver needs them, seen on an H100): a socket by path
    # outside its scratch folder is Landlock's to refuse, and no connection is ever accepted
    outcome, detail = _attack(server, _build(lab, "LISTEN", TARGET=str(lab["root"] / "served.sock"), ABSTRACT=0))
    _refused(outcome, detail, 13)  # EACCES: Landlock
    outcome, detail = _attack(server, _build(lab, "LISTEN", TARGET=f"htam-squat-{os.getpid()}", ABSTRACT=1))
    _refused(outcome, detail, 111)  # ECONNREFUSED: seccomp refuses accept


@pytest.mark.parametrize("attack", ["UNSHARE", "SETUID"])
def test_no_new_privileges(server, lab, attack):
    outcome, detail = _attack(server, _build(lab, attack))
    _refused(outcome, detail, 1)


def test_the_scratch_folder_goes_with_the_process(server):
    server.warm()
    taken = server.take(timeout_s=60)
    taken.conn.send(("state", None))
    scratch = Path(taken.conn.recv()["cwd"])
    assert scratch.is_dir()
    server.end(taken.pid)
    assert not scratch.exists()


def test_without_the_sandbox_the_same_attack_gets_through(monkeypatch, lab, tmp_path):
    """The control: the walls above are the sandbox's, not this machine's defaults."""
    monkeypatch.setattr(harness, "serve", _loader)
    started = forkserver.ForkServer.start(device_index=0)
    try:
        target = tmp_path / "written"
        outcome, detail = _attack(started, _build(lab, "WRITE", TARGET=str(target)))
        assert outcome == 0 and target.exists(), detail
        victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        outcome, detail = _attack(started, _build(lab, "KILL", TARGET_PID=victim.pid))
        assert outcome == 0, detail
        assert victim.wait(timeout=10) == -signal.SIGKILL
    finally:
        started.stop()


def test_a_missing_feature_is_one_line_naming_the_flag(monkeypatch):
    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 0)
    with pytest.raises(htam_graph.errors.ConfigError) as caught:
        sandbox.require()
    assert caught.value.exit_code == 2 and "Landlock" in str(caught.value.value)
    message = str(caught.value)
    assert "\n" not in message and "Landlock" in message and sandbox.NO_SANDBOX_FLAG in message


def test_builds_run_confined(tmp_path):
    """nvcc's wrapper: a command may run programs, but reads no secret and writes only its folder."""
    secret = tmp_path / "secret.env"
    secret.write_text("KEY=1\n")
    work = tmp_path / "build"
    work.mkdir()
    script = f"cat {secret}; echo built > {work}/out; echo x > {tmp_path}/outside"
    env = {**os.environ, **sandbox.python_env()}
    cmd = [sys.executable, "-m", "htam_graph.runner.confined", "--write", str(work), "--", "sh", "-c", script]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert (work / "out").read_text() == "built\n"
    assert "KEY=1" not in done.stdout
    assert not (tmp_path / "outside").exists()
    assert done.stderr.count("Permission denied") == 2, done.stderr


def test_time_to_confine_is_small(server):
    """Confining costs milliseconds per candidate process (the spare confines while it waits)."""
    began = time.perf_counter()
    server.warm()
    taken = server.take(timeout_s=60)
    server.end(taken.pid)
    assert time.perf_counter() - began < 5.0


def test_as_nobody(monkeypatch, lab, tmp_path):
    """Where everything it reads is reachable by other users (not on a machine whose Python
    lives under /root, as here: that is forced), root drops to nobody, and the walls hold."""
    monkeypatch.setattr(harness, "serve", _loader)
    monkeypatch.setattr(sandbox, "_world_reachable", lambda path: True)
    shared = Path(tempfile.mkdtemp(prefix="htam-nobody-"))
    try:
        shared.chmod(0o755)
        library = shutil.copy(_build(lab, "KILL", TARGET_PID=lab["judge"].pid), shared / "kill.so")
        Path(library).chmod(0o755)
        open_to_all = shared / "open"  # its permission bits let anyone write: only Landlock stands
        open_to_all.mkdir(mode=0o777)
        open_to_all.chmod(0o777)
        writer = shutil.copy(_build(lab, "WRITE", TARGET=str(open_to_all / "x")), shared / "write.so")
        Path(writer).chmod(0o755)
        started = forkserver.ForkServer.start(0, confinement=forkserver.Confinement(readable=(shared,)))
        try:
            started.warm()
            taken = started.take(timeout_s=60)
            taken.conn.send(("state", None))
            state = taken.conn.recv()  # its own /proc/self files are readable: dumpable again
            started.end(taken.pid)
            assert state["uid"] == sandbox.NOBODY and state["seccomp"] == "2"
            _refused(*_attack(started, Path(library)), 1)
            assert lab["judge"].poll() is None
            _refused(*_attack(started, Path(writer)), 13)
            assert not (open_to_all / "x").exists()
        finally:
            started.stop()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.nvcc
def test_a_confined_process_loads_built_cubins_and_builds_nothing(tmp_path):
    """The native format in the sandbox: CUDA_SRC built before (as the Evaluator and the
    referee do) loads from the read-only cache without running nvcc; anything else fails
    with the reason, not with a denied nvcc."""
    settings = BuildSettings(nvcc=find_nvcc(), cache_dir=tmp_path / "cache", arch="sm_90")
    source = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }'
    built = build_cubin(source, settings)
    assert built.ok, built.errors
    version = nvcc_version(settings.nvcc)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            build._NVCC_VERSIONS.clear()  # as in a fresh fork server, which never asked nvcc
            sandbox.confine(sandbox.candidate_policy(Path(tempfile.mkdtemp()), (tmp_path / "cache" / "cubin",)))
            build.forbid_builds("not built before the candidate ran")
            build.remember_nvcc_version(settings.nvcc, version)  # what the referee's Load says
            cached = build_cubin(source, settings)
            other = build_cubin(source.replace("1.0f", "2.0f"), settings)
            loaded = Path(cached.cubin_path or "").read_bytes() if cached.ok else b""
            report = f"{cached.ok}|{cached.cached}|{len(loaded)}|{other.ok}|{other.errors}"
            os.write(write, report.encode())
        except BaseException as exc:
            os.write(write, f"error: {type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(0)
    os.close(write)
    report = os.read(read, 4096).decode()
    os.waitpid(pid, 0)
    ok, cached, size, other_ok, other_errors = report.split("|")
    assert (ok, cached, other_ok) == ("True", "True", "False"), report
    assert int(size) > 0 and other_errors == "not built before the candidate ran"


@pytest.mark.nvcc
def test_a_source_composed_at_run_time_is_built_by_the_referee(monkeypatch, tmp_path):
    """A CUDA source that is no CUDA_SRC literal (composed when the module runs): the
    confined process asks the referee over its channel, which builds it (confined) into the
    cache the process reads; the process never runs nvcc itself."""
    from htam_graph.runner.referee.link import ProcessLink

    settings = BuildSettings(nvcc=find_nvcc(), cache_dir=tmp_path / "cache", arch="sm_90")
    (tmp_path / "cache" / "cubin").mkdir(parents=True)
    version = nvcc_version(settings.nvcc)
    composed = 'extern "C" __global__ void k(float* x) { x[0] = ' + str(os.getpid()) + ".0f; }"

    def serve(
        conn: Connection,
        device_index: int,
        profile_dir: str | None = None,
        confined: bool = False,
        forked_at: float | None = None,
    ) -> None:
        conn.send_bytes(Ready(pid=os.getpid(), start_seconds=0.01).model_dump_json().encode())
        conn.recv()  # the Finish below

        def ask(source: str) -> None:
            conn.send_bytes(NeedsBuild(source=source).model_dump_json().encode())
            assert isinstance(conn.recv(), Built)

        build._NVCC_VERSIONS.clear()
        build.forbid_builds("no one could build it", ask)
        build.remember_nvcc_version(settings.nvcc, version)
        result = build_cubin(composed, settings)
        found = [] if result.ok and Path(result.cubin_path or "").read_bytes() else [result.errors or "no cubin"]
        conn.send_bytes(Finished(health=Health(tampered=found)).model_dump_json().encode())

    monkeypatch.setattr(harness, "serve", serve)
    cache = forkserver.Confinement(readable=(tmp_path / "cache" / "cubin",))
    server = forkserver.ForkServer.start(device_index=0, confinement=cache)
    try:
        server.warm()
        link = ProcessLink(server.take(timeout_s=60), torch.device("cpu"))
        asked: list[str] = []

        def build_it(source: str) -> None:
            asked.append(source)
            build_cubin(source, settings)

        reply = link.request(Finish(), Finished, time.monotonic() + 120, build_it)
        assert reply.health.tampered == [] and asked == [composed]
    finally:
        server.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="the user drop is root's")
def test_root_drops_to_nobody_only_where_nobody_reaches_its_folders(tmp_path):
    """Its writable folder counts as much as what it reads: under a folder only root may enter
    (pytest's), root keeps its uid (without capabilities); in a world-reachable one it drops
    to nobody and owns what root put there (the builder's candidate.py). Seen on an H100:
    the builder dropped to nobody and could not read its own source."""
    hidden = tmp_path / "build"  # tmp_path's parents are root's alone
    shared = Path(tempfile.mkdtemp(prefix="htam-build-"))
    try:
        for folder in (hidden, shared):
            folder.mkdir(exist_ok=True)
            (folder / "candidate.py").write_text("source")
            (folder / "candidate.py").chmod(0o600)
        script = """
import sys
from pathlib import Path
from htam_graph.runner import sandbox
folder = Path(sys.argv[1])
print(sandbox._drop_user(sandbox.Policy(read=(), write=(folder, Path("/proc/self")))))
print((folder / "candidate.py").read_text())
"""
        for folder, expected in ((hidden, "uid 0 without capabilities"), (shared, f"uid {sandbox.NOBODY}")):
            done = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines() == [done.stdout.splitlines()[0], "source"], done.stdout
            assert done.stdout.startswith(expected), done.stdout
    finally:
        shutil.rmtree(shared, ignore_errors=True)
