"""Loads the Cypher queries in cypher/*.cypher by name (one query per file) and checks
that every call passes exactly the `$parameters` its query declares."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from htam_graph.resources import resource_dir

_PARAM = re.compile(r"\$(\w+)")


class QueryParameterError(TypeError):
    """A call site passed other parameters than its Cypher file declares (a programming error)."""


@cache
def query(name: str) -> str:
    return (resource_dir("cypher") / f"{name}.cypher").read_text()


def _code(name: str) -> str:
    """The query without its `//` comment lines (they may mention parameters in prose)."""
    return "\n".join(ln for ln in query(name).splitlines() if not ln.lstrip().startswith("//"))


@cache
def parameters(name: str) -> frozenset[str]:
    return frozenset(_PARAM.findall(_code(name)))


def checked(name: str, given: Iterable[str]) -> str:
    """The query text, after checking that `given` names exactly its parameters."""
    declared, passed = parameters(name), frozenset(given)
    if declared != passed:
        missing, extra = sorted(declared - passed), sorted(passed - declared)
        raise QueryParameterError(f"cypher/{name}.cypher: missing parameters {missing}, unexpected {extra}")
    return query(name)


def statements(name: str) -> list[str]:
    """The `;`-separated statements of a multi-statement file (schema, reset), comments dropped."""
    return [s.strip() for s in _code(name).split(";") if s.strip()]


def checked_statements(name: str, given: Iterable[str]) -> list[tuple[str, frozenset[str]]]:
    """Each statement of a multi-statement file with the parameters it takes, after checking
    that `given` names exactly the parameters of the file as a whole."""
    checked(name, given)
    return [(stmt, frozenset(_PARAM.findall(stmt))) for stmt in statements(name)]
