"""The entry point the parent names when it spawns a GPU's referee process.

The parent imports this module (pickling a spawn target records its module and name), so
it stays free of torch: the referee's own modules import torch at their top, and are
imported only once the spawned child runs `referee_main`.
"""

from __future__ import annotations

from multiprocessing.connection import Connection


def referee_main(conn: Connection, device_index: int, sandbox_readable: list[str] | None = None) -> None:
    """`sandbox_readable`: the judge's folders a confined candidate reads; None: no sandbox."""
    # Imported here, in the child: in the parent it would cost every CLI command torch's import.
    from htam_graph.runner.referee.main import serve

    serve(conn, device_index, sandbox_readable)
