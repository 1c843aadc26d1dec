"""Issue 35, done when: a newcomer walks the README's commands in a fresh clone, on a CPU
without an API key, in the README's order, and each succeeds or fails in the one way the
README says (a one-line error naming what is missing: a GPU, a key, a KernelBench
checkout).

The commands are read from the README itself (its fenced ```bash blocks, in order, a
command continued over lines with `\\` joined, comments dropped), so the walk follows the
README as it changes. Each command runs as typed through bash in a fresh clone of this
checkout's HEAD (`git clone --shared`: the committed README and code), with a HOME of its
own, except where a rule below says otherwise:

- `uv` and `pip install uv` reuse the test's venv instead of installing 5 GB: `uv run X`
  runs X (`htam` is this clone's, on PATH), `pip install uv` does nothing;
- affordable sizes where the README leaves them to the user: `--seeds N` runs 1 seed,
  `--steps N` 2 steps, a bench or memory-value run without --steps gets `--steps 2`, and
  bench/bench_memory_value.py without --methods runs htam and feedback (the walk checks that
  the command works, not the comparison);
- from the first command that sets Neo4j up (names HTAM_NEO4J, the settings file or `htam
  db`), the walk runs against the test session's server (marker neo4j), emptied: the
  settings file is written as the README says, the session's address and password come in
  through the environment (which the settings file yields to), so `htam db start` finds it
  running; the commands before it use the embedded memory, as a newcomer's do;
- `RUN_ID` is the id of a run the walk made (`htam stats runs --format json`), `my_relu.py`
  the README's own candidate for level1/19_ReLU, copied (a newcomer writes theirs);
- `bash .ci/run` is this test's CI (it would start the suite again) and `export
  ANTHROPIC_API_KEY=...` a key this walk does not have: both are left out.

A command the rules do not name must succeed: a new README command is walked too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import neo4j_env

pytestmark = [pytest.mark.neo4j, pytest.mark.nvcc, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
LEFT_OUT = {
    r"^bash \.ci/run$": "CI itself: this test runs inside it",
    r"^export \w*API_KEY=\.\.\.$": "an API key this walk does not have",
}
# The README's commands that fail on a CPU without a key: a pattern of the command, and
# what its one-line error must say.
FAILS = {
    r"^htam eval \S+ \S+\.py(?!.*--no-run)": "no CUDA GPU is visible",  # "needs an NVIDIA GPU"
    r"^htam catalog record ": "no CUDA GPU is visible",  # "on a GPU"
    r"^htam optimize [^~]*$(?<!stand-in)": "no API key",  # Claude, DeepSeek, vLLM: a key
    r"^htam optimize ~/KernelBench": "no such task file",  # a checkout the newcomer lacks
    r"^htam bench (builtin|~/KernelBench)(?!.*--llm catalog)": "needs a GPU",  # an LLM bench on GPUs
    r"^htam bench --report-only --out bench-claude": "holds no bench",  # that bench ran elsewhere
}
# The stats that filter on evidence may have none to show after the walk's one run (which
# directions it tried is the run's draw): then the one-line error says so, and what to do.
MAY_BE_EMPTY = {r"^htam stats (transitions|globals|locals)": "nothing to show"}


def readme_commands(readme: str) -> list[str]:
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", readme, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.sub(r"\s+#\s.*$", "", line).strip()  # a trailing comment (none sits in quotes)
            if command:
                commands.append(re.sub(r"\s+", " ", command))
    return commands


def affordable(command: str) -> str:
    command = re.sub(r"--seeds \d+", "--seeds 1", command)
    command = re.sub(r"--steps \d+", "--steps 2", command)
    if re.search(r"(htam bench|bench_memory_value\.py) ", command) and "--steps" not in command:
        command = command.replace(" --out ", " --steps 2 --out ")
    if "bench_memory_value.py " in command and "--methods" not in command:  # 2 of its 7 methods
        command = command.replace(" --out ", " --methods htam,feedback --out ")
    return command


SHIMS = {
    "uv": '#!/bin/sh\n[ "$1" = run ] || { echo "uv shim: only uv run" >&2; exit 2; }\nshift\nexec "$@"\n',
    "pip": '#!/bin/sh\n[ "$*" = "install uv" ] || { echo "pip shim: only pip install uv" >&2; exit 2; }\n',
    "htam": '#!/bin/sh\nexec "{python}" -m htam_graph "$@"\n',
    "python": '#!/bin/sh\nexec "{python}" "$@"\n',
}


def test_the_readme_walks_on_a_cpu_without_a_key(tmp_path, _neo4j_session_store):
    clone = tmp_path / "htam-graph"
    subprocess.run(["git", "clone", "-q", "--shared", str(REPO), str(clone)], check=True, timeout=120)
    home, bin_ = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_.mkdir()
    for name, text in SHIMS.items():
        (bin_ / name).write_text(text.replace("{python}", sys.executable))
        (bin_ / name).chmod(0o755)
    shutil.copy(clone / "bench/candidates/level1/19_ReLU.py", clone / "my_relu.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HTAM_", "ANTHROPIC_", "OPENAI_", "XDG_"))}
    env |= {"HOME": str(home), "PATH": f"{bin_}{os.pathsep}{env['PATH']}", "PYTHONPATH": str(clone)}
    env.pop("COLUMNS", None)

    commands = readme_commands((clone / "README.md").read_text())
    assert any("htam demo" in c for c in commands[:2]), "the README starts with the demo"
    walked, failures, in_neo4j = [], [], False
    for typed in commands:
        if any(re.search(p, typed) for p in LEFT_OUT):
            continue
        command = affordable(typed)
        if not in_neo4j and re.search(r"HTAM_NEO4J|htam\.env|^htam db ", typed):  # from here on, Neo4j
            env |= neo4j_env()
            _neo4j_session_store.reset()
            in_neo4j = True
        if "RUN_ID" in command:
            runs = subprocess.run(
                ["htam", "stats", "runs", "--format", "json"], env=env, cwd=clone, capture_output=True, text=True
            )
            command = command.replace("RUN_ID", json.loads(runs.stdout)[0]["run_id"])
        r = subprocess.run(["bash", "-c", command], env=env, cwd=clone, capture_output=True, text=True, timeout=600)
        expected = [said for pattern, said in FAILS.items() if re.search(pattern, typed)]
        if r.returncode != 0:
            expected += [said for pattern, said in MAY_BE_EMPTY.items() if re.search(pattern, typed)]
        where = f"README command {typed!r} (run as {command!r}): exit {r.returncode}"
        if expected:
            one_line = r.returncode == 2 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1
            if not (one_line and expected[0] in r.stderr):
                failures.append(f"{where}, wanted exit 2 and one line saying {expected[0]!r}\n{r.stderr[-2000:]}")
        elif r.returncode != 0:
            failures.append(f"{where}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        walked.append(typed)
    assert not failures, "\n\n".join(failures)
    assert any("htam demo" in c for c in walked)
