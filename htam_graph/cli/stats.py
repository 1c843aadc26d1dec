"""`htam stats transitions|globals|locals|runs`: the analytics tables (htam_graph.analytics)
as plain text that fits 80 columns (and a pipe), or as CSV or JSON for scripts."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import click
import pandas as pd

from htam_graph import analytics
from htam_graph.cli.common import settings
from htam_graph.errors import BadInput, StoreStateError
from htam_graph.memory import open_store
from htam_graph.memory.store import MemoryStore

Format = Literal["table", "csv", "json"]
TABLES = ("transitions", "globals", "locals", "runs")


@dataclass(frozen=True)
class Column:
    """One column of a text table: its header, how a row shows in it, and whether it may
    be left out when the table would not fit the terminal."""

    header: str
    cell: Callable[[pd.Series], str]
    numeric: bool = True
    optional: bool = False


def _text(key: str, header: str | None = None, optional: bool = False) -> Column:
    return Column(header or key, lambda r: "-" if pd.isna(r[key]) else str(r[key]), numeric=False, optional=optional)


def _num(header: str, key: str, spec: str) -> Column:
    return Column(header, lambda r: "-" if pd.isna(r[key]) else format(r[key], spec))


def _interval(r: pd.Series) -> str:
    return "-" if pd.isna(r["ci_low"]) else f"{r['ci_low']:.2f}-{r['ci_high']:.2f}"


N = _num("n", "observations", "d")
RATE = _num("rate", "success_rate", ".2f")
CI = Column("95% CI", _interval)
REWARD = _num("reward", "mean_reward", "+.2f")
GAIN = _num("gain", "mean_gain", ".2f")
RATES_LEGEND = "rate: share of the steps rewarded (reward > 0); 95% CI: Wilson"


class _Tables(click.Group):
    """Unknown table names are one `error: ...` line, like every user error."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands:
            raise BadInput(
                f"no table {args[0]!r}: choose one of {', '.join(TABLES)} (`htam stats --help`)", value=args[0]
            )
        return super().resolve_command(ctx, args)


def _min_count(ctx: click.Context, param: click.Parameter, value: int) -> int:
    if value < 0:
        raise BadInput(f"--min-count must be 0 or more, got {value}", option="--min-count", value=value)
    return value


def _options(f: Callable) -> Callable:
    f = click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "csv", "json"]),
        default="table",
        show_default=True,
        help="table: for people (fits 80 columns); csv, json: every column, full precision.",
    )(f)
    return click.option(
        "--min-count",
        type=int,
        default=1,
        show_default=True,
        callback=_min_count,
        help="Leave out rows with fewer observations (steps, attempts).",
    )(f)


@click.group(cls=_Tables)
def stats() -> None:
    """Success rates (95% Wilson intervals) of transitions, globals, locals, runs.

    With mean rewards and gains; docs/analytics.md has the definitions."""


@stats.command()
@click.option("--by-distance", is_flag=True, help="One row per prefix distance k (1: the previous step's global).")
@_options
def transitions(by_distance: bool, min_count: int, fmt: Format) -> None:
    """TRANSITION edges between globals.

    Best first: ranked by the lower end of the success rate's interval, so an edge seen
    once does not outrank one seen often."""
    with _store() as store:
        if by_distance:
            df = analytics.transitions_by_distance(store, min_count)
            columns = [_text("source", "from"), _text("target", "to"), _num("k", "distance", "d"), N]
        else:
            df = analytics.transitions(store, min_count)
            columns = [_text("source", "from"), _text("target", "to"), N]
        columns += [RATE, CI, REWARD, GAIN]
        legend = f"n: steps that used the edge (at each distance k); reward, gain: means per step\n{RATES_LEGEND}"
        _show(store, df, fmt, f"TRANSITION edges with {min_count}+ observations", columns, legend)


@stats.command("globals")
@_options
def globals_cmd(min_count: int, fmt: Format) -> None:
    """Global directions."""
    with _store() as store:
        df = analytics.globals_(store, min_count)
        columns = [_text("id"), _num("n", "attempts", "d"), RATE, CI, REWARD, _num("trend", "trend", "+.2f")]
        legend = f"n: steps that chose it; reward: mean per step; trend: moving average\n{RATES_LEGEND}"
        _show(store, df, fmt, f"global directions with {min_count}+ attempts", columns, legend)


@stats.command("locals")
@click.option("--global", "global_id", metavar="GLOBAL", help="Only the strategies under this global.")
@_options
def locals_cmd(global_id: str | None, min_count: int, fmt: Format) -> None:
    """Local strategies."""
    with _store() as store:
        df = analytics.locals_(store, global_id, min_count)
        columns = [_text("id"), _num("n", "attempts", "d"), RATE, CI, REWARD]
        where = f" under {global_id}" if global_id else ""
        legend = f"n: steps that chose it; reward: mean per step\n{RATES_LEGEND}"
        _show(store, df, fmt, f"local strategies{where} with {min_count}+ attempts", columns, legend)


@stats.command("runs")
@click.option("--by-method", is_flag=True, help="Compare methods over their runs.")
@click.option("--run", "run_id", metavar="RUN_ID", help="One run's steps, in order.")
@_options
def runs_cmd(by_method: bool, run_id: str | None, min_count: int, fmt: Format) -> None:
    """Optimization runs, methods compared, one run's steps.

    Runs oldest first; --by-method compares the methods over their runs; --run shows one
    run's steps in order."""
    if by_method and run_id:
        raise BadInput("--by-method compares all runs and --run shows one: give one of them", option="--run")
    with _store() as store:
        if run_id:
            # steps are numbered from 1 in every output (the memory's index counts from 0)
            df = analytics.trajectory(store, run_id)
            df = df.assign(index=df["index"] + 1).rename(columns={"index": "step"})
            columns = [
                _num("step", "step", "d"),
                Column("direction/strategy", _strategy, numeric=False),
                _text("verdict"),
                _num("speedup", "speedup", ".2f"),
                _num("reward", "reward", "+.2f"),
                _num("best", "best_after", ".2f"),
            ]
            _show(store, df, fmt, f"steps of run {run_id}", columns)
        elif by_method:
            df = analytics.compare_methods(store, min_count)
            legend = "correct, fast_1: shares of runs with a correct, a faster candidate; geomean:\n"
            legend += f"geometric-mean best speedup over eager (1.0 without a correct one)\n{RATES_LEGEND}"
            columns = [
                _text("method"),
                _num("runs", "runs", "d"),
                _num("correct", "correct", ".2f"),
                _num("fast_1", "fast_1", ".2f"),
                _num("geomean", "geomean_speedup", ".2f"),
                _num("steps", "steps", "d"),
                RATE,
                CI,
                REWARD,
            ]
            _show(store, df, fmt, f"methods over their runs with {min_count}+ steps", columns, legend)
        else:
            df = analytics.runs(store, min_count)
            columns = [
                _text("run_id", "run"),
                _text("method", optional=True),
                _num("steps", "steps", "d"),
                _num("ok", "ok", "d"),
                _num("succ", "successes", "d"),
                REWARD,
                _num("best", "best_speedup", ".2f"),
                _text("reward_from", "reward from", optional=True),
                _text("llm", optional=True),
            ]
            legend = "ok: correct candidates; succ: rewarded steps; best: x eager; reward from: what\n"
            legend += "a step's reward is measured against; llm: catalog-v1 starts at a tuned kernel"
            _show(store, df, fmt, f"runs with {min_count}+ steps", columns, legend)


def _strategy(r: pd.Series) -> str:
    """`global/local` without repeating the global in the local's id."""
    if pd.isna(r["global_id"]):
        return "-"
    return r["global_id"] if pd.isna(r["local_id"]) else f"{r['global_id']}/{r['local_id'].split('.', 1)[1]}"


def _store() -> MemoryStore:
    store = open_store(settings())
    if not store.counts()["globals"]:
        where = store.describe()
        store.close()
        raise StoreStateError(
            f"the memory at {where} is empty: run `htam memory seed` and some `htam optimize` runs first", store=where
        )
    return store


def _show(
    store: MemoryStore, df: pd.DataFrame, fmt: Format, title: str, columns: Sequence[Column], legend: str = ""
) -> None:
    if df.empty:
        raise StoreStateError(
            f"nothing to show: no {title} in the memory at {store.describe()}"
            " (run `htam optimize` first, or lower --min-count)",
            store=store.describe(),
        )
    if fmt == "csv":
        click.echo(df.to_csv(index=False), nl=False)
    elif fmt == "json":
        click.echo(df.to_json(orient="records", date_format="iso", indent=2))
    else:
        click.echo(f"{title[0].upper()}{title[1:]}\nin {store.describe()}")  # a path may be long: a line of its own
        click.echo(_render(df, columns, shutil.get_terminal_size().columns))
        if legend:
            click.echo(legend)


def _render(df: pd.DataFrame, columns: Sequence[Column], width: int) -> str:
    """Plain columns: text left-aligned, numbers right-aligned; optional columns are left
    out, rightmost first, while the table is wider than `width`."""
    shown = list(columns)
    while True:
        cells = [[c.header for c in shown], *([c.cell(row) for c in shown] for _, row in df.iterrows())]
        widths = [max(len(line[i]) for line in cells) for i in range(len(shown))]
        gaps = [2 if not c.numeric else 1 for c in shown[:-1]]
        optional = [i for i, c in enumerate(shown) if c.optional]
        if sum(widths) + sum(gaps) <= width or not optional:
            break
        del shown[optional[-1]]
    lines = []
    for line in cells:
        parts = [
            (cell.rjust(w) if c.numeric else cell.ljust(w)) + (" " * gaps[i] if i < len(gaps) else "")
            for i, (cell, w, c) in enumerate(zip(line, widths, shown, strict=True))
        ]
        lines.append("".join(parts).rstrip())
    return "\n".join(lines)
