"""`htam config`: every setting, its value and where it came from (passwords hidden)."""

from __future__ import annotations

import click

from htam_graph.cli.common import print_json, print_table, say
from htam_graph.config import ENV_FILE_VAR, config_dir, setting_sources, settings_file


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def config(ctx: click.Context, as_json: bool) -> None:
    """Show each setting with its source: a flag, the environment, the settings file
    (~/.config/htam-graph/htam.env, or $HTAM_ENV_FILE), or the default. A .env in the
    working directory is never read. Passwords are never shown."""
    flags = {k: v for k, v in ctx.find_root().params.items() if v is not None}
    sources = setting_sources(flags)
    path = settings_file()
    if as_json:
        print_json({"settings_file": str(path) if path else None, "settings": [s.model_dump() for s in sources]})
        return
    print_table("htam-graph settings", ["setting", "value", "source"], [(s.name, s.value, s.source) for s in sources])
    none = f"none (create {config_dir() / 'htam.env'} or set {ENV_FILE_VAR})"
    say(f"settings file: {path or none}")
