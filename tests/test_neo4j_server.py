"""htam_graph.neo4j_server and the driver checks against a real Neo4j (the test session's own)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j.exceptions import AuthError

from htam_graph import neo4j_server
from htam_graph.config import Settings
from htam_graph.errors import ConfigError, StoreError
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
    with pytest.raises(ConfigError, match="rejected the password.*HTAM_NEO4J_PASSWORD") as caught:
        neo4j_server.status(neo4j_settings(neo4j_password="not-the-password"), home=tmp_path)
    assert isinstance(caught.value.__cause__, AuthError) and caught.value.setting == "HTAM_NEO4J_PASSWORD"


def test_unreachable_port_is_a_user_error_naming_the_uri(tmp_path) -> None:
    uri = f"bolt://127.0.0.1:{free_port()}"
    with pytest.raises(StoreError, match=f"cannot reach Neo4j at {uri}") as caught:
        connect(Settings(neo4j_uri=uri))
    assert (caught.value.store, caught.value.exit_code) == (uri, 3)
    current = neo4j_server.status(Settings(neo4j_uri=uri), home=tmp_path)
    assert not current.reachable
    assert current.error is not None and uri in current.error


@pytest.mark.neo4j
def test_launcher_reports_a_taken_http_port(squatted_port: int, tmp_path: Path) -> None:
    settings = Settings(neo4j_uri=f"bolt://127.0.0.1:{free_port()}")
    with pytest.raises(StoreError, match=f"127.0.0.1:{squatted_port} is already in use"):
        neo4j_server.start(settings, wait_s=120, http_port=squatted_port, home=tmp_path)
    assert not (tmp_path / "launcher.pid").exists()


@pytest.mark.neo4j
def test_start_never_changes_an_existing_password(tmp_path: Path) -> None:
    """The launcher sets a password on a server's first start only: a later `db start`
    with another password (here the public default) is refused and the server stopped,
    and its owner's password and memory are as they were."""
    from htam_graph.memory.neo4j_store import Neo4jStore

    home, http_port = tmp_path / "home", free_port()
    own = Settings(store="neo4j", neo4j_uri=f"bolt://127.0.0.1:{free_port()}", neo4j_password="owners-own-pw")
    neo4j_server.start(own, wait_s=240, http_port=http_port, home=home)
    try:
        assert home.stat().st_mode & 0o777 == 0o700
        assert all((home / f).stat().st_mode & 0o777 == 0o600 for f in ("launcher.log", "launcher.pid"))
        with Neo4jStore(own) as store:
            store.init_schema()
            store.driver.execute_query("CREATE (:Global {id: 'kept'})", database_=store.database)
        neo4j_server.stop(own, home=home)
        default = own.model_copy(update={"neo4j_password": Settings().neo4j_password})
        with pytest.raises(ConfigError, match="has a password other than HTAM_NEO4J_PASSWORD.*never changes"):
            neo4j_server.start(default, wait_s=240, http_port=http_port, home=home)
        assert not (home / "launcher.pid").exists()  # stopped again
        neo4j_server.start(own, wait_s=240, http_port=http_port, home=home)
        with Neo4jStore(own) as store:
            assert store.counts()["globals"] == 1
    finally:
        neo4j_server.stop(own, home=home)


def test_compose_publishes_on_loopback_only() -> None:
    import yaml

    from htam_graph.resources import resource_dir

    compose = yaml.safe_load((resource_dir("docker") / "compose.yml").read_text())
    ports = compose["services"]["neo4j"]["ports"]
    assert ports and all(p.startswith("${HTAM_NEO4J_BIND:-127.0.0.1}:") for p in ports)


def test_a_bolt_uri_with_credentials_is_refused_without_echoing_them() -> None:
    from htam_graph.memory.neo4j_driver import neo4j_uri

    with pytest.raises(ConfigError) as caught:
        neo4j_uri(Settings(neo4j_uri="neo4j://admin:top-secret@db.example:7687"))
    assert "top-secret" not in str(caught.value) and "HTAM_NEO4J_PASSWORD" in str(caught.value)
    assert (caught.value.setting, caught.value.value) == ("HTAM_NEO4J_URI", "neo4j://db.example:7687")
