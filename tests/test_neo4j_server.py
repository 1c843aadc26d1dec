"""htam_graph.neo4j_server and the driver checks against a real Neo4j (the test session's own)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j.exceptions import AuthError

from htam_graph import neo4j_server
from htam_graph.config import Settings
from htam_graph.errors import UserError
from htam_graph.memory.neo4j_driver import connect
from tests.conftest import free_port, neo4j_settings


@pytest.fixture
def squatted_port() -> Iterator[int]:
    """A port some other process listens on."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        yield squatter.getsockname()[1]


@pytest.mark.neo4j
def test_status_reports_the_running_5_26_server(neo4j_driver, tmp_path) -> None:
    current = neo4j_server.status(neo4j_settings(), home=tmp_path)
    assert current.reachable
    assert current.version is not None and current.version.startswith("5.26.")
    assert current.edition == "community"


@pytest.mark.neo4j
def test_start_finds_the_running_server(neo4j_driver, tmp_path) -> None:
    info = neo4j_server.start(neo4j_settings(), home=tmp_path)
    assert info.via == "existing"
    assert info.uri == neo4j_settings().neo4j_uri


@pytest.mark.neo4j
def test_wrong_password_is_a_user_error_naming_the_password(neo4j_driver, tmp_path) -> None:
    # One attempt only: Neo4j locks the user for a while after three failed logins.
    with pytest.raises(UserError, match="rejected the password.*HTAM_NEO4J_PASSWORD") as caught:
        neo4j_server.status(neo4j_settings(neo4j_password="not-the-password"), home=tmp_path)
    assert isinstance(caught.value.__cause__, AuthError)


def test_unreachable_port_is_a_user_error_naming_the_uri(tmp_path) -> None:
    uri = f"bolt://127.0.0.1:{free_port()}"
    with pytest.raises(UserError, match=f"cannot reach Neo4j at {uri}"):
        connect(Settings(neo4j_uri=uri))
    current = neo4j_server.status(Settings(neo4j_uri=uri), home=tmp_path)
    assert not current.reachable
    assert current.error is not None and uri in current.error


@pytest.mark.neo4j
def test_launcher_reports_a_taken_http_port(squatted_port: int, tmp_path: Path) -> None:
    settings = Settings(neo4j_uri=f"bolt://127.0.0.1:{free_port()}")
    with pytest.raises(UserError, match=f"127.0.0.1:{squatted_port} is already in use"):
        neo4j_server.start(settings, wait_s=120, http_port=squatted_port, home=tmp_path)
    assert not (tmp_path / "launcher.pid").exists()
