"""Every query in cypher/ is used by the code, and every call passes exactly the
`$parameters` its file declares (checked at each call by memory.queries.checked)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

import htam_graph
from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput
from htam_graph.memory import neo4j_driver
from htam_graph.memory import neo4j_store as neo4j_store_module
from htam_graph.memory.neo4j_store import Neo4jStore
from htam_graph.memory.queries import QueryParameterError, checked, checked_statements, parameters, statements
from htam_graph.resources import resource_dir
from tests.conftest import neo4j_settings
from tests.memory.test_store_conformance import G, make_step, seeded

CYPHER_FILES = sorted(p.stem for p in resource_dir("cypher").glob("*.cypher"))
PACKAGE = Path(htam_graph.__file__).parent


def _string_literals() -> set[str]:
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def test_every_cypher_file_is_named_in_the_code():
    unused = set(CYPHER_FILES) - _string_literals()
    assert not unused, f"cypher files no code names: {sorted(unused)}"


def test_a_call_with_other_parameters_is_refused():
    assert parameters("step_check") == {"global_ids", "local_id", "run_id"}
    with pytest.raises(QueryParameterError, match=r"missing parameters \['run_id'\], unexpected \['run'\]"):
        checked("step_check", ["global_ids", "local_id", "run"])
    assert parameters("ping") == frozenset()
    assert parameters("reset_begin") == {"token", "since"}  # comments that mention $names do not count


@pytest.mark.neo4j
def test_the_store_runs_every_query_with_its_declared_parameters(neo4j_store, monkeypatch):
    """A whole workload on the real server, through a recording `checked`: every file runs."""
    ran: set[str] = set()

    def recording(name: str, given: Iterable[str]) -> str:
        ran.add(name)
        return checked(name, given)  # raises on any mismatch

    def recording_statements(name: str, given: Iterable[str]) -> list[tuple[str, frozenset[str]]]:
        ran.add(name)
        return checked_statements(name, given)

    for module in (neo4j_store_module, neo4j_driver):
        monkeypatch.setattr(module, "checked", recording)
    monkeypatch.setattr(neo4j_store_module, "checked_statements", recording_statements)
    with Neo4jStore(neo4j_settings()) as store:  # connects through it too (ping, version, memory_state)
        seeded(store)
        store.record_step(make_step(0, [G[0]], G[1], 0.5))
        store.record_step(make_step(0, [G[0]], G[1], 0.5))  # a replay: the stored branch
        with pytest.raises(BadInput, match="unknown run"):  # no row: step_check says why
            store.record_step(make_step(1, [G[0]], G[1], 0.5, run="no-such-run"))
        store.score([G[0]], ScoringParams())
        store.score([G[0]], ScoringParams(), "elementwise")
        store.family_evidence("elementwise")
        snap = store.export()
        store.get_locals(G[1])
        store.get_steps("run-1")
        store.similar_steps("level1/1_Toy", "elementwise", "a" * 64, exclude_run="run-2", limit=5)
        store.reset()
        store.import_snapshot(snap)
        store.reset()
    assert sorted(ran) == CYPHER_FILES
    assert len(statements("schema")) > 1 and len(statements("reset")) > 1
