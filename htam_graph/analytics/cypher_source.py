"""The raw analytics tables computed inside Neo4j by cypher/analytics/*.cypher (one query
per table; record_source.py is the Python twin for the embedded store)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pandas as pd

from htam_graph.analytics import frames
from htam_graph.memory.models import RunConfig
from htam_graph.memory.queries import checked

if TYPE_CHECKING:  # the driver is optional where only the embedded store is used
    from htam_graph.memory.neo4j_store import Neo4jStore

log = logging.getLogger(__name__)


def _native(value: Any) -> Any:
    """neo4j.time values as Python's (a step's created_at)."""
    return value.to_native() if hasattr(value, "to_native") else value


class CypherSource:
    def __init__(self, store: Neo4jStore) -> None:
        self.store = store

    def _rows(self, name: str, **params: Any) -> list[dict[str, Any]]:
        query = f"analytics/{name}"
        try:
            records, _, _ = self.store.driver.execute_query(
                checked(query, params), params, database_=self.store.database
            )
        except Exception:
            log.error("cypher/%s.cypher failed with parameters %s", query, params)
            raise
        return [{k: _native(v) for k, v in r.items()} for r in records]

    def transitions(self, min_count: int) -> pd.DataFrame:
        return frames.frame(self._rows("transitions", min_count=min_count), frames.TRANSITIONS)

    def transitions_by_distance(self, min_count: int) -> pd.DataFrame:
        return frames.frame(self._rows("transitions_by_distance", min_count=min_count), frames.BY_DISTANCE)

    def globals_(self, min_count: int) -> pd.DataFrame:
        return frames.frame(self._rows("globals", min_count=min_count), frames.GLOBALS)

    def locals_(self, global_id: str | None, min_count: int) -> pd.DataFrame:
        return frames.frame(self._rows("locals", global_id=global_id, min_count=min_count), frames.LOCALS)

    def runs(self, min_count: int) -> pd.DataFrame:
        rows = self._rows("runs", min_count=min_count)
        for row in rows:
            row.update(frames.run_setup(RunConfig.model_validate_json(row.pop("config"))))
        return frames.frame(rows, frames.RUNS)

    def trajectory(self, run_id: str) -> pd.DataFrame | None:
        rows = self._rows("trajectory", run_id=run_id)
        if not rows:
            return None  # no such run
        return frames.frame([r for r in rows if r["index"] is not None], frames.TRAJECTORY)

    def history(self, global_id: str) -> pd.DataFrame:
        return frames.frame(self._rows("history", global_id=global_id), frames.HISTORY)
