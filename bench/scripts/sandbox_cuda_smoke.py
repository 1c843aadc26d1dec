"""Does CUDA work inside the sandbox, and does CUDA IPC cross it? Seconds, on a GPU machine.

For the candidate's policy as the fork server applies it, and for variants with one wall
removed (so a failure names the wall that breaks CUDA): fork, confine, bring CUDA up, run a
kernel, export the result by CUDA IPC; the parent (unconfined, as the referee) maps it and
checks the values. One line per variant. Exit code 1 if the full policy fails.

    PYTHONPATH=. python3 bench/scripts/sandbox_cuda_smoke.py
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


def _variant(name: str) -> None:
    """Weaken the sandbox in this (child) process only, to find which wall breaks CUDA."""
    if name == "without socket rules":
        sandbox._CONNECTING = ()
    elif name == "without seccomp":
        sandbox._seccomp = lambda policy: None
    elif name == "without Landlock":
        sandbox._landlock_ruleset = lambda policy, abi: -1
        sandbox._landlock_restrict = lambda ruleset: None
    elif name == "without rlimits":
        sandbox._limits = lambda policy: None
    elif name == "without the user drop":
        sandbox._drop_user = lambda policy: "unchanged user"
    elif name == "without the environment scrub":
        real = sandbox.candidate_policy
        sandbox.candidate_policy = lambda *a: dataclasses.replace(real(*a), environment=dict(os.environ))
    elif name == "without any wall":
        sandbox.confine = lambda policy: "no walls"


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
    if not full:  # which wall breaks it
        for name in (
            "without any wall", "without rlimits", "without the user drop", "without the environment scrub",
            "without socket rules", "without seccomp", "without Landlock",
        ):  # fmt: skip
            subprocess.run([*script, name], check=False)
    return 0 if full else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
