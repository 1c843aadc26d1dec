"""A bench's grid and its folder: which runs there are, what they are called, where
everything lives, and what is finished.

A bench is every task x method x seed. The runs of one method and seed form a *stream*:
they share one memory (an embedded SQLite file of their own, so a method learns only
from its own experience) and run one after another in suite order, so the memory each
run starts from is the same however many workers there are and however often the bench
was interrupted. Run ids are derived from the grid (`<task>-<method>-s<seed>-<tag>`, the
tag a hash of the bench's configuration): the same command finds its runs again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict, Field

from htam_graph import __version__
from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput
from htam_graph.files import atomic_write
from htam_graph.loop.runs import MANIFEST, new_run_id
from htam_graph.memory.models import utcnow
from htam_graph.tasks import Task
from htam_graph.vocab import Method

log = logging.getLogger(__name__)

TRAJECTORY = "trajectory.json"  # written by the loop when a run has ended


class TaskEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    level: int | None
    path: str
    sha256: str

    @classmethod
    def of(cls, task: Task) -> TaskEntry:
        return cls(id=task.id, level=task.level, path=str(task.path), sha256=task.sha256)


class MemorySource(BaseModel):
    """An exported memory every stream starts from (`--memory-from`)."""

    model_config = ConfigDict(frozen=True)

    path: str
    sha256: str = Field(description="of the file (or the folder's files): a continuing bench stops if it changed")
    content: str = Field(
        "", description="of the memory without its timestamps: what the runs start from, part of the bench's tag"
    )


class BenchConfig(BaseModel):
    """Everything that decides what a bench runs. Continuing a bench (the same command
    with the same --out) must ask for exactly this again."""

    model_config = ConfigDict(frozen=True)

    suite: str = Field(description="SUITE as given, with --level and --filter")
    tasks: list[TaskEntry]
    methods: list[Method]
    seeds: list[int]
    steps: int
    scoring: ScoringParams
    llm: str = Field(description="backend:model")
    evaluator: str = Field(description="gpu, stand-in or replay")
    compile_reference: bool = Field(description="torch.compile of each reference timed too (GPU)")
    max_cost: float | None = Field(description="dollars after which a run ends")
    memory_from: MemorySource | None
    sandbox: bool = Field(
        False,
        description="generated code and its builds judged confined (--sandbox); False: unconfined, with the "
        "user's privileges (so were benches before the field)",
    )

    @property
    def tag(self) -> str:
        """A hash of what decides the runs' outcomes. Run ids end in it, and the policy's draws
        and a replay's timings are seeded by the run id, so the tag leaves out what decides
        nothing: where the checkout and the --memory-from file lie (the SUITE as typed too:
        the tasks' ids and hashes stand for it), and that file's digest (its
        timestamps differ from one training run to the next; `content` is the memory without
        them). The same command then gives the same runs from any clone. The methods and seeds
        benched beside a run are left out too (a run id names its own method and seed): a
        method's runs are the same whichever others run with it, and 20 seeds are the first 20
        of 50. A bench keeps the tag it was made with (BenchManifest.tag): one begun before
        this rule continues as it was."""
        exclude: dict[str, Any] = {"suite": True, "tasks": {"__all__": {"path"}}, "methods": True, "seeds": True}
        if not self.sandbox:  # the tag as before `sandbox` was a field
            exclude["sandbox"] = True
        if self.memory_from is not None:
            exclude["memory_from"] = {"path", "sha256"}
        dump = self.model_dump_json(exclude=exclude)
        return hashlib.sha256(dump.encode()).hexdigest()[:6]


class BenchManifest(BaseModel):
    """bench.json: the grid of the bench in this folder."""

    format: Literal["htam-graph/bench"] = "htam-graph/bench"
    version: int = 1
    tag: str
    config: BenchConfig
    note: str = Field("", description="a line of the user's, shown at the top of the report")
    created_at: datetime = Field(default_factory=utcnow)
    htam_version: str = __version__

    @classmethod
    def read(cls, layout: Layout) -> BenchManifest:
        if not layout.manifest.is_file():
            raise BadInput(
                f"{layout.out} holds no bench ({layout.manifest.name} is missing); give the bench's --out",
                option="--out",
                path=layout.out,
            )
        return cls.model_validate_json(layout.manifest.read_text())


class RunSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    task_id: str
    method: Method
    seed: int
    run_id: str


class Stream(BaseModel):
    """The runs of one method and seed over every task, in suite order, sharing one memory."""

    model_config = ConfigDict(frozen=True)

    method: Method
    seed: int
    runs: list[RunSpec]

    @property
    def name(self) -> str:
        return f"{self.method.value}-s{self.seed}"


class Layout:
    """Where a bench keeps what (docs/bench.md, "The output folder")."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.manifest = out / "bench.json"
        self.lock = out / ".lock"
        self.runs = out / "runs"
        self.memory = out / "memory"
        self.results = out / "results"
        self.report = out / "report.md"
        self.plots = out / "plots"
        self.judged = out / "judged"

    def run(self, spec: RunSpec) -> Path:
        return self.runs / spec.run_id

    def store(self, stream: Stream) -> Path:
        return self.memory / f"{stream.name}.sqlite"

    def export(self, stream: Stream) -> Path:
        """The stream's memory after its last run, as `htam memory export` writes it."""
        return self.memory / f"{stream.name}.json"

    def run_done(self, spec: RunSpec) -> bool:
        return (self.run(spec) / TRAJECTORY).is_file()

    def run_started(self, spec: RunSpec) -> bool:
        return (self.run(spec) / MANIFEST).is_file()

    def stream_done(self, stream: Stream) -> bool:
        return all(self.run_done(spec) for spec in stream.runs) and self.export(stream).is_file()


def streams(config: BenchConfig, tag: str | None = None) -> list[Stream]:
    """Every stream of the grid, seed by seed, in the order of --method; run ids end in `tag`
    (a bench's manifest's, so that a bench continues under the tag it began with), else the
    configuration's."""
    tag = tag or config.tag
    return [
        Stream(
            method=method,
            seed=seed,
            runs=[
                RunSpec(task_id=t.id, method=method, seed=seed, run_id=new_run_id(t.id, method, seed, tag))
                for t in config.tasks
            ],
        )
        for seed in config.seeds
        for method in config.methods
    ]


def open_manifest(layout: Layout, config: BenchConfig, note: str | None) -> BenchManifest:
    """The folder's bench: a new one, or the one there when it asks for the same grid."""
    if layout.manifest.is_file():
        manifest = BenchManifest.read(layout)
        if manifest.config != config:
            raise BadInput(
                f"{layout.out} holds another bench: {_difference(manifest.config, config)}; "
                "give the same settings to continue it, or another --out",
                option="--out",
                path=layout.out,
            )
        if note is None or note == manifest.note:
            return manifest
        manifest = manifest.model_copy(update={"note": note})
        log.info("the bench in %s continues with a new note", layout.out)
    else:
        manifest = BenchManifest(tag=config.tag, config=config, note=note or "")
    atomic_write(layout.manifest, manifest.model_dump_json(indent=1))
    return manifest


def _difference(old: BenchConfig, new: BenchConfig) -> str:
    for name in BenchConfig.model_fields:
        was, now = getattr(old, name), getattr(new, name)
        if was != now:
            if name == "tasks":
                return f"its tasks: {_ids(was)}; this command's: {_ids(now)} (or a task file changed)"
            return f"its {name}: {_show(was)}; this command's: {_show(now)}"
    raise AssertionError("configurations differ in no field")


def _ids(tasks: list[TaskEntry]) -> str:
    ids = [t.id for t in tasks]
    return ", ".join(ids[:4]) + (f" and {len(ids) - 4} more" if len(ids) > 4 else "")


def _show(value: object) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return str(value)


@contextmanager
def exclusive(lock: Path, what: str, wait: bool) -> Iterator[None]:
    """Hold `lock` (a file) exclusively: a second bench on the same folder, or a worker of
    an earlier bench still finishing a stream, must not run the same runs. `wait`: block
    until it is free (with a log line), else a BadInput when it is held."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    held = FileLock(lock, mode=0o644, thread_local=False)
    try:
        held.acquire(blocking=False)
    except Timeout:
        if not wait:
            raise BadInput(
                f"{what} is in use by another htam bench ({lock} is locked); wait for it", path=lock
            ) from None
        log.info("waiting for %s, held by an earlier worker", what)
        held.acquire()
    try:
        yield
    finally:
        held.release()
