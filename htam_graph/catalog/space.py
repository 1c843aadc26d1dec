"""The catalog's kernel space for one task: every kernel a run can reach from the task's
base kernel by applying strategies, recorded once on a GPU (`htam catalog record`) and
replayed exactly on a CPU (`--replay TABLE`, docs/method.md "Comparing methods").

A task's space is fixed by a rule that knows nothing of any method: its family's strategies
in the catalog's own order (the first kernel's strategies, then the family's curriculum;
`space_strategies`), the first `width` of them, where `width` is the largest (up to
SPACE_WIDTH) whose closure from the base kernel holds at most `max_states` kernels. A
state is a set of knobs; its key is the sha256 of the code its knobs render (the header
and the `# catalog:` record left out), so two knob sets that make the same code are one
kernel. Every state knows, for each strategy of the space, the state that strategy leads
to (or why it does not apply), so a run over the space never needs anything outside it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from htam_graph.catalog.families import Recognition
from htam_graph.catalog.knobs import Knobs
from htam_graph.catalog.record import without_record
from htam_graph.catalog.render import Header, render_candidate
from htam_graph.catalog.strategies import CURRICULUM, FIRST_KERNEL, apply

SPACE_WIDTH = 8  # strategies a task's space offers at most
MAX_STATES = 100  # kernels a task's space holds at most
SPACE_VERSION = "space-v1"  # changes whenever the rule above changes: a table is of one version

_HEADER = re.compile(r'\A""".*?"""\n', re.DOTALL)


def kernel_code(candidate: str) -> str:
    """A catalog candidate without its header docstring and its `# catalog:` record: the code
    its knobs made, the same whatever the step that made it."""
    return without_record(_HEADER.sub("", candidate, count=1))


def kernel_key(candidate: str) -> str:
    return hashlib.sha256(kernel_code(candidate).encode()).hexdigest()[:20]


def knobs_key(knobs: Knobs) -> str:
    """A canonical name of a set of knobs: the ones that differ from the base kernel."""
    changed = knobs.changed()
    return ",".join(f"{k}={v}" for k, v in sorted(changed.items())) or "base"


def space_strategies(rec: Recognition) -> list[str]:
    """The strategies a task's space may offer, in the catalog's order for the family."""
    order: list[str] = []
    for entry in FIRST_KERNEL.get(rec.family, []):
        order.extend((entry,) if isinstance(entry, str) else entry)
    order.extend(CURRICULUM.get(rec.family, []))
    return list(dict.fromkeys(order))


@dataclass
class State:
    key: str  # kernel_key of the code
    knobs: Knobs
    path: list[str]  # the strategies that first reached it from the base kernel, in order
    depth: int
    moves: dict[str, str] = field(default_factory=dict)  # strategy -> key of the state it leads to
    blocked: dict[str, str] = field(default_factory=dict)  # strategy -> why it does not apply here


@dataclass
class Space:
    task_id: str
    family: str
    strategies: list[str]
    states: dict[str, State]  # by key, in the order they were found (breadth first)
    candidates: dict[str, str]  # key -> the candidate source (header made for the space)
    knobs_to_key: dict[str, str]  # knobs_key -> key

    @property
    def base(self) -> State:
        return next(iter(self.states.values()))

    def lookup(self, knobs: Knobs) -> State | None:
        key = self.knobs_to_key.get(knobs_key(knobs))
        return self.states.get(key) if key is not None else None


Renderer = Callable[[Knobs], str]


_SPACES: dict[str, Space] = {}


def task_space(rec: Recognition) -> Space:
    """The task's space with the defaults, built once per process (runs of a bench share it)."""
    if rec.source_sha256 not in _SPACES:
        _SPACES[rec.source_sha256] = build_space(rec, rec.source_sha256)
    return _SPACES[rec.source_sha256]


def build_space(rec: Recognition, task_id: str, max_states: int = MAX_STATES, width: int = SPACE_WIDTH) -> Space:
    """The task's space: the widest prefix of its strategies whose closure fits."""
    rendered: dict[str, str] = {}

    def render(knobs: Knobs) -> str:
        name = knobs_key(knobs)
        if name not in rendered:
            rendered[name] = render_candidate(rec, knobs, Header("catalog-space", rec.describe(), [], [], []))
        return rendered[name]

    order = space_strategies(rec)
    for w in range(min(width, len(order)), 0, -1):
        space = _closure(rec, task_id, order[:w], render, max_states)
        if space is not None:
            return space
    space = _closure(rec, task_id, [], render, max_states)
    assert space is not None  # the base kernel alone always fits
    return space


def _closure(rec: Recognition, task_id: str, strategies: list[str], render: Renderer, max_states: int) -> Space | None:
    """Breadth-first closure from the base kernel; None when it holds more than max_states."""
    base = Knobs()
    base_key = kernel_key(render(base))
    states = {base_key: State(base_key, base, [], 0)}
    knobs_to_key = {knobs_key(base): base_key}
    frontier = [states[base_key]]
    while frontier:
        nxt: list[State] = []
        for state in frontier:
            for sid in strategies:
                result = apply(rec, state.knobs, sid, render)
                if result.reason:
                    state.blocked[sid] = result.reason
                    continue
                name = knobs_key(result.knobs)
                key = knobs_to_key.get(name) or kernel_key(render(result.knobs))
                knobs_to_key[name] = key
                state.moves[sid] = key
                if key not in states:
                    if len(states) >= max_states:
                        return None
                    states[key] = State(key, result.knobs, [*state.path, sid], state.depth + 1)
                    nxt.append(states[key])
        frontier = nxt
    candidates = {key: render(s.knobs) for key, s in states.items()}
    return Space(task_id, rec.family.value, strategies, states, candidates, knobs_to_key)
