"""The Neo4j driver as the store uses it: connect with checks that name what is wrong,
read the server's version once and gate on it.

Starting and stopping a server is htam_graph.neo4j_server's job, which builds on this
module; nothing here knows how a server was started.
"""

from __future__ import annotations

import logging

import neo4j
from neo4j.exceptions import AuthError, ClientError, ConfigurationError, DriverError, Neo4jError

from htam_graph.config import Settings
from htam_graph.errors import UserError
from htam_graph.memory.queries import checked

log = logging.getLogger(__name__)

DEFAULT_URI = "bolt://127.0.0.1:7687"
MIN_VERSION = (5, 23)  # CALL (vars) { ... } scoped subqueries


def neo4j_uri(settings: Settings) -> str:
    return settings.neo4j_uri or DEFAULT_URI


def connect(settings: Settings) -> neo4j.Driver:
    """A driver whose address, password and database were checked; UserError says what is wrong."""
    uri = neo4j_uri(settings)
    auth = (settings.neo4j_user, settings.neo4j_password.get_secret_value())
    try:
        driver = neo4j.GraphDatabase.driver(
            uri, auth=auth, connection_timeout=10.0, connection_acquisition_timeout=15.0
        )
    except (ConfigurationError, ValueError) as e:
        raise UserError(f"HTAM_NEO4J_URI={uri!r} is not a Neo4j URI ({e})") from e
    try:
        driver.verify_connectivity()
        driver.execute_query(checked("ping", ()), database_=settings.neo4j_database)
    except AuthError as e:
        driver.close()
        raise UserError(
            f"Neo4j at {uri} rejected the password of user {settings.neo4j_user!r}:"
            " set HTAM_NEO4J_PASSWORD to the server's password"
        ) from e
    except ClientError as e:
        driver.close()
        if "DatabaseNotFound" not in (e.code or ""):
            raise UserError(f"Neo4j at {uri} refused the connection: {e.message}") from e
        raise UserError(
            f"Neo4j at {uri} has no database {settings.neo4j_database!r}:"
            " set HTAM_NEO4J_DATABASE (Community edition has only 'neo4j')"
        ) from e
    except (DriverError, Neo4jError, OSError) as e:
        driver.close()
        reason = " ".join(str(e).split())  # the driver's messages span lines
        raise UserError(
            f"cannot reach Neo4j at {uri} ({reason}): start it with `htam db start`"
            " or point HTAM_NEO4J_URI at a running server"
        ) from e
    return driver


def server_components(driver: neo4j.Driver) -> tuple[str, str]:
    """(version, edition) of the server, e.g. ('5.26.30', 'community')."""
    records, _, _ = driver.execute_query(checked("server_version", ()), database_="system")
    return records[0]["version"], records[0]["edition"]


def server_version(driver: neo4j.Driver) -> tuple[int, ...]:
    version, _ = server_components(driver)
    return tuple(int(x) for x in version.split("-")[0].split(".")[:2])


def require_version(driver: neo4j.Driver, uri: str) -> None:
    """Refuse a server older than the Cypher the store's queries use."""
    version = server_version(driver)
    if version < MIN_VERSION:
        raise UserError(
            f"Neo4j at {uri} is {'.'.join(map(str, version))}; htam-graph needs "
            f"{'.'.join(map(str, MIN_VERSION))} or newer (docker/compose.yml runs 5.26)"
        )
