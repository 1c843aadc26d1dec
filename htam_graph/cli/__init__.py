"""The `htam` command. Each group lives in its own module and loads only when used, so
`htam memory ...` never pays for importing torch."""

from __future__ import annotations

import importlib
import logging
import os
import sys

import click

from htam_graph import __version__
from htam_graph.cli.common import settings_from_flags, settings_options, setup_logging
from htam_graph.errors import UserError

SUBCOMMANDS = {
    "memory": ("htam_graph.cli.memory", "memory"),
    "db": ("htam_graph.cli.db", "db"),
    "tasks": ("htam_graph.cli.tasks", "tasks"),
    "eval": ("htam_graph.cli.eval", "eval_cmd"),
    "optimize": ("htam_graph.cli.optimize", "optimize"),
    "bench": ("htam_graph.cli.bench", "bench"),
    "catalog": ("htam_graph.cli.catalog", "catalog"),
    "stats": ("htam_graph.cli.stats", "stats"),
    "demo": ("htam_graph.cli.demo", "demo"),
    "config": ("htam_graph.cli.config", "config"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SUBCOMMANDS:
            return None
        module, attr = SUBCOMMANDS[name]
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="htam")
@click.option("-v", "--verbose", count=True, help="Say more: -v for progress details, -vv for debugging.")
@settings_options
@click.pass_context
def cli(ctx: click.Context, verbose: int, **flags: object) -> None:
    """HTAM: LLM-driven CUDA kernel optimization guided by a hierarchical
    transition-attended memory (the HTG) kept in Neo4j or a local file.

    Settings come from these flags, else HTAM_* environment variables, else the settings
    file ~/.config/htam-graph/htam.env (or $HTAM_ENV_FILE); `htam config` shows them. Without
    HTAM_NEO4J_URI (or --store neo4j) the memory is the embedded SQLite file (HTAM_LOCAL_PATH).
    """
    setup_logging(verbose)
    ctx.obj = settings_from_flags(flags)


def main() -> None:
    """Every failure a user can cause or meet is one line on stderr, `error: ...`; the exit
    code is 2 for bad input or settings, 3 when the memory store fails, 4 when the LLM
    backend does (htam_graph/errors.py)."""
    # Our warnings (a retried step, a discarded import) as one line each. The driver logs
    # every broken connection and retry itself; what it finally raises becomes our one line.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(name)s: %(message)s")
    logging.getLogger("neo4j").setLevel(logging.CRITICAL)
    try:
        cli.main(standalone_mode=False)
    except UserError as e:
        click.echo(f"error: {_one_line(str(e))}", err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.UsageError as e:
        hint = f" (see `{e.ctx.command_path} --help`)" if e.ctx else ""
        click.echo(f"error: {_one_line(e.format_message())}{hint}", err=True)
        sys.exit(2)
    except click.ClickException as e:
        click.echo(f"error: {_one_line(e.format_message())}", err=True)
        sys.exit(e.exit_code)
    except BrokenPipeError:
        # `htam memory export | head`: the reader left; say nothing more, and keep Python
        # from failing to flush into the closed pipe at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


def _one_line(message: str) -> str:
    return " ".join(message.split())
