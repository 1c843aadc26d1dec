"""What every command shares: the settings flags, the LLM's flags, and rendering tables or JSON."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_args

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from htam_graph.config import Settings, load_settings
from htam_graph.errors import BadInput
from htam_graph.llm.settings import Backend, Family

console = Console()

# Top-level flags that override HTAM_* environment variables and the settings file (pydantic-settings
# gives init arguments the highest priority).
_FLAGS = [
    click.option("--store", type=click.Choice(["auto", "local", "neo4j"]), help="Memory backend [env HTAM_STORE]."),
    click.option(
        "--local-path", type=click.Path(dir_okay=False), help="SQLite file of the local store [env HTAM_LOCAL_PATH]."
    ),
    click.option("--neo4j-uri", help="Bolt URI, e.g. bolt://localhost:7687 [env HTAM_NEO4J_URI]."),
    click.option("--neo4j-user", help="Neo4j user [env HTAM_NEO4J_USER]."),
    click.option("--neo4j-password", help="Neo4j password [env HTAM_NEO4J_PASSWORD]."),
    click.option("--neo4j-database", help="Neo4j database name [env HTAM_NEO4J_DATABASE]."),
]

F = TypeVar("F", bound=Callable[..., Any])


def llm_options(script_help: str) -> Callable[[F], F]:
    """--llm, --model, --llm-family, --base-url and --script, for the commands that run the loop
    (htam optimize, htam bench); `script_help` says how that command replays a script."""
    options = [
        click.option(
            "--llm",
            "backend",
            type=click.Choice(get_args(Backend)),
            help="Who writes the kernels [env HTAM_LLM__BACKEND; default anthropic].",
        ),
        click.option(
            "--model",
            help="Model id [env HTAM_LLM__MODEL]. With --llm catalog: catalog-space-v1 (the default: every run "
            "starts from the task's base kernel) or catalog-v1 (the tuned start: from the family's hand-tuned "
            "first kernel, as the published GPU tables).",
        ),
        click.option(
            "--llm-family",
            "family",
            type=click.Choice(get_args(Family)),
            help="How the model is asked (reasoning budget, completion limit, tool or JSON mode); default: "
            "detected from the model's name, see docs/prompts.md [env HTAM_LLM__FAMILY].",
        ),
        click.option(
            "--base-url",
            help="Endpoint of an OpenAI-compatible server, e.g. https://api.deepseek.com [env HTAM_LLM__BASE_URL].",
        ),
        click.option(
            "--script",
            "script_path",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help=script_help,
        ),
    ]

    def apply(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def sandbox_option(command: F) -> F:
    """--sandbox/--no-sandbox, on every command that judges generated code (htam eval, optimize,
    bench, catalog record); the default is runner/sandbox.py's ON_BY_DEFAULT, alone."""
    from htam_graph.runner.sandbox import ON_BY_DEFAULT

    return click.option(
        "--sandbox/--no-sandbox",
        default=ON_BY_DEFAULT,
        show_default=True,
        help="Confine generated code and its builds (Landlock, seccomp, no privileges; docs/threat-model.md). Off "
        "by default until confined CUDA is verified on the GPU; what is judged unconfined says so.",
    )(command)


def require_sandbox(asked: bool) -> None:
    """With --sandbox, before anything is written: a machine that cannot confine is one line
    naming the missing feature and --no-sandbox (a UserError, exit code 2)."""
    if asked:
        from htam_graph.runner import sandbox

        sandbox.require()


class _LevelFormatter(logging.Formatter):
    """`warning: <message>`: retries, restarts and fallbacks read like the CLI's errors."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def setup_logging(verbose: int) -> None:
    """Warnings (retries, restarts, fallbacks) go to stderr; -v adds info, -vv debug."""
    handler = logging.StreamHandler()
    handler.setFormatter(_LevelFormatter())
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, handlers=[handler], force=True)


def settings_options(f: Callable) -> Callable:
    for option in reversed(_FLAGS):
        f = option(f)
    return f


def settings_from_flags(flags: dict[str, Any]) -> Settings:
    return load_settings(**{k: v for k, v in flags.items() if v is not None})


def settings() -> Settings:
    """The settings built from the top-level flags (or the environment when run directly)."""
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx else None
    return root.obj if root is not None and isinstance(root.obj, Settings) else load_settings()


def say(message: str) -> None:
    """Print a line that holds data (names, paths, URIs) as it is: never as rich markup."""
    console.print(message, markup=False, highlight=False, soft_wrap=True)


def numbers(flag: str, text: str | None) -> list[int] | None:
    """A comma-separated list of numbers given to `flag` (--level, --gpus); None when not given."""
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise BadInput(f"{flag} {text}: give numbers separated by commas, e.g. 0,1", option=flag, value=text) from None


def best_text(speedup: float | None, digits: int = 2) -> str:
    """A run's best (memory.models.best_step) as every command prints it."""
    return f"{speedup:.{digits}f}x" if speedup is not None else "none correct"


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], out: Console | None = None) -> None:
    """A table of data that reads at any width: the title and every cell are plain text, never
    rich markup (stored names, docstrings and paths may hold `[b]` or `[/bold]`).

    No cell is ever cut or split mid-word: ids, numbers and paths stay on one line, free text
    wraps between words, a header between its words. When the columns cannot fit the width
    that way (many columns at 80), each row prints as a block of `column: value` lines
    instead, a value never split (a line longer than the terminal is the terminal's to wrap)."""
    out = out or console
    cells = [[_cell(v).plain for v in row] for row in rows]
    numeric = [bool(rows) and all(isinstance(r[i], (int, float)) for r in rows) for i in range(len(columns))]
    text = [not numeric[i] and any(" " in row[i] or "\n" in row[i] for row in cells) for i in range(len(columns))]
    need, want = [], []
    for i, col in enumerate(columns):
        values = [row[i] for row in cells]
        head = max((len(w) for w in col.split()), default=1)
        longest = max((len(v) for v in values), default=0)
        word = max((len(w) for v in values for w in v.split()), default=0)
        need.append(max(head, word if text[i] else longest, 1))
        want.append(max(len(col), longest, 1))
    room = out.width - (3 * len(columns) + 1)  # the box's borders and each cell's padding
    if sum(need) > room:
        _print_records(out, title, columns, cells)
        return
    widths = _share(need, want, room)
    fits = len(title) <= sum(widths) + 3 * len(columns) + 1
    if not fits:  # a title holding a path is never split: a line of its own
        out.print(Text(title, style="italic"), soft_wrap=True)
    table = Table(title=Text(title) if fits else None)
    for i, col in enumerate(columns):
        table.add_column(
            Text(col), justify="right" if numeric[i] else "left", width=widths[i], no_wrap=not text[i], overflow="fold"
        )
    for row in cells:
        table.add_row(*(Text(v) for v in row))
    out.print(table)


def _share(need: list[int], want: list[int], room: int) -> list[int]:
    """Column widths between `need` and `want` within `room`: what is left after every
    column's need is shared out evenly, a column that wants less than its share getting
    what it wants (so short columns stay whole and the long ones wrap)."""
    widths = list(need)
    spare = room - sum(need)
    order = sorted(range(len(need)), key=lambda i: want[i] - need[i])
    for k, i in enumerate(order):
        give = min(want[i] - need[i], spare // (len(order) - k))
        widths[i] += give
        spare -= give
    return widths


_SEP = "  ·  "


def _print_records(out: Console, title: str, columns: Sequence[str], cells: Sequence[Sequence[str]]) -> None:
    """Each row as its first cell, then `column: value` pairs packed into lines of the width."""
    out.print(Text(f"{title} ({len(cells)} rows; one per paragraph at this width)"), soft_wrap=True)
    for row in cells:
        out.print()
        out.print(Text(f"{columns[0]}: {row[0]}", style="bold"), soft_wrap=True)
        line = ""
        for col, value in zip(columns[1:], row[1:]):
            pair = f"{col}: {value or '-'}"
            if line and len(line) + len(_SEP) + len(pair) > out.width:
                out.print(Text(line), soft_wrap=True)
                line = ""
            line = f"{line}{_SEP}{pair}" if line else f"  {pair}"
        if line:
            out.print(Text(line), soft_wrap=True)


def _cell(v: Any) -> Text:
    if isinstance(v, float):
        return Text(f"{v:.4f}")
    return Text("" if v is None else str(v))
