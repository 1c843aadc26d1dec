"""`htam demo`: real HTAM loops on a machine with no GPU, no API key and no server.

The strategy catalog writes the kernels, the replay evaluator serves the results an H200
recorded for exactly these runs (htam_graph/catalog/replay/), and a fresh embedded memory
(the demo's own file, never the user's memory) learns from them. Everything is
deterministic: run ids are fixed, the policy's draws are seeded, so a replayed demo takes
the recorded path step for step. `--record FILE` runs the same demo on a GPU with the real
judge and writes the replay file.

The demo is pinned to the settings its recording was made with: the catalog's tuned start
(catalog-v1, each run's first kernel is the family's hand-tuned one) and the reward against the
run's best (reward_from = best), whatever the defaults or the environment say. Runs under the
defaults (the task's base kernel as the start, the reward against the step's parent) would
judge kernels the recording does not hold.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from htam_graph.catalog.client import CATALOG_MODEL, CatalogClient
from htam_graph.config import Settings
from htam_graph.errors import StoreStateError
from htam_graph.loop.evaluators import CandidateEvaluator, RecordingEvaluator, make_evaluator
from htam_graph.loop.records import RunSummary, StepRecord
from htam_graph.loop.setup import RunSetup
from htam_graph.memory import open_store
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.memory.store import MemoryStore
from htam_graph.tasks import Task, resolve_task
from htam_graph.vocab import Method

log = logging.getLogger(__name__)

# A handful of built-in tasks of different families: an elementwise chain, a softmax, a
# normalization, a loss and a GEMM with its epilogue.
DEFAULT_TASKS = (
    "level2/2_Swish_Bias_Scale",
    "level1/7_Softmax",
    "level1/10_RMSNorm",
    "level1/15_CrossEntropyLoss",
    "level2/3_Gemm_Bias_ReLU",
)
# The settings the shipped recording (catalog/replay/demo-h200.json.gz) was made with; every
# demo uses them, so its replay takes the recorded path and `--record` writes a file it replays.
DEMO_MODEL = CATALOG_MODEL
DEMO_REWARD_FROM = "best"
MEMORY_FILE = "memory.sqlite"
RUNS = "runs"


@dataclass
class DemoOptions:
    tasks: list[str] = field(default_factory=lambda: list(DEFAULT_TASKS))
    steps: int = 6
    methods: list[Method] = field(default_factory=lambda: [Method.HTAM])
    seed: int = 0
    out: Path = Path("htam-demo")
    neo4j: bool = False  # run on the configured Neo4j (it must hold no runs) instead of the demo's file


class TransitionRow(BaseModel):
    source: str
    target: str
    observations: int
    success_rate: float
    mean_reward: float


class DemoResult(BaseModel):
    evaluator: str
    device: str
    memory: str
    memory_command: str | None
    runs: list[RunSummary]
    transitions: list[TransitionRow]


def run_demo(
    options: DemoOptions,
    settings: Settings,
    evaluator: CandidateEvaluator,
    observe: Callable[[Task, StepRecord, RunSummary], None] | None = None,
) -> DemoResult:
    """Seed a fresh memory, run every method on every task in order, report what was learned."""
    tasks = [resolve_task(t) for t in options.tasks]
    runs = options.out / RUNS
    if runs.exists():
        shutil.rmtree(runs)  # the demo's own run folders: a demo starts from nothing
    client = CatalogClient(DEMO_MODEL)
    client.check()
    scoring = settings.scoring.model_copy(update={"reward_from": DEMO_REWARD_FROM})
    with _demo_store(options, settings) as store:
        store.seed(load_seed_bank())
        summaries = []
        with evaluator as judge:
            setup = RunSetup(store=store, client=client, judge=judge)
            for method in options.methods:
                for task in tasks:
                    run = setup.start(
                        runs,
                        task,
                        method,
                        options.seed,
                        steps=options.steps,
                        scoring=scoring,
                        run_id=run_id(task, method, options.seed),
                    )
                    summaries.append(setup.optimizer(task, run, observe=_step_view(task, observe)).run())
            device = judge.device
        transitions = learned_transitions(store)
        where = store.describe()
    local = None if options.neo4j else f"htam --store local --local-path {options.out / MEMORY_FILE} memory show"
    return DemoResult(
        evaluator=evaluator.label,
        device=device,
        memory=where,
        memory_command=local,
        runs=summaries,
        transitions=transitions,
    )


def _step_view(
    task: Task, observe: Callable[[Task, StepRecord, RunSummary], None] | None
) -> Callable[[StepRecord, RunSummary], None] | None:
    if observe is None:
        return None
    return lambda record, summary: observe(task, record, summary)


def run_id(task: Task, method: Method, seed: int) -> str:
    """Fixed, so the policy's seeded draws (by seed, run id and step) replay exactly."""
    slug = re.sub(r"[^a-z0-9]+", "-", task.id.lower()).strip("-")
    return f"demo-{slug}-{method.value}-s{seed}"


def _demo_store(options: DemoOptions, settings: Settings) -> MemoryStore:
    if options.neo4j:
        store = open_store(settings.model_copy(update={"store": "neo4j"}))
        counts = store.counts()
        if counts.get("runs") or counts.get("steps"):
            store.close()
            raise StoreStateError(
                f"the demo replays a recorded path, which needs a memory without runs; {store.describe()} holds "
                f"{counts.get('runs', 0)} runs: `htam memory reset` it first, or run the demo on its own file "
                "(without --neo4j)",
                store=store.describe(),
            )
        return store
    options.out.mkdir(parents=True, exist_ok=True)
    path = options.out / MEMORY_FILE
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)  # the demo's own memory: every demo starts from the seed bank
    return SQLiteStore(path)


def learned_transitions(store: MemoryStore) -> list[TransitionRow]:
    """The TRANSITION edges the runs used, best mean reward first."""
    rows = [
        TransitionRow(
            source=t.source,
            target=t.target,
            observations=t.n,
            success_rate=t.successes / t.n,
            mean_reward=t.reward_sum / t.n,
        )
        for t in store.get_transitions()
        if t.n > 0
    ]
    return sorted(rows, key=lambda r: (-r.mean_reward, -r.observations, r.source, r.target))


def demo_evaluator(kind: str, replay: Path, record: Path | None, command: str) -> CandidateEvaluator:
    """replay (default), stand-in (no GPU, no replay file), gpu; `record`: the GPU judge,
    writing every result into that replay file."""
    if record is not None:
        return RecordingEvaluator(record, command, make_evaluator("gpu"))
    return make_evaluator(kind, replay=replay)


def browser_url(neo4j_uri: str) -> str:
    """Neo4j Browser on the host of a bolt URI (its default HTTP port)."""
    host = re.sub(r"^[a-z+]+://", "", neo4j_uri).split("/")[0].rsplit(":", 1)[0] or "127.0.0.1"
    return f"http://{host}:7474/browser/"


BROWSER_QUERY = """MATCH (a:Global)-[e:TRANSITION]->(b:Global) WHERE e.n > 0
RETURN a.id AS from, b.id AS to, e.n AS steps, round(1.0 * e.successes / e.n, 2) AS success,
       round(e.reward_sum / e.n, 3) AS mean_reward ORDER BY mean_reward DESC;"""
