"""`htam ARGS...` in this process, paused at a chosen point of an import or an export so
that a test can kill -9 this process, or the Neo4j server, right there:

    python -m tests.memory.paused_cli POINT ARGS...

POINT is `import:N` (the import has handed N records to the store; N=0: it has begun),
`finish` (a Neo4j import wrote everything and has not cleared its mark) or `export:N`
(N records exported). At the point it prints PAUSED and waits for a line on stdin, then
goes on. HTAM_TEST_BATCH sets the stores' import batch size (small: many transactions),
HTAM_TEST_RETRY_S how long the driver retries a server that is gone (short: a quick test).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import htam_graph.cli.memory as cli_memory
from htam_graph.cli import main
from htam_graph.memory import neo4j_driver, neo4j_store, sqlite_store
from htam_graph.memory.export_file import ExportFile


def pause() -> None:
    print("PAUSED", flush=True)
    sys.stdin.readline()


def pausing(items: Iterable[Any], after: int) -> Iterator[Any]:
    if after == 0:
        pause()
    for i, item in enumerate(items, start=1):
        yield item
        if i == after:
            pause()


def patch_items(after: int) -> None:
    real: Callable[[ExportFile], Iterator[Any]] = ExportFile.items
    ExportFile.items = lambda self: pausing(real(self), after)  # type: ignore[method-assign]


def patch_finish() -> None:
    real = neo4j_store.Neo4jStore._write

    def write(self: neo4j_store.Neo4jStore, name: str, **params: Any) -> Any:
        if name == "import_finish":
            pause()
        return real(self, name, **params)

    neo4j_store.Neo4jStore._write = write  # type: ignore[method-assign]


def patch_export(after: int) -> None:
    real = cli_memory.write_export
    cli_memory.write_export = lambda items, out: real(pausing(items, after), out)


if __name__ == "__main__":
    point, args = sys.argv[1], sys.argv[2:]
    if batch := os.environ.get("HTAM_TEST_BATCH"):
        neo4j_store.BATCH = sqlite_store.BATCH = int(batch)
    if retry := os.environ.get("HTAM_TEST_RETRY_S"):
        neo4j_driver.RETRY_S = neo4j_store.RETRY_S = float(retry)
    kind, _, n = point.partition(":")
    {"import": lambda: patch_items(int(n)), "finish": patch_finish, "export": lambda: patch_export(int(n))}[kind]()
    sys.argv = ["htam", *args]
    main()
