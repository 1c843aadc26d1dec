"""htam_graph.db against the real Neo4j server (docker/neo4j-ci.sh or `htam db start`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j.exceptions import AuthError

from htam_graph import db
from htam_graph.config import Settings
from htam_graph.errors import UserError


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def squatted_port() -> Iterator[int]:
    """A port some other process listens on."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        yield squatter.getsockname()[1]


@pytest.mark.neo4j
def test_status_reports_the_running_5_26_server(neo4j_driver) -> None:
    current = db.status(Settings())
    assert current.reachable
    assert current.version is not None and current.version.startswith("5.26.")
    assert current.edition == "community"


@pytest.mark.neo4j
def test_start_finds_the_running_server(neo4j_driver) -> None:
    info = db.start(Settings())
    assert info.via == "existing"
    assert info.uri == db.neo4j_uri(Settings())


@pytest.mark.neo4j
def test_wrong_password_is_a_user_error_naming_the_password(neo4j_driver) -> None:
    # One attempt only: Neo4j locks the user for a while after three failed logins.
    with pytest.raises(UserError, match="rejected the password.*HTAM_NEO4J_PASSWORD") as caught:
        db.status(Settings(neo4j_password="not-the-password"))
    assert isinstance(caught.value.__cause__, AuthError)


def test_unreachable_port_is_a_user_error_naming_the_uri() -> None:
    uri = f"bolt://127.0.0.1:{_free_port()}"
    with pytest.raises(UserError, match=f"cannot reach Neo4j at {uri}"):
        db.connect(Settings(neo4j_uri=uri))
    current = db.status(Settings(neo4j_uri=uri))
    assert not current.reachable
    assert current.error is not None and uri in current.error


@pytest.mark.neo4j
def test_launcher_reports_a_taken_http_port(
    squatted_port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # a fresh launcher home under data_dir()
    settings = Settings(neo4j_uri=f"bolt://127.0.0.1:{_free_port()}")
    with pytest.raises(UserError, match=f"127.0.0.1:{squatted_port} is already in use"):
        db.start(settings, wait_s=120, http_port=squatted_port)
    assert not (tmp_path / ".local" / "share" / "htam-graph" / "neo4j" / "launcher.pid").exists()
