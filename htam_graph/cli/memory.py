"""`htam memory ...`: create, seed, inspect, score, move and reset the HTG memory."""

from __future__ import annotations

import sys
from contextlib import closing
from pathlib import Path

import click
from pydantic import ValidationError

from htam_graph.cli.common import print_json, print_table, say, settings
from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput, StoreStateError
from htam_graph.files import atomic_file
from htam_graph.memory import open_store
from htam_graph.memory.export_file import ExportFile, write_export
from htam_graph.memory.models import Section
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.store import MemoryStore
from htam_graph.policy.policy import with_probabilities
from htam_graph.vocab import OperatorFamily, ShapeClass


@click.group()
def memory() -> None:
    """The HTG memory: global directions, local strategies, transitions, run records."""


@memory.command()
def init() -> None:
    """Create the store's schema (tables, or Neo4j constraints and indexes). Idempotent."""
    with open_store(settings()) as store:
        store.init_schema()
        say(f"schema ready in {store.describe()}")


@memory.command()
@click.option(
    "--bank",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Seed bank YAML (default: the bank shipped with htam-graph).",
)
def seed(bank: Path | None) -> None:
    """Load the seed bank's globals, locals and transition priors. Idempotent: runtime
    statistics and evidence already in the memory are kept."""
    seed_bank = load_seed_bank(bank)  # validated before anything is written
    with open_store(settings()) as store:
        report = store.seed(seed_bank)
        say(
            f"seeded {seed_bank.name} v{seed_bank.version} into {store.describe()}: "
            f"{report.globals} globals, {report.locals} locals, {report.transitions} transition priors"
        )


@memory.command()
@click.option("--locals", "local_of", metavar="GLOBAL", help="List the local strategies of one global.")
@click.option("--transitions", is_flag=True, help="List TRANSITION edges with their evidence.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def show(local_of: str | None, transitions: bool, as_json: bool) -> None:
    """Show the globals with their statistics (or locals of one global, or transitions)."""
    with open_store(settings()) as store:
        if local_of:
            _show_locals(store, local_of, as_json)
        elif transitions:
            _show_transitions(store, as_json)
        else:
            _show_globals(store, as_json)


def _rate(successes: int, attempts: int) -> float | None:
    return successes / attempts if attempts else None


def _show_globals(store: MemoryStore, as_json: bool) -> None:
    globals_ = store.get_globals()
    if not globals_:
        raise StoreStateError(
            f"memory at {store.describe()} is empty; run `htam memory seed` first", store=store.describe()
        )
    n_locals: dict[str, int] = {}
    for loc in store.get_locals():
        n_locals[loc.global_id] = n_locals.get(loc.global_id, 0) + 1
    if as_json:
        print_json({"store": store.describe(), "counts": store.counts(), "globals": [g.model_dump() for g in globals_]})
        return
    rows = [
        (
            g.id,
            n_locals.get(g.id, 0),
            g.prior,
            g.attempts,
            _rate(g.successes, g.attempts),
            g.reward_sum / g.attempts if g.attempts else None,
            g.trend,
        )
        for g in globals_
    ]
    print_table(
        f"Global directions in {store.describe()}",
        ["id", "locals", "prior", "attempts", "success", "mean reward", "trend"],
        rows,
    )
    say(" ".join(f"{k}={v}" for k, v in store.counts().items()))


def _show_locals(store: MemoryStore, global_id: str, as_json: bool) -> None:
    locals_ = store.get_locals(global_id)
    if not locals_:
        known = ", ".join(g.id for g in store.get_globals())
        if not known:
            raise StoreStateError(
                f"memory at {store.describe()} is empty; run `htam memory seed` first", store=store.describe()
            )
        raise BadInput(f"no locals under global {global_id!r}; known globals: {known}", value=global_id)
    if as_json:
        print_json([loc.model_dump() for loc in locals_])
        return
    rows = [
        (loc.id, loc.name, loc.attempts, _rate(loc.successes, loc.attempts), len(loc.positive), len(loc.negative))
        for loc in locals_
    ]
    print_table(f"Local strategies under {global_id}", ["id", "name", "attempts", "success", "pos", "neg"], rows)


def _show_transitions(store: MemoryStore, as_json: bool) -> None:
    edges = store.get_transitions()
    if as_json:
        print_json([t.model_dump() for t in edges])
        return
    rows = [
        (
            t.source,
            t.target,
            t.n,
            _rate(t.successes, t.n),
            t.reward_sum / t.n if t.n else None,
            t.compile_failures,
            t.incorrect,
            " ".join(str(n) for n in t.n_by_k if n) or "-",
        )
        for t in edges
    ]
    print_table(
        "TRANSITION edges",
        ["from", "to", "n", "success", "mean reward", "compile fail", "incorrect", "n by distance"],
        rows,
    )


@memory.command()
@click.option(
    "--prefix", default="", help="Recent globals, most recent first, comma-separated (e.g. memory_access,fusion)."
)
@click.option("--K", "K", type=int, help="Prefix length that attends (default from settings: 3).")
@click.option("--lam", type=float, help="Attention decay with prefix distance.")
@click.option("--alpha", type=float, help="Shrinkage toward the back-off.")
@click.option("--beta", type=float, help="Weight of the global's own utility.")
@click.option("--tau", type=float, help="Softmax temperature.")
@click.option(
    "--family",
    type=click.Choice([f.value for f in OperatorFamily if f != OperatorFamily.ANY]),
    help="Condition on this operator family's evidence, as htam does for a task of it (default: pooled, as "
    "htam-no-family).",
)
@click.option(
    "--shape-class",
    type=click.Choice([c.value for c in ShapeClass]),
    help="With --family: only that family's tasks of this shape class, as htam with HTAM_SCORING__BY_SHAPE does.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def score(prefix: str, family: str | None, shape_class: str | None, as_json: bool, **overrides: float | None) -> None:
    """Transition-attended score S(g) and policy probability P(g) of every global for a
    prefix of recently chosen globals (computed by Cypher in Neo4j, in Python locally),
    pooled or conditioned on an operator family and shape class (docs/method.md)."""
    if shape_class is not None and family is None:
        raise BadInput("--shape-class narrows a family's evidence: give --family too", option="--shape-class")
    cfg = settings()
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        params = ScoringParams(**{**cfg.scoring.model_dump(), **given})
    except ValidationError as e:
        err = e.errors()[0]
        raise BadInput(
            f"bad scoring parameter --{err['loc'][0]}: {err['msg']}",
            option=f"--{err['loc'][0]}",
            value=err.get("input"),
        ) from None
    path = [p.strip() for p in prefix.split(",") if p.strip()]
    with open_store(cfg) as store:
        scored = store.score(path, params, family, shape_class)
    scores = sorted(with_probabilities(scored, params.tau), key=lambda s: -s.score)
    if as_json:
        shape = {} if shape_class is None else {"shape_class": shape_class}
        print_json(
            {
                "prefix": path,
                "family": family,
                **shape,
                "params": params.model_dump(),
                "scores": [s.model_dump() for s in scores],
            }
        )
        return
    shape_text = f" ({shape_class})" if shape_class else ""
    print_table(
        f"Scores after prefix {' <- '.join(path) or '(empty)'}, {family or 'every'} family{shape_text}  "
        f"(K={params.K} lam={params.lam} alpha={params.alpha} beta={params.beta} tau={params.tau})",
        ["global", "B_f(g)" if family else "B(g)", "transition", "S(g)", "P(g)"],
        [(s.global_id, s.base, s.transition, s.score, s.probability) for s in scores],
    )


@memory.command("export")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file (default: standard output).",
)
def export_cmd(output: Path | None) -> None:
    """Write the whole memory (HTG and run records) as JSON Lines, streamed: any size
    fits. A file is written next to OUTPUT first, readable by you only, and renamed into
    place once complete."""
    with open_store(settings()) as store:
        if output is None:
            with closing(store.iter_records()) as records:
                write_export(records, sys.stdout)
            return
        counts = _write_privately(output, store)
    say(f"exported to {output}: " + " ".join(f"{k}={v}" for k, v in counts.items()))


def _write_privately(output: Path, store: MemoryStore) -> dict[Section, int]:
    try:
        # never a half-written export; readable by its owner only, while written and after
        with (
            atomic_file(output, mode=0o600) as tmp,
            tmp.open("w", encoding="utf-8", newline="\n") as fh,
            closing(store.iter_records()) as records,
        ):
            counts = write_export(records, fh)
    except OSError as e:
        raise BadInput(f"cannot write {output}: {e.strerror or e}", path=output) from e
    return counts


@memory.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def import_cmd(path: Path) -> None:
    """Load a memory exported by `htam memory export` (format version 2 or 3) into an
    empty store. The whole file is checked before anything is written; the import is
    all or nothing, and one cut short (a killed process, a dead server) is refused by
    every command until `htam memory reset`."""
    exported = ExportFile(path)
    counts = exported.check()
    with open_store(settings()) as store:
        store.import_records(exported.items(), source=str(path), counts=counts)
        say(f"imported {path} into {store.describe()}: " + " ".join(f"{k}={v}" for k, v in counts.items()))


@memory.command()
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def reset(yes: bool) -> None:
    """Delete the whole memory (HTG and run records); also discards an import, or finishes
    a reset, that was cut short."""
    with open_store(settings(), allow_pending=True) as store:
        if not yes:
            click.confirm(f"Delete the whole memory at {store.describe()}?", abort=True)
        store.reset()
        say(f"memory at {store.describe()} deleted")
