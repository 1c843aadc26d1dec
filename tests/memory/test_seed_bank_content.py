"""Structural checks of the seed bank data, read with plain pyyaml.

These guard the content of htam_graph/memory/seed_bank.yaml independently of the
pydantic loader, so a broken edit of the data is caught even before the loader runs.
"""

import re
from collections import Counter
from importlib import resources
from typing import Any

import pytest
import yaml

from htam_graph.vocab import OperatorFamily

GLOBAL_ID = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
REQUIRED_GLOBALS = {
    "memory_access",
    "data_reuse",
    "parallelism",
    "fusion",
    "reduction_sync",
    "compute_efficiency",
    "precision_tensor_cores",
    "launch_config",
}
OPERATOR_FAMILIES = {family.value for family in OperatorFamily}
FieldKinds = dict[str, type | tuple[type, ...]]
GLOBAL_FIELDS: FieldKinds = {
    "id": str,
    "name": str,
    "intent": str,
    "goals": list,
    "triggers": list,
    "risks": list,
    "prior": (int, float),
}
LOCAL_FIELDS: FieldKinds = {
    "id": str,
    "global": str,
    "name": str,
    "pattern": str,
    "checks": list,
    "pitfalls": list,
    "applies_to": list,
}
TRANSITION_FIELDS: FieldKinds = {
    "from": str,
    "to": str,
    "prior": (int, float),
    "when": str,
    "rationale": str,
    "risks": list,
}


@pytest.fixture(scope="module")
def bank() -> dict[str, Any]:
    text = resources.files("htam_graph").joinpath("memory/seed_bank.yaml").read_text()
    return yaml.safe_load(text)


def _assert_shape(record: dict[str, Any], fields: FieldKinds, label: str) -> None:
    """Exact keys, right types, non-empty text, and lists of non-empty strings.

    A plain YAML list item containing ': ' silently becomes a mapping; the
    list-of-strings check is what catches that.
    """
    assert set(record) == set(fields), f"{label}: keys {sorted(record)}"
    for key, kind in fields.items():
        value = record[key]
        assert isinstance(value, kind), f"{label}.{key} is {type(value).__name__}"
        if kind is str:
            assert value.strip(), f"{label}.{key} is empty"
        if kind is list:
            assert value, f"{label}.{key} is empty"
            assert all(isinstance(v, str) and v.strip() for v in value), f"{label}.{key}"


def test_header(bank: dict[str, Any]) -> None:
    assert set(bank) == {"version", "name", "globals", "locals", "transition_prior_strength", "transitions"}
    assert 0 < bank["transition_prior_strength"] <= 5  # a prior that a handful of real steps outweigh
    assert isinstance(bank["version"], int) and bank["version"] >= 1
    assert bank["name"] == "htam-seed-cuda"


def test_globals(bank: dict[str, Any]) -> None:
    globals_ = bank["globals"]
    ids = [g["id"] for g in globals_]
    assert len(globals_) >= 8
    assert len(ids) == len(set(ids))
    assert set(ids) >= REQUIRED_GLOBALS
    for g in globals_:
        _assert_shape(g, GLOBAL_FIELDS, g["id"])
        assert GLOBAL_ID.match(g["id"]), g["id"]
        assert -1.0 <= g["prior"] <= 1.0, g["id"]


def test_locals(bank: dict[str, Any]) -> None:
    global_ids = {g["id"] for g in bank["globals"]}
    locals_ = bank["locals"]
    ids = [loc["id"] for loc in locals_]
    assert len(locals_) >= 40
    assert len(ids) == len(set(ids))
    for loc in locals_:
        _assert_shape(loc, LOCAL_FIELDS, loc["id"])
        parent, _, leaf = loc["id"].partition(".")
        assert parent == loc["global"] and parent in global_ids, loc["id"]
        assert GLOBAL_ID.match(leaf), loc["id"]
        assert set(loc["applies_to"]) <= OPERATOR_FAMILIES, loc["id"]


def test_every_global_has_four_locals(bank: dict[str, Any]) -> None:
    per_global = Counter(loc["global"] for loc in bank["locals"])
    thin = {g["id"]: per_global[g["id"]] for g in bank["globals"] if per_global[g["id"]] < 4}
    assert not thin


def test_transitions(bank: dict[str, Any]) -> None:
    global_ids = {g["id"] for g in bank["globals"]}
    transitions = bank["transitions"]
    edges = [(t["from"], t["to"]) for t in transitions]
    assert len(transitions) >= 12
    assert len(edges) == len(set(edges))
    for t in transitions:
        label = f"{t['from']}->{t['to']}"
        _assert_shape(t, TRANSITION_FIELDS, label)
        assert t["from"] in global_ids and t["to"] in global_ids, label
        assert t["from"] != t["to"], label
        assert -1.0 <= t["prior"] <= 1.0, label
