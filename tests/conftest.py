"""Shared fixtures. Integration tests use a real Neo4j (started by .ci/run or
`htam db start`); under CI an unreachable server fails the tests instead of skipping."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from htam_graph.config import Settings
from htam_graph.errors import UserError

# --- store fixtures ---

# The server of `htam db start` / docker/neo4j-ci.sh, reached as users reach it.
NEO4J_URI = os.environ.get("HTAM_NEO4J_URI", "bolt://127.0.0.1:7687")
NEO4J_PASSWORD = os.environ.get("HTAM_NEO4J_PASSWORD", "htam-graph")


def neo4j_settings(**overrides: object) -> Settings:
    return Settings(store="neo4j", neo4j_uri=NEO4J_URI, neo4j_password=NEO4J_PASSWORD, **overrides)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Neo4j must be running in CI (bash docker/neo4j-ci.sh start): {reason}")
    pytest.skip(f"no usable Neo4j at {NEO4J_URI}: {reason} (start one with `htam db start`)")


@pytest.fixture(scope="session")
def _neo4j_session_store():
    from htam_graph.memory.neo4j_store import Neo4jStore

    try:
        store = Neo4jStore(neo4j_settings())
    except UserError as e:
        _unavailable(str(e))
    yield store
    store.close()


@pytest.fixture
def neo4j_store(_neo4j_session_store):
    """The real Neo4j, emptied before each test."""
    _neo4j_session_store.reset()
    _neo4j_session_store.init_schema()
    return _neo4j_session_store


@pytest.fixture
def local_store(tmp_path: Path):
    from htam_graph.memory.sqlite_store import SQLiteStore

    with SQLiteStore(tmp_path / "memory.sqlite") as store:
        yield store


@pytest.fixture(params=["local", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def store(request):
    """Each backend in turn: one conformance suite runs against both."""
    return request.getfixturevalue(f"{request.param}_store")


@pytest.fixture(scope="session")
def neo4j_driver(_neo4j_session_store):
    """A connected driver for the running server."""
    return _neo4j_session_store.driver
