"""Which server failures are the user's one-line errors and which stay tracebacks (a
Cypher syntax error is our bug). The errors are the driver's own, as the server sends them;
a dead server and a wrong password are met for real in test_import_crash and
test_neo4j_server."""

from __future__ import annotations

import pytest
from neo4j.exceptions import Neo4jError, ServiceUnavailable, SessionExpired

from htam_graph.memory.neo4j_driver import server_failure

URI = "bolt://127.0.0.1:7687"


def server_error(code: str) -> Neo4jError:
    return Neo4jError._hydrate_neo4j(code=code, message="as the server says it")


@pytest.mark.parametrize(
    "error, message",
    [
        (server_error("Neo.TransientError.General.MemoryPoolOutOfMemoryError"), "ran out of transaction memory"),
        (server_error("Neo.TransientError.General.TransactionMemoryLimit"), "server.memory.heap.max_size"),
        (server_error("Neo.TransientError.Transaction.DeadlockDetected"), "is busy or unavailable"),
        (server_error("Neo.TransientError.Transaction.LockClientStopped"), "ended the transaction"),
        (server_error("Neo.ClientError.Transaction.Terminated"), "ended the transaction"),
        (server_error("Neo.DatabaseError.General.UnknownError"), "failed while importing"),
        (server_error("Neo.ClientError.Security.Forbidden"), "refused importing"),
        (ServiceUnavailable("Connection refused"), "lost the connection to Neo4j at bolt://127.0.0.1:7687"),
        (SessionExpired("gone"), "is the server running?"),
    ],
)
def test_failures_a_user_meets_are_one_line(error, message):
    failure = server_failure(error, URI, "importing")
    assert failure is not None and message in str(failure) and "\n" not in str(failure)


@pytest.mark.parametrize(
    "error",
    [
        server_error("Neo.ClientError.Statement.SyntaxError"),
        server_error("Neo.ClientError.Schema.ConstraintValidationFailed"),
        server_error("Neo.ClientError.Statement.ParameterMissing"),
        ValueError("not a server error"),
    ],
)
def test_programming_errors_are_not_dressed_as_user_errors(error):
    assert server_failure(error, URI, "importing") is None
