"""The seed memory bank: versioned YAML of global directions, local strategies and
transition priors, validated on load so a malformed file names the bad field."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, model_validator

from htam_graph.memory.models import ID_PATTERN, LOCAL_ID_PATTERN, GlobalNode, LocalNode, Transition
from htam_graph.vocab import OperatorFamily
from htam_graph.yamlfile import load_yaml

DEFAULT_BANK = Path(__file__).with_name("seed_bank.yaml")


class SeedGlobal(BaseModel, extra="forbid"):
    id: str = Field(pattern=ID_PATTERN)
    name: str
    intent: str
    goals: list[str]
    triggers: list[str]
    risks: list[str]
    prior: float = Field(0.0, ge=-1.0, le=1.0)


class SeedLocal(BaseModel, extra="forbid", populate_by_name=True):
    id: str = Field(pattern=LOCAL_ID_PATTERN)
    global_: str = Field(alias="global")
    name: str
    pattern: str
    checks: list[str]
    pitfalls: list[str]
    applies_to: list[OperatorFamily] = Field(default_factory=list)


class SeedTransition(BaseModel, extra="forbid", populate_by_name=True):
    from_: str = Field(alias="from")
    to: str
    when: str
    rationale: str
    risks: list[str] = Field(default_factory=list)
    prior: float = Field(ge=-1.0, le=1.0, description="expected reward of this move, in reward units")


class SeedBank(BaseModel, extra="forbid", allow_inf_nan=False):
    version: int
    name: str
    transition_prior_strength: float = Field(
        2.0, ge=0.0, description="pseudo-observations each transition prior is worth (docs/method.md)"
    )
    globals: list[SeedGlobal]
    locals: list[SeedLocal]
    transitions: list[SeedTransition] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> SeedBank:
        ids = [g.id for g in self.globals]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate global ids")
        local_ids = [loc.id for loc in self.locals]
        if len(set(local_ids)) != len(local_ids):
            raise ValueError("duplicate local ids")
        for i, loc in enumerate(self.locals):
            if loc.global_ not in ids:
                raise ValueError(f"locals[{i}].global: unknown global {loc.global_!r}")
            if not loc.id.startswith(loc.global_ + "."):
                raise ValueError(f"locals[{i}].id: {loc.id!r} must start with '{loc.global_}.'")
        for i, t in enumerate(self.transitions):
            for end in (t.from_, t.to):
                if end not in ids:
                    raise ValueError(f"transitions[{i}]: unknown global {end!r}")
        return self

    def global_nodes(self) -> list[GlobalNode]:
        return [GlobalNode(**g.model_dump()) for g in self.globals]

    def local_nodes(self) -> list[LocalNode]:
        return [LocalNode(global_id=loc.global_, **loc.model_dump(exclude={"global_"})) for loc in self.locals]

    def transition_priors(self) -> list[Transition]:
        return [
            Transition(
                source=t.from_,
                target=t.to,
                when=t.when,
                rationale=t.rationale,
                risks=t.risks,
                prior=t.prior,
                prior_n=self.transition_prior_strength,
            )
            for t in self.transitions
        ]


def load_seed_bank(path: Path | None = None) -> SeedBank:
    """Load and validate a seed bank; any problem is a UserError naming file and field."""
    return load_yaml(Path(path) if path else DEFAULT_BANK, SeedBank, "seed bank", "fix the YAML or pass another file")
