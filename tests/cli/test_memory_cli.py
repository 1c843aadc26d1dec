"""`htam memory ...` as a user runs it: a real process, real exit codes, real stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import neo4j_env


def htam(*args: str, cwd: Path, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    base["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "htam_graph", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def local(tmp_path):
    return {"HTAM_LOCAL_PATH": str(tmp_path / "mem.sqlite")}


def test_seed_show_score_on_the_embedded_store(tmp_path, local):
    r = htam("memory", "seed", cwd=tmp_path, env=local)
    assert r.returncode == 0, r.stderr
    assert "9 globals, 50 locals" in r.stdout
    shown = json.loads(htam("memory", "show", "--json", cwd=tmp_path, env=local).stdout)
    assert shown["counts"]["globals"] == 9 and shown["counts"]["locals"] == 50
    r = htam("memory", "score", "--prefix", "memory_access,fusion", "--json", cwd=tmp_path, env=local)
    scores = json.loads(r.stdout)
    assert scores["prefix"] == ["memory_access", "fusion"]
    assert abs(sum(s["probability"] for s in scores["scores"]) - 1) < 1e-9
    table = htam("memory", "score", "--prefix", "memory_access", "--tau", "0.25", cwd=tmp_path, env=local).stdout
    assert "P(g)" in table and "tau=0.25" in table
    # a family without evidence (a fresh memory) scores as the pooled evidence
    r = htam(
        "memory", "score", "--prefix", "memory_access,fusion", "--family", "softmax", "--json", cwd=tmp_path, env=local
    )
    assert r.returncode == 0, r.stderr
    by_family = json.loads(r.stdout)
    assert by_family["family"] == "softmax" and by_family["scores"] == scores["scores"]
    r = htam("memory", "score", "--family", "softmax", "--shape-class", "large", "--json", cwd=tmp_path, env=local)
    assert r.returncode == 0, r.stderr
    by_shape = json.loads(r.stdout)
    assert by_shape["shape_class"] == "large" and by_shape["scores"] == by_family_empty_prefix(tmp_path, local)
    r = htam("memory", "score", "--shape-class", "large", cwd=tmp_path, env=local)
    assert r.returncode != 0 and "give --family too" in r.stderr


def by_family_empty_prefix(tmp_path, local) -> list:
    """The pooled scores after an empty prefix (what a fresh memory gives any family and shape)."""
    return json.loads(htam("memory", "score", "--json", cwd=tmp_path, env=local).stdout)["scores"]


def test_the_settings_file_and_flags_configure_the_store_and_a_local_dotenv_does_not(tmp_path):
    """~/.config/htam-graph/htam.env applies wherever htam runs; a .env in the folder
    htam runs in is never read (it could send the password to someone else's server)."""
    config = tmp_path / "config"
    (config / "htam-graph").mkdir(parents=True)
    (config / "htam-graph" / "htam.env").write_text(f"HTAM_LOCAL_PATH={tmp_path / 'from-settings.sqlite'}\n")
    (tmp_path / ".env").write_text(f"HTAM_LOCAL_PATH={tmp_path / 'from-dotenv.sqlite'}\nHTAM_NEO4J_URI=bolt://evil:1\n")
    env = {"XDG_CONFIG_HOME": str(config)}
    assert htam("memory", "seed", cwd=tmp_path, env=env).returncode == 0
    assert (tmp_path / "from-settings.sqlite").exists() and not (tmp_path / "from-dotenv.sqlite").exists()
    flag_path = tmp_path / "from-flag.sqlite"
    assert htam("--local-path", str(flag_path), "memory", "seed", cwd=tmp_path, env=env).returncode == 0
    assert flag_path.exists()
    shown = json.loads(htam("config", "--json", cwd=tmp_path, env=env).stdout)
    by_name = {s["name"]: s for s in shown["settings"]}
    assert by_name["HTAM_LOCAL_PATH"]["source"].startswith("file ") and by_name["HTAM_NEO4J_URI"]["value"] is None


def test_config_shows_sources_and_never_a_password(tmp_path):
    env = {"HTAM_NEO4J_PASSWORD": "s3cret-pw", "HTAM_STORE": "local"}
    r = htam("--neo4j-user", "bob", "config", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "s3cret-pw" not in r.stdout and "(hidden)" in r.stdout
    assert "flag --neo4j-user" in r.stdout and "environment" in r.stdout and "settings file: none" in r.stdout


def test_store_and_export_files_are_private(tmp_path, local):
    assert htam("memory", "seed", cwd=tmp_path, env=local).returncode == 0
    out = tmp_path / "mem.jsonl"
    assert htam("memory", "export", "-o", str(out), cwd=tmp_path, env=local).returncode == 0
    for path in (Path(local["HTAM_LOCAL_PATH"]), out, *Path(local["HTAM_LOCAL_PATH"]).parent.glob("mem.sqlite-*")):
        assert path.stat().st_mode & 0o777 == 0o600, path


def test_export_into_a_closed_pipe_is_quiet(tmp_path, local):
    htam("memory", "seed", cwd=tmp_path, env=local)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    r = subprocess.run(
        f"{sys.executable} -m htam_graph memory export | head -c 10",
        shell=True,
        cwd=tmp_path,
        env={**env, **local},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.stdout == '{"format":' and r.stderr == ""


def test_unknown_prefix_global_is_a_one_line_error(tmp_path, local):
    htam("memory", "seed", cwd=tmp_path, env=local)
    r = htam("memory", "score", "--prefix", "memory_access,warp_magic", cwd=tmp_path, env=local)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "unknown global 'warp_magic'" in r.stderr


def test_malformed_seed_file_names_the_field_and_writes_nothing(tmp_path, local):
    bank = tmp_path / "bank.yaml"
    bank.write_text(
        "version: 1\nname: x\nglobals:\n  - id: fusion\n    name: Fusion\n    intent: i\n"
        "    goals: []\n    triggers: []\n    risks: []\nlocals:\n  - id: fusion.a\n"
        "    global: fusion\n    name: A\n    checks: []\n    pitfalls: []\n"
    )
    r = htam("memory", "seed", "--bank", str(bank), cwd=tmp_path, env=local)
    assert r.returncode == 2
    assert "locals[0].pattern" in r.stderr and r.stderr.strip().count("\n") == 0
    assert not Path(local["HTAM_LOCAL_PATH"]).exists()  # the store was never opened


def test_export_import_round_trip_and_guards(tmp_path, local):
    htam("memory", "seed", cwd=tmp_path, env=local)
    out = tmp_path / "mem.json"
    assert htam("memory", "export", "-o", str(out), cwd=tmp_path, env=local).returncode == 0
    other = {"HTAM_LOCAL_PATH": str(tmp_path / "other.sqlite")}
    assert htam("memory", "import", str(out), cwd=tmp_path, env=other).returncode == 0
    assert htam("memory", "export", cwd=tmp_path, env=other).stdout.strip() == out.read_text().strip()
    again = htam("memory", "import", str(out), cwd=tmp_path, env=other)
    assert again.returncode == 2 and "not empty" in again.stderr
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"format": "htam-graph/memory", "version": 2, "globals": [{"id": "Bad Id"}]}))
    r = htam("memory", "import", str(broken), cwd=tmp_path, env={"HTAM_LOCAL_PATH": str(tmp_path / "x.sqlite")})
    assert r.returncode == 2 and "globals[0]: globals field id" in r.stderr


def test_reset_asks_first(tmp_path, local):
    htam("memory", "seed", cwd=tmp_path, env=local)
    r = htam("memory", "reset", cwd=tmp_path, env=local, stdin="n\n")
    assert r.returncode == 1
    assert json.loads(htam("memory", "show", "--json", cwd=tmp_path, env=local).stdout)["counts"]["globals"] == 9
    assert htam("memory", "reset", "--yes", cwd=tmp_path, env=local).returncode == 0
    r = htam("memory", "show", cwd=tmp_path, env=local)
    assert r.returncode == 2 and "htam memory seed" in r.stderr


@pytest.mark.neo4j
@pytest.mark.parametrize(
    "env, message, code",
    [
        ({"HTAM_NEO4J_PASSWORD": "wrong-password"}, "rejected the password of user 'neo4j'", 2),
        ({"HTAM_NEO4J_URI": "bolt://127.0.0.1:1"}, "cannot reach Neo4j at bolt://127.0.0.1:1", 3),  # StoreError
        ({"HTAM_NEO4J_DATABASE": "nosuchdb"}, "no database 'nosuchdb'", 2),
    ],
)
def test_neo4j_misconfiguration_is_a_clear_error(tmp_path, neo4j_store, env, message, code):
    r = htam("memory", "seed", cwd=tmp_path, env={**neo4j_env(), **env})
    assert r.returncode == code, r.stderr
    assert message in r.stderr and r.stderr.strip().count("\n") == 0
    assert neo4j_store.counts()["globals"] == 0  # nothing written


@pytest.mark.neo4j
def test_an_empty_neo4j_memory_says_so_in_one_line(tmp_path, neo4j_store):
    """A fresh database: no driver notifications on stderr, and the command that helps."""
    for command in (("memory", "score", "--prefix", "fusion"), ("memory", "show"), ("memory", "show", "--locals", "x")):
        r = htam(*command, cwd=tmp_path, env=neo4j_env())
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
        assert "is empty" in r.stderr and "htam memory seed" in r.stderr


@pytest.mark.parametrize(
    "uri, message",
    [
        ("http://127.0.0.1:7474", "is not a Neo4j Bolt URI: use bolt://HOST:PORT"),
        ("ftp://example", "is not a Neo4j Bolt URI"),
        ("bolt://neo4j:hunter2-secret@127.0.0.1:7687", "holds a user or password"),
    ],
)
def test_a_bad_neo4j_uri_is_one_line_and_never_echoes_a_password(tmp_path, uri, message):
    r = htam("memory", "show", cwd=tmp_path, env={"HTAM_NEO4J_URI": uri})
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert message in r.stderr and "hunter2" not in r.stderr


@pytest.mark.neo4j
def test_seed_and_score_against_neo4j(tmp_path, neo4j_store):
    env = neo4j_env()
    assert htam("memory", "seed", cwd=tmp_path, env=env).returncode == 0
    r = htam("memory", "score", "--prefix", "fusion,memory_access", "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["scores"]) == neo4j_store.counts()["globals"] == 9
