"""Does CUDA work inside the sandbox, and does CUDA IPC cross it? Seconds, on a GPU machine.

For the candidate's policy as the fork server applies it, and for variants with one wall
removed (so a failure names the wall that breaks CUDA): fork, confine, bring CUDA up, run a
kernel, export the result by CUDA IPC; the parent (unconfined, as the referee) maps it and
checks the values. One line per variant. Exit code 1 if the full policy fails. If it fails
(or with --all), also every wall alone, every wall left out, every pair of walls left out and
Landlock with extra writable paths: the walls that break CUDA are the ones whose absence
makes it work.

    PYTHONPATH=. python3 bench/scripts/sandbox_cuda_smoke.py [--all]
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import torch  # imported before the fork, as the fork server has it (CUDA is not up)

from htam_graph.runner import ipc, sandbox
from htam_graph.runner.ipc import RemoteMemory
from htam_graph.runner.protocol import RemoteTensor

# Subsets of sandbox._CONNECTING to allow, one variant each ("socket rules allowing bind+listen").
SOCKET_CALLS = (
    "connect",
    "bind",
    "listen",
    "accept+accept4",
    "bind+listen",
    "connect+bind+listen",
    "bind+listen+accept+accept4",
)
WALLS = ("rlimits", "user drop", "environment scrub", "socket rules", "seccomp", "Landlock", "no_new_privs")


class _NoNewPrivsOff:
    """The libc proxy of a variant without no_new_privs: prctl(PR_SET_NO_NEW_PRIVS) does nothing."""

    def __init__(self, libc: object) -> None:
        self._libc = libc

    def prctl(self, option: int, *args: int) -> int:
        return 0 if option == sandbox._PR_SET_NO_NEW_PRIVS else self._libc.prctl(option, *args)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._libc, name)


def _variant(name: str) -> None:
    """Weaken the sandbox in this (child) process only, to find which walls break CUDA. A name
    is "full policy", "without any wall", "only W", "without W" or "without W + V" (W, V in
    WALLS), or "Landlock only, writable P" (P: a comma-separated list of extra writable paths)."""
    if name == "full policy":
        return
    if name == "without any wall":
        sandbox.confine = lambda policy: "no walls"
        return
    if name.startswith("socket rules allowing "):  # the full policy, less some of the refused socket calls
        allowed = set(name.removeprefix("socket rules allowing ").split("+"))
        sandbox._CONNECTING = tuple(c for c in sandbox._CONNECTING if c not in allowed)  # type: ignore[assignment]
        return
    if name.startswith("Landlock only, writable "):
        off = set(WALLS) - {"Landlock"}
        extra = tuple(Path(p) for p in name.removeprefix("Landlock only, writable ").split(","))
        real = sandbox.candidate_policy
        sandbox.candidate_policy = lambda *a: dataclasses.replace(real(*a), write=(*real(*a).write, *extra))
    elif name.startswith("only "):
        off = set(WALLS) - {name.removeprefix("only ")}
    else:
        off = set(name.removeprefix("without ").split(" + "))
    unknown = off - set(WALLS)
    if unknown:
        raise SystemExit(f"unknown wall(s) {sorted(unknown)}; walls: {', '.join(WALLS)}")
    if "rlimits" in off:
        sandbox._limits = lambda policy: None
    if "user drop" in off:
        sandbox._drop_user = lambda policy: "unchanged user"
    if "environment scrub" in off:
        real_policy = sandbox.candidate_policy
        sandbox.candidate_policy = lambda *a: dataclasses.replace(real_policy(*a), environment=dict(os.environ))
    if "socket rules" in off:
        sandbox._CONNECTING = ()  # type: ignore[assignment]
    if "seccomp" in off:
        sandbox._seccomp = lambda policy: None
    if "Landlock" in off:
        sandbox._landlock_ruleset = lambda policy, abi: -1
        sandbox._landlock_restrict = lambda ruleset: None
    if "no_new_privs" in off:
        sandbox._libc = _NoNewPrivsOff(sandbox._libc)  # type: ignore[assignment]


def child(name: str, write: int, read: int) -> None:
    try:
        _variant(name)
        walls = sandbox.confine(sandbox.candidate_policy(Path(tempfile.mkdtemp()), ()))
        torch.cuda.set_device(0)
        x = torch.arange(1024, dtype=torch.float32, device="cuda").mul_(2)
        torch.cuda.synchronize()
        remote = ipc.export(x)
        os.write(write, json.dumps({"walls": walls, "remote": remote.model_dump()}).encode())
        os.read(read, 1)  # the parent mapped and read it
    except BaseException as exc:
        detail = "".join(traceback.format_exception_only(exc)).strip().splitlines()[-1]
        os.write(
            write, json.dumps({"error": f"{detail} ({traceback.extract_tb(exc.__traceback__)[-1].name})"}).encode()
        )
    finally:
        os._exit(0)


def run(name: str) -> bool:
    up_r, up_w = os.pipe()
    down_r, down_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(up_r)
        os.close(down_w)
        child(name, up_w, down_r)
    os.close(up_w)
    os.close(down_r)
    message = json.loads(os.read(up_r, 1 << 20) or b'{"error": "the child died"}')
    ok = False
    if "error" in message:
        print(f"{name}: FAILED in the confined process: {message['error']}", flush=True)
    else:
        try:
            memory = RemoteMemory(torch.device("cuda", 0))
            seen = memory.tensor(RemoteTensor.model_validate(message["remote"]))
            ok = bool(torch.equal(seen, torch.arange(1024, dtype=torch.float32, device="cuda").mul_(2)))
            memory.close()
            print(f"{name}: {'ok' if ok else 'WRONG VALUES'} ({message['walls']}; IPC mapped by the parent)")
        except Exception as exc:
            print(f"{name}: FAILED mapping its memory by IPC: {type(exc).__name__}: {exc}", flush=True)
    os.write(down_w, b"x")
    os.waitpid(pid, 0)
    return ok


def main(argv: list[str]) -> int:
    if argv[:1] == ["--variant"]:  # one variant, in a process whose CUDA is not up yet
        return 0 if run(argv[1]) else 1
    print(f"Landlock ABI {sandbox.landlock_abi()}; missing: {sandbox.missing()}; uid {os.getuid()}", flush=True)
    script = [sys.executable, __file__, "--variant"]
    full = subprocess.run([*script, "full policy"], check=False).returncode == 0
    sockets = [f"socket rules allowing {calls}" for calls in SOCKET_CALLS]
    if "--sockets" in argv:  # which refused socket call breaks it
        for name in sockets:
            subprocess.run([*script, name], check=False, timeout=120)
    elif not full or "--all" in argv:  # which walls break it: each alone, each left out, each pair left out
        names = [*sockets, "without any wall", *(f"only {w}" for w in WALLS), *(f"without {w}" for w in WALLS)]
        names += [f"without {a} + {b}" for i, a in enumerate(WALLS) for b in WALLS[i + 1 :]]
        names += [f"Landlock only, writable {p}" for p in ("/dev", "/dev/shm,/tmp,/run", "/proc,/sys")]
        for name in names:
            subprocess.run([*script, name], check=False, timeout=120)
    return 0 if full else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
