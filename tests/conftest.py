"""Shared fixtures.

Integration tests use a real Neo4j, and only one this test session owns: by default the
session starts its own server (the launcher, Neo4j 5.26) with a temporary home, free
ports and a random password, and stops it at the end; under pytest-xdist (`-n 2`, as
CI runs) each worker is such a session, with ports from a range of its own.
HTAM_TEST_NEO4J_URI (with HTAM_TEST_NEO4J_PASSWORD, and HTAM_TEST_NEO4J_HTTP_PORT for the
Browser test) names a test server to use instead; one holding data the tests did not
create is refused, and under xdist its tests all run in one worker. A user's
server (`htam db start`, bolt 7687) is never touched. Under CI, a Neo4j that cannot start,
or a missing nvcc, fails the tests instead of skipping them.
"""

from __future__ import annotations

import functools
import os
import random
import secrets
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from htam_graph.config import Settings
from htam_graph.errors import UserError

IN_CI = bool(os.environ.get("CI"))
# Names under which the session's server reaches spawned helpers (test_concurrency).
URI_VAR, PASSWORD_VAR = "HTAM_TEST_NEO4J_URI", "HTAM_TEST_NEO4J_PASSWORD"
# Its HTTP port, where it serves Neo4j Browser (tests/analytics/test_browser.py).
HTTP_VAR = "HTAM_TEST_NEO4J_HTTP_PORT"
# A node that marks a server as this project's test server (never a user's memory).
TEST_MARK = "HtamTestServer"

# A user's HTAM_* settings, and their settings file, must not steer the tests towards
# their memory or server: the session gets an empty config folder of its own.
for _name in [n for n in os.environ if n.startswith("HTAM_") and n not in (URI_VAR, PASSWORD_VAR, HTTP_VAR)]:
    del os.environ[_name]
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="htam-test-config-")


_GIVEN_PORTS: set[int] = set()
_ALL_PORTS = range(20000, 32000)  # below Linux's ephemeral range (32768-60999)


def _worker_ports() -> range:
    """This process's share of _ALL_PORTS: under pytest-xdist (`-n N`) each worker draws from
    a slice of its own, so two workers never hand out the same port at the same time."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ...; unset without xdist
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    size = len(_ALL_PORTS) // max(count, 1)
    return range(_ALL_PORTS.start + index * size, _ALL_PORTS.start + (index + 1) * size)


_PORTS = _worker_ports()


def free_port() -> int:
    """A free port for a server a test starts, below the kernel's ephemeral range and never
    handed out twice in the session (nor by another xdist worker: see _worker_ports). A port
    from bind(0) is ephemeral: between this probe and the server's own bind, any outgoing
    connection (a driver, the JVM) could take it (CI saw "127.0.0.1:49101 is already in use"
    from a Neo4j a test started)."""
    for _ in range(1000):
        port = random.choice(_PORTS)
        if port in _GIVEN_PORTS:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _GIVEN_PORTS.add(port)
        return port
    raise RuntimeError(f"no free port in {_PORTS.start}-{_PORTS.stop - 1}")


def neo4j_settings(**overrides: object) -> Settings:
    """Settings that reach the session's own test server (see the module docstring)."""
    given: dict[str, object] = {
        "store": "neo4j",
        "neo4j_uri": os.environ[URI_VAR],
        "neo4j_password": os.environ.get(PASSWORD_VAR, "htam-graph"),
    }
    return Settings(**{**given, **overrides})


def neo4j_env() -> dict[str, str]:
    """The same, as environment variables for an `htam` subprocess."""
    return {"HTAM_NEO4J_URI": os.environ[URI_VAR], "HTAM_NEO4J_PASSWORD": os.environ.get(PASSWORD_VAR, "htam-graph")}


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"Neo4j must be usable in CI: {reason}")
    pytest.skip(f"no usable test Neo4j: {reason}")


@pytest.fixture(scope="session")
def _neo4j_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The session's own Neo4j, started once (about 20 s), or the named test server."""
    from htam_graph import neo4j_server

    if os.environ.get(URI_VAR):
        yield
        return
    settings = Settings(neo4j_uri=f"bolt://127.0.0.1:{free_port()}", neo4j_password=secrets.token_urlsafe(16))
    home = tmp_path_factory.mktemp("neo4j-home")
    http_port = free_port()
    try:
        neo4j_server.start(settings, wait_s=240, http_port=http_port, home=home)
    except UserError as e:
        _unavailable(f"the test session's own server did not start: {e}")
    os.environ[URI_VAR] = settings.neo4j_uri or ""
    os.environ[PASSWORD_VAR] = settings.neo4j_password.get_secret_value()
    os.environ[HTTP_VAR] = str(http_port)
    try:
        yield
    finally:
        neo4j_server.stop(settings, home=home)
        for name in (URI_VAR, PASSWORD_VAR, HTTP_VAR):
            os.environ.pop(name, None)


@pytest.fixture(scope="session")
def _neo4j_session_store(_neo4j_server: None):
    from htam_graph.memory.neo4j_store import Neo4jStore

    try:
        store = Neo4jStore(neo4j_settings())
    except UserError as e:
        _unavailable(str(e))
    records, _, _ = store.driver.execute_query(
        "OPTIONAL MATCH (m:" + TEST_MARK + ") WITH count(m) AS marks "
        "OPTIONAL MATCH (n) RETURN marks, count(n) AS nodes",
        database_=store.database,
    )
    if records[0]["nodes"] and not records[0]["marks"]:
        store.close()
        pytest.exit(
            f"the Neo4j at {store.uri} holds data this test session did not create; the tests never "
            f"touch a user's memory: unset {URI_VAR} (the tests then start their own server) "
            "or point it at an empty server",
            returncode=2,
        )
    store.driver.execute_query("MERGE (:" + TEST_MARK + ")", database_=store.database)
    yield store
    store.close()


@pytest.fixture
def neo4j_store(_neo4j_session_store):
    """The session's Neo4j, its memory emptied before each test."""
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
    """A connected driver for the session's server."""
    return _neo4j_session_store.driver


@functools.cache
def _nvcc_missing() -> str | None:
    from htam_graph.runner.build import find_nvcc

    try:
        find_nvcc()
    except UserError as e:
        return str(e)
    return None


# A test server named by the environment (not one each session starts for itself).
_NAMED_SERVER = bool(os.environ.get(URI_VAR))


# The suite's longest tests (seconds in CI on two busy cores, measured), run first: pytest-
# xdist hands out tests in collection order (its groups first), so a long test collected
# last (the README walk sits at the end of tests/) would run alone at the end while the
# other worker idles. Only the order changes; a test missing here keeps its place.
LONGEST_FIRST = {
    "tests/test_readme_walk.py::test_the_readme_walks_on_a_cpu_without_a_key": 200,
    "tests/loop/test_table.py::test_a_train_test_comparison_gives_the_same_runs_from_any_folder": 96,
    "tests/cli/test_widths.py::test_every_command_reads_at_80_and_200_columns": 92,
    "tests/memory/test_import_crash.py::test_killing_the_server_mid_import_and_mid_export": 86,
    "tests/loop/test_table.py::test_a_train_test_comparison_runs_and_reports_paired_differences": 74,
    "tests/test_neo4j_server.py::test_start_never_changes_an_existing_password": 72,
    "tests/catalog/test_kernels_build.py::test_every_variant_passes_the_static_checks_and_builds": 69,
    "tests/catalog/test_kernels_cpu.py::test_every_task_matches_its_reference_in_base_and_tuned_kernels": 65,
    "tests/loop/test_table.py::test_a_replay_bench_of_htam_and_its_controls_runs_on_the_cpu": 61,
    "tests/cli/test_newcomer.py::test_every_command_that_takes_a_memory_file_takes_an_export": 43,
    "tests/loop/test_table.py::test_flat_learns_its_memory_in_a_train_test_comparison": 41,
    "tests/loop/test_optimize.py::test_a_run_killed_mid_step_resumes_to_the_same_memory": 30,
    "tests/bench/test_bench.py::test_a_killed_bench_continues_where_it_stopped_and_runs_nothing_twice": 23,
    "tests/catalog/test_kernels_cpu.py::test_the_simulator_tells_3xtf32_from_plain_tf32": 19,
}


def _expected_s(item: pytest.Item) -> int:
    return LONGEST_FIRST.get(item.nodeid.split("[")[0], 0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`-n N --dist loadgroup`) each worker starts a Neo4j of its own, and
    the tests on the memory filled by real runs (tests/analytics/conftest.py) go to one
    worker, which fills it once. A server named by HTAM_TEST_NEO4J_URI is one for all
    workers, and each test empties it: then every test of Neo4j goes to one worker.
    The longest tests come first (LONGEST_FIRST), the longest of them first."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if _NAMED_SERVER and (item.get_closest_marker("neo4j") or "_neo4j_session_store" in fixtures):
            item.add_marker(pytest.mark.xdist_group("neo4j"))
        elif "filled_neo4j" in fixtures:
            item.add_marker(pytest.mark.xdist_group("filled-memory"))
    items.sort(key=lambda item: -_expected_s(item))  # stable: the rest keep their order


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked `nvcc` need a real nvcc: they fail in CI without one, skip elsewhere."""
    if item.get_closest_marker("nvcc") is None:
        return
    missing = _nvcc_missing()
    if missing is None:
        return
    if IN_CI:
        pytest.fail(f"nvcc must be installed in CI (the `nvcc` extra): {missing}")
    pytest.skip(f"needs nvcc: {missing}")
