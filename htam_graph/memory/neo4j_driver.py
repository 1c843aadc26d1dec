"""The Neo4j driver as the store uses it: connect with checks that name what is wrong,
read the server's version once and gate on it, and turn the failures a user can meet
(a server that died, a server limit) into one-line errors.

Starting and stopping a server is htam_graph.neo4j_server's job, which builds on this
module; nothing here knows how a server was started.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Concatenate, ParamSpec, Protocol, TypeVar
from urllib.parse import urlsplit

import neo4j
from neo4j.exceptions import (
    AuthError,
    ClientError,
    ConfigurationError,
    DatabaseError,
    DriverError,
    Forbidden,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
    TransientError,
)

from htam_graph.config import Settings
from htam_graph.errors import ConfigError, StoreError, UserError
from htam_graph.memory.queries import checked

log = logging.getLogger(__name__)

DEFAULT_URI = "bolt://127.0.0.1:7687"
MIN_VERSION = (5, 23)  # CALL (vars) { ... } scoped subqueries
# How long a transaction is retried while the server is busy or unreachable (the driver's
# default, 30 s, makes a dead server a long wait before its one-line error).
RETRY_S = 15.0
# Bolt, directly or routed, plain or over TLS (the driver's http:// needs an optional module).
SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


def neo4j_uri(settings: Settings) -> str:
    """The configured Bolt URI, checked: a supported scheme, and no credentials in it (a
    password in a URI ends up in messages and logs; it belongs in HTAM_NEO4J_PASSWORD)."""
    uri = settings.neo4j_uri or DEFAULT_URI
    parts = urlsplit(uri)
    if parts.username is not None or parts.password is not None:
        bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        raise ConfigError(
            f"HTAM_NEO4J_URI holds a user or password ({bare} with credentials): give the URI without them"
            " and the password in HTAM_NEO4J_PASSWORD",
            setting="HTAM_NEO4J_URI",
            value=bare,
        )
    if parts.scheme not in SCHEMES or not parts.hostname:
        schemes = ", ".join(SCHEMES[1:])
        raise ConfigError(
            f"HTAM_NEO4J_URI={uri!r} is not a Neo4j Bolt URI: use bolt://HOST:PORT (or {schemes})",
            setting="HTAM_NEO4J_URI",
            value=uri,
        )
    return uri


def connect(settings: Settings) -> neo4j.Driver:
    """A driver whose address, password and database were checked; ConfigError or StoreError says what is wrong."""
    uri = neo4j_uri(settings)
    auth = (settings.neo4j_user, settings.neo4j_password.get_secret_value())
    try:
        driver = neo4j.GraphDatabase.driver(
            uri,
            auth=auth,
            connection_timeout=10.0,
            connection_acquisition_timeout=15.0,
            max_transaction_retry_time=RETRY_S,
            # The server's hints (unknown labels on a fresh database, ...) are for people
            # writing queries; ours are fixed and tested.
            notifications_min_severity="OFF",
        )
    except (ConfigurationError, ValueError) as e:
        raise ConfigError(
            f"HTAM_NEO4J_URI={uri!r} is not a Neo4j URI ({_one_line(e)})", setting="HTAM_NEO4J_URI", value=uri
        ) from e
    try:
        driver.verify_connectivity()
        driver.execute_query(checked("ping", ()), database_=settings.neo4j_database)
    except AuthError as e:
        driver.close()
        raise ConfigError(
            f"Neo4j at {uri} rejected the password of user {settings.neo4j_user!r}:"
            " set HTAM_NEO4J_PASSWORD to the server's password",
            setting="HTAM_NEO4J_PASSWORD",
        ) from e
    except ClientError as e:
        driver.close()
        if "DatabaseNotFound" not in (e.code or ""):
            raise StoreError(f"Neo4j at {uri} refused the connection: {e.message}", store=uri) from e
        raise ConfigError(
            f"Neo4j at {uri} has no database {settings.neo4j_database!r}:"
            " set HTAM_NEO4J_DATABASE (Community edition has only 'neo4j')",
            setting="HTAM_NEO4J_DATABASE",
            value=settings.neo4j_database,
        ) from e
    except (DriverError, Neo4jError, OSError) as e:
        driver.close()
        raise StoreError(
            f"cannot reach Neo4j at {uri} ({_one_line(e)}): start it with `htam db start`"
            " or point HTAM_NEO4J_URI at a running server",
            store=uri,
        ) from e
    return driver


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__  # the driver's messages span lines


def server_gone(e: BaseException | None) -> bool:
    return isinstance(e, ServiceUnavailable | SessionExpired)


def server_failure(e: BaseException, uri: str, doing: str) -> UserError | None:
    """The one-line error for a failure a user can meet while `doing` something, or None
    for a programming error (a Cypher syntax or constraint error stays a traceback)."""
    if server_gone(e):
        reason = _one_line(e)
        return StoreError(
            f"lost the connection to Neo4j at {uri} while {doing} ({reason}): is the server running?", store=uri
        )
    if isinstance(e, AuthError):
        return ConfigError(
            f"Neo4j at {uri} no longer accepts the password while {doing}: set HTAM_NEO4J_PASSWORD",
            setting="HTAM_NEO4J_PASSWORD",
        )
    if isinstance(e, Forbidden):
        return StoreError(f"Neo4j at {uri} refused {doing}: {e.message}", store=uri)
    if not isinstance(e, Neo4jError):
        return None
    code = e.code or ""
    if "Memory" in code:  # MemoryPoolOutOfMemoryError, TransactionOutOfMemoryError, ...
        return StoreError(
            f"Neo4j at {uri} ran out of transaction memory while {doing} ({code}): give the server a larger heap"
            " (server.memory.heap.max_size)",
            store=uri,
        )
    if isinstance(e, TransientError):
        return StoreError(f"Neo4j at {uri} is busy or unavailable while {doing} ({code}): try again", store=uri)
    if code.endswith((".Terminated", ".LockClientStopped", ".TransactionTimedOut")):
        return StoreError(f"Neo4j at {uri} ended the transaction while {doing} ({code}): try again", store=uri)
    if isinstance(e, DatabaseError):
        return StoreError(f"Neo4j at {uri} failed while {doing} ({code}: {_one_line(e)})", store=uri)
    return None


class _HasUri(Protocol):
    uri: str


S = TypeVar("S", bound=_HasUri)
P = ParamSpec("P")
R = TypeVar("R")


def user_errors(doing: str) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Decorate a store method: server failures become one-line UserErrors naming `doing`."""

    def decorate(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(method)
        def wrapper(store: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return method(store, *args, **kwargs)
            except (DriverError, Neo4jError) as e:
                if (failure := server_failure(e, store.uri, doing)) is None:
                    raise
                raise failure from e

        return wrapper

    return decorate


T = TypeVar("T")


def streamed_user_errors(items: Iterator[T], uri: str, doing: str) -> Iterator[T]:
    """The same for a generator: failures while streaming become one-line UserErrors."""
    try:
        yield from items
    except (DriverError, Neo4jError) as e:
        if (failure := server_failure(e, uri, doing)) is None:
            raise
        raise failure from e


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
        raise StoreError(
            f"Neo4j at {uri} is {'.'.join(map(str, version))}; htam-graph needs "
            f"{'.'.join(map(str, MIN_VERSION))} or newer (docker/compose.yml runs 5.26)",
            store=uri,
        )
