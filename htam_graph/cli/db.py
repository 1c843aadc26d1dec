"""`htam db start|stop|status`: the Neo4j server, over htam_graph.neo4j_server."""

from __future__ import annotations

import click

from htam_graph import neo4j_server as server
from htam_graph.cli.common import print_json, say, settings


@click.group()
def db() -> None:
    """Start, stop and inspect the Neo4j server (Docker, or the Java launcher without it)."""


@db.command()
@click.option("--wait", "wait_s", default=120.0, show_default=True, help="Seconds to wait for Bolt to answer.")
@click.option(
    "--http-port",
    default=server.DEFAULT_HTTP_PORT,
    show_default=True,
    help="Port of the HTTP API and Neo4j Browser.",
)
def start(wait_s: float, http_port: int) -> None:
    """Start Neo4j at HTAM_NEO4J_URI (default bolt://127.0.0.1:7687) and wait until it answers."""
    info = server.start(settings(), wait_s=wait_s, http_port=http_port)
    verb = "already running" if info.via == "existing" else f"started via {info.via}"
    say(f"Neo4j {verb} at {info.uri}")
    say(f"Browser: {info.browser}")
    if info.pid is not None:
        say(f"pid {info.pid}" + (f", log {info.log}" if info.log else ""))


@db.command()
def stop() -> None:
    """Stop the Neo4j server this machine started."""
    if server.stop(settings()):
        say("Neo4j stopped")
    else:
        say("no Neo4j server of ours was running")


@db.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(as_json: bool) -> None:
    """Whether Neo4j answers, its version and pid; exit code 1 when it does not answer."""
    current = server.status(settings())
    if as_json:
        print_json(current.model_dump(mode="json"))
    else:  # one line each: a path or URI is never split, whatever the width
        for name, value in current.model_dump().items():
            if value is not None:
                say(f"{name}: {value}")
    if not current.reachable:
        # SystemExit, not ctx.exit: `htam`'s main runs click with standalone_mode=False,
        # which would swallow ctx.exit's code.
        raise SystemExit(1)
