"""An import cut short by kill -9 (of the importing process, or of the Neo4j server) leaves
a memory that is either complete or refused by every command, which names the one command
that discards it; after that command an import goes through. Real processes, real servers:
the client is `htam memory import` paused at a point (tests/memory/paused_cli.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from htam_graph import neo4j_server
from htam_graph.config import Settings
from htam_graph.memory import open_store
from htam_graph.memory.store import UnfinishedOperation
from tests.cli.test_memory_cli import htam
from tests.conftest import free_port, neo4j_env, neo4j_settings
from tests.memory.test_store_conformance import G, make_step, seeded

REPO = Path(__file__).resolve().parents[2]
BATCH = 4  # rows per import transaction: the small memory below takes many of them
REFUSED = "run `htam memory reset` to discard it"


def small_memory(store) -> None:
    """Two runs of 7 steps: with BATCH rows per transaction, a dozen import transactions."""
    seeded(store, "run-1")
    seeded(store, "run-2")
    for run in ("run-1", "run-2"):
        for i in range(7):
            prefix = [G[(i + j) % 5] for j in range(min(i, 3))]
            store.record_step(make_step(i, prefix, G[(i * 3) % 7], [0.5, -1.0, 0.0][i % 3], run=run))


@pytest.fixture
def exported(tmp_path, local_store) -> Path:
    small_memory(local_store)
    path = tmp_path / "memory.jsonl"
    r = htam("memory", "export", "-o", str(path), cwd=tmp_path, env={"HTAM_LOCAL_PATH": str(local_store.path)})
    assert r.returncode == 0, r.stderr
    return path


def paused(point: str, *args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """`htam ARGS` paused at POINT (it printed PAUSED and waits for a line on stdin)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.memory.paused_cli", point, *args],
        cwd=cwd,
        env={**base, "PYTHONPATH": str(REPO), "HTAM_TEST_BATCH": str(BATCH), "HTAM_TEST_RETRY_S": "2", **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if line.strip() != "PAUSED":
        process.kill()
        pytest.fail(f"the client did not reach {point}: {line}{process.communicate()[1]}")
    return process


def kill9(process: subprocess.Popen[str]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def resume(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = process.communicate("\n", timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def one_line_error(r: subprocess.CompletedProcess[str], *fragments: str, code: int = 2) -> None:
    """One `error: ...` line; exit 2 (StoreStateError: an unfinished import), 3 (StoreError: the server went away)."""
    assert r.returncode == code, (r.stdout, r.stderr)
    assert r.stderr.startswith("error: ") and r.stderr.strip().count("\n") == 0, r.stderr
    for fragment in fragments:
        assert fragment in r.stderr, r.stderr


def every_command_refuses(env: dict[str, str], cwd: Path, exported: Path, everything: bool) -> None:
    """`everything`: each command a user might run; else one read and one write."""
    commands = [("memory", "show"), ("memory", "seed")]
    if everything:
        commands += [
            ("memory", "score", "--prefix", G[0]),
            ("memory", "export"),
            ("memory", "show", "--locals", G[0]),
            ("memory", "import", str(exported)),
        ]
    for command in commands:
        one_line_error(htam(*command, cwd=cwd, env=env), "unfinished import", REFUSED)


def recover_and_import(env: dict[str, str], cwd: Path, exported: Path) -> None:
    r = htam("memory", "reset", "--yes", cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    r = htam("memory", "import", str(exported), cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    assert htam("memory", "export", cwd=cwd, env=env).stdout == exported.read_text()


def total_records(exported: Path) -> int:
    return sum(json.loads(exported.read_text().splitlines()[-1])["end"].values())


@pytest.mark.neo4j
@pytest.mark.parametrize("point", ["import:0", "import:half", "finish"])
def test_killing_the_client_mid_import_leaves_a_refused_memory(neo4j_store, exported, tmp_path, point):
    env = neo4j_env()
    point = point.replace("half", str(total_records(exported) // 2))
    client = paused(point, "memory", "import", str(exported), env=env, cwd=tmp_path)
    kill9(client)
    if point != "import:0":
        assert neo4j_store.counts()["globals"] > 0  # some transactions committed
    with pytest.raises(UnfinishedOperation, match="unfinished import"):
        open_store(neo4j_settings())
    every_command_refuses(env, tmp_path, exported, everything=point.startswith("import:") and point != "import:0")
    recover_and_import(env, tmp_path, exported)


@pytest.mark.parametrize("point", ["import:0", "import:half", "import:all"])
def test_killing_the_client_mid_import_leaves_the_sqlite_memory_empty(exported, tmp_path, point):
    env = {"HTAM_LOCAL_PATH": str(tmp_path / "target.sqlite")}
    n = total_records(exported)
    point = point.replace("half", str(n // 2)).replace("all", str(n))
    kill9(paused(point, "memory", "import", str(exported), env=env, cwd=tmp_path))
    one_line_error(htam("memory", "show", cwd=tmp_path, env=env), "is empty", "htam memory seed")
    r = htam("memory", "import", str(exported), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert htam("memory", "export", cwd=tmp_path, env=env).stdout == exported.read_text()


@pytest.mark.parametrize("kind", ["local", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def test_two_imports_into_one_empty_store_one_wins(request, exported, tmp_path, kind):
    """The emptiness check runs inside the import's write transaction (SQLite) or under the
    memory's lock that marks the import (Neo4j): the second import is refused, never merged."""
    if kind == "neo4j":
        request.getfixturevalue("neo4j_store")
        env = neo4j_env()
        refusal = "unfinished import"
    else:
        env = {"HTAM_LOCAL_PATH": str(tmp_path / "target.sqlite")}
        refusal = "not empty"
    first = paused("import:1", "memory", "import", str(exported), env=env, cwd=tmp_path)
    second = subprocess.Popen(
        [sys.executable, "-m", "htam_graph", "memory", "import", str(exported)],
        cwd=tmp_path,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if kind == "neo4j":  # refused at once; SQLite's waits for the first's transaction
        late = second.communicate(timeout=120)
    assert resume(first).returncode == 0
    if kind == "local":
        late = second.communicate(timeout=120)
    one_line_error(subprocess.CompletedProcess(second.args, second.returncode, *late), refusal)
    assert htam("memory", "export", cwd=tmp_path, env=env).stdout == exported.read_text()


@pytest.fixture
def disposable_server(tmp_path):
    """A Neo4j of this test alone (never the session's, never a user's), to kill -9."""
    settings = Settings(neo4j_uri=f"bolt://127.0.0.1:{free_port()}", neo4j_password="disposable-pw")
    home, http_port = tmp_path / "neo4j-home", free_port()
    info = neo4j_server.start(settings, wait_s=240, http_port=http_port, home=home)

    def restart() -> None:
        neo4j_server.start(settings, wait_s=240, http_port=http_port, home=home)

    yield settings, info, restart
    neo4j_server.stop(settings, home=home)


@pytest.mark.neo4j
def test_killing_the_server_mid_import_and_mid_export(disposable_server, exported, tmp_path):
    settings, info, restart = disposable_server
    env = {"HTAM_NEO4J_URI": settings.neo4j_uri or "", "HTAM_NEO4J_PASSWORD": "disposable-pw"}
    client = paused(f"import:{total_records(exported) // 2}", "memory", "import", str(exported), env=env, cwd=tmp_path)
    assert info.pid is not None
    os.kill(info.pid, signal.SIGKILL)
    one_line_error(resume(client), "lost the connection to Neo4j", REFUSED, code=3)

    restart()
    every_command_refuses(env, tmp_path, exported, everything=False)
    recover_and_import(env, tmp_path, exported)

    out = tmp_path / "again.jsonl"
    client = paused("export:20", "memory", "export", "-o", str(out), env=env, cwd=tmp_path)
    pid = int((tmp_path / "neo4j-home" / "launcher.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    one_line_error(resume(client), "lost the connection to Neo4j", "while reading the memory", code=3)
    assert not out.exists() and not list(tmp_path.glob(".again.jsonl.*"))  # no half-written export
