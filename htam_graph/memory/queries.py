"""Loads the Cypher queries in cypher/*.cypher by name (one query per file)."""

from __future__ import annotations

from functools import cache

from htam_graph.resources import resource_dir


@cache
def query(name: str) -> str:
    return (resource_dir("cypher") / f"{name}.cypher").read_text()


def statements(name: str) -> list[str]:
    """The `;`-separated statements of a multi-statement file (schema), comments dropped."""
    lines = [ln for ln in query(name).splitlines() if not ln.lstrip().startswith("//")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
