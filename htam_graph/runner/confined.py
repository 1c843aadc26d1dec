"""Run one command inside the sandbox: `python -m htam_graph.runner.confined --write DIR -- CMD...`.

The builder's wrapper (runner/build.py, runner/builder.py): the command may start other
programs (nvcc runs cicc, ptxas and the host compiler), but it reads only the system and
the toolchain, writes only the named folders, opens no TCP connection, signals and traces
nothing outside its own domain, and runs with a scrubbed environment. The sandbox goes up
here, then this process becomes the command (exec), so nothing runs unconfined in between.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from htam_graph.runner import sandbox

# The toolchain's variables; nothing else of the caller's environment reaches the command.
_KEPT = {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LANG", "CC", "CXX", "MAX_JOBS"}
_KEPT_PREFIXES = ("CUDA_", "NVIDIA_", "LC_", "TORCH_CUDA_ARCH", "TORCH_EXTENSIONS", "HTAM_BUILDER_")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m htam_graph.runner.confined")
    parser.add_argument("--write", action="append", type=Path, required=True, help="a folder it may write")
    parser.add_argument("--read", action="append", type=Path, default=[], help="a folder it may read")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    environment = {k: v for k, v in os.environ.items() if k in _KEPT or k.startswith(_KEPT_PREFIXES)}
    first, *others = args.write
    policy = sandbox.builder_policy(first, tuple(args.read), environment)
    policy = dataclasses.replace(policy, write=(*policy.write, *others))
    try:
        sandbox.confine(policy)
    except sandbox.SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
