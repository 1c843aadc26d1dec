"""`htam demo`: HTAM loops with the strategy catalog on replayed H200 results."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from htam_graph.catalog import DEMO_REPLAY
from htam_graph.cli.common import best_text, print_json, print_table, settings
from htam_graph.config import data_dir
from htam_graph.vocab import Method


@click.command()
@click.option(
    "--tasks",
    metavar="IDS",
    help="Comma-separated built-in task ids (default: five tasks of different families).",
)
@click.option("--steps", type=click.IntRange(min=1), default=6, show_default=True, help="Steps per run.")
@click.option(
    "--methods",
    default=Method.HTAM.value,
    show_default=True,
    help="Comma-separated methods (docs/method.md), each run on every task in turn.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the policy's draws.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="The demo's folder: its memory file and run folders, replaced on every demo "
    "[default: <data dir>/demo, ~/.local/share/htam-graph/demo].",
)
@click.option(
    "--evaluator",
    type=click.Choice(["replay", "stand-in", "gpu"]),
    default="replay",
    show_default=True,
    help="replay: results an H200 recorded for these runs; stand-in: no GPU, no replay file, synthetic times; "
    "gpu: this machine's GPU.",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The replay file (default: the one shipped with htam-graph).",
)
@click.option(
    "--record",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Run on this machine's GPU with the real judge and write every result into this replay file.",
)
@click.option("--neo4j", is_flag=True, help="Use the configured Neo4j (holding no runs) instead of the demo's file.")
@click.option("--json", "as_json", is_flag=True, help="Print the demo's result as JSON (progress goes to stderr).")
def demo(
    tasks: str | None,
    steps: int,
    methods: str,
    seed: int,
    out: Path | None,
    evaluator: str,
    replay_path: Path | None,
    record: Path | None,
    neo4j: bool,
    as_json: bool,
) -> None:
    """Run real HTAM loops without an LLM, a GPU or a server: the strategy catalog writes the
    kernels, the results a GPU recorded judge them, and a fresh memory learns which
    directions pay. Ends with the transitions the memory learned and the best speedups.

    The demo keeps the settings its H200 recording was made with, not the defaults of
    `htam optimize` and `htam bench`: the tuned start (the catalog's model catalog-v1: each run
    begins at the family's hand-tuned first kernel) and the reward against the run's best
    (reward_from = best; HTAM_SCORING__REWARD_FROM and HTAM_LLM__MODEL are not read here),
    also with --record."""
    from htam_graph.demo import DEFAULT_TASKS, DemoOptions, demo_evaluator, run_demo
    from htam_graph.errors import BadInput

    try:
        chosen = [Method(m.strip()) for m in methods.split(",") if m.strip()]
    except ValueError:
        raise BadInput(
            f"--methods {methods}: use {', '.join(m.value for m in Method)}", option="--methods", value=methods
        ) from None
    cfg = settings()
    if replay_path is None and not record:  # the shipped H200 recording was made before htam conditioned on families
        cfg = cfg.model_copy(update={"scoring": cfg.scoring.model_copy(update={"by_family": False})})
    options = DemoOptions(
        tasks=[t.strip() for t in tasks.split(",")] if tasks else list(DEFAULT_TASKS),
        steps=steps,
        methods=chosen,
        seed=seed,
        out=out or data_dir() / "demo",
        neo4j=neo4j,
    )
    command = "htam " + " ".join(shlex.quote(a) for a in sys.argv[2:] if a) if len(sys.argv) > 1 else "htam demo"
    judge = demo_evaluator(evaluator, replay_path or DEMO_REPLAY, record, "htam demo " + command.removeprefix("htam "))
    console = Console(stderr=as_json)
    console.print(f"[bold]htam demo[/]: {len(options.tasks)} tasks x {len(chosen)} method(s) x {steps} steps, "
                  f"kernels by the strategy catalog, judged by {escape(judge.label)}", highlight=False)  # fmt: skip

    def live(task, record, summary) -> None:  # type: ignore[no-untyped-def]
        speed = f" {record.speedup:.2f}x" if record.speedup is not None else ""
        where = f"{record.global_id or '-'}/{(record.local_id or '-').split('.')[-1]}"
        colour = (
            "green" if record.best_after > record.best_before else "red" if record.verdict.value != "ok" else "default"
        )
        console.print(
            f"  {escape(task.id)} {record.index + 1}/{summary.steps_planned} {escape(where)}: "
            f"[{colour}]{record.verdict.value}[/]{speed}, best {best_text(summary.best_speedup)}",
            highlight=False,
        )

    result = run_demo(options, cfg, judge, observe=live)
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    console.print(f"[yellow]{escape(result.device)}[/]", highlight=False)
    print_table(
        "Transitions the memory learned (best mean reward first)",
        ["from", "to", "steps", "success", "mean reward"],
        [(t.source, t.target, t.observations, t.success_rate, t.mean_reward) for t in result.transitions[:15]],
    )
    several = len(chosen) > 1
    print_table(
        "Best kernels (speedup over PyTorch eager)",
        ["task", *(["method"] if several else []), "best", "at step"],
        [
            (
                r.task_id,
                *([r.method.value] if several else []),
                best_text(r.best_speedup),
                r.best_step + 1 if r.best_step is not None else "-",
            )
            for r in result.runs
        ],
    )
    # paths and commands to copy: one line each, never split at the terminal's width
    console.print(f"memory: {escape(result.memory)}", highlight=False, soft_wrap=True)
    if result.memory_command:
        console.print(f"look at it: {escape(result.memory_command)}", highlight=False, soft_wrap=True)
    if cfg.neo4j_uri and not neo4j:
        console.print("Neo4j is configured: `htam demo --neo4j` writes the demo's memory there (it must hold no runs).")
    if neo4j:  # the Browser shows the demo's memory only when it is there
        from htam_graph.demo import BROWSER_QUERY, browser_url

        uri = cfg.neo4j_uri or "bolt://127.0.0.1:7687"  # the store's default
        console.print(f"Neo4j Browser: {browser_url(uri)}  (user {escape(cfg.neo4j_user)}); paste:")
        console.print(BROWSER_QUERY, highlight=False, markup=False)
    if record is not None:
        console.print(f"replay file written: {escape(str(record))}", highlight=False, soft_wrap=True)
