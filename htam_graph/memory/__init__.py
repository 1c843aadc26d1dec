"""The HTG memory: models, the store interface and its two backends."""

from __future__ import annotations

from htam_graph.config import Settings, load_settings
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.memory.store import MemoryStore


def open_store(settings: Settings | None = None, allow_pending: bool = False) -> MemoryStore:
    """The configured store: Neo4j when chosen (or HTAM_NEO4J_URI is set), else the local file.

    A memory whose import or reset did not finish is refused (UnfinishedOperation, naming
    `htam memory reset`) unless `allow_pending`, which only that reset needs."""
    settings = settings or load_settings()
    if settings.store_kind() == "neo4j":
        # Imported here, not above: the neo4j driver is optional where only the embedded
        # store is used (the GPU machine has no neo4j package), not to break a cycle.
        from htam_graph.memory.neo4j_store import Neo4jStore

        return Neo4jStore(settings, allow_pending=allow_pending)
    return SQLiteStore(settings.local_path)
