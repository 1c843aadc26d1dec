"""The one interface the optimization loop talks to, whatever answers: a prompt goes in, a
completion (text, reasoning, tokens, dollars) or a validated pydantic answer comes out.

A prompt is split the way providers cache, most stable first: `system` and `static` are
the same for every call of a run (instructions, the native-format contract, the memory bank
summary, the task), `shared` is the same for every call of a step (where the run stands:
the code the step builds on, the last candidate, their feedback), and `user` is what this
call asks. Each part is sent after the one before it, marked cacheable where the API
allows it, so a call reads from the prompt cache everything up to its own question.
"""

from __future__ import annotations

import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from types import TracebackType
from typing import ClassVar, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from htam_graph.llm.request import Request, StepView
from htam_graph.templating import Rendered

T = TypeVar("T", bound=BaseModel)


class Prompt(BaseModel):
    """What one LLM call sends. `template` names the call (the template of its user part):
    the script backend replays responses by it and run records group calls by it."""

    model_config = ConfigDict(frozen=True)

    template: str
    system: str = ""
    static: str = ""
    shared: str = ""
    user: str
    rendered: tuple[Rendered, ...] = ()
    # What the user part was rendered from, for a backend that reads the state itself rather
    # than the text (the strategy catalog; llm/request.py). Not sent, not hashed.
    context: Request | None = None

    @classmethod
    def build(
        cls,
        *,
        user: Rendered,
        system: Sequence[Rendered] = (),
        static: Sequence[Rendered] = (),
        shared: Sequence[Rendered] = (),
        context: Request | None = None,
    ) -> Prompt:
        """A prompt from rendered templates; the parts of `system`, `static` and `shared`
        are each joined by a blank line, and every template is kept in `rendered` for the
        record."""
        return cls(
            template=user.name,
            system=_join(system),
            static=_join(static),
            shared=_join(shared),
            user=user.text,
            rendered=(*system, *static, *shared, user),
            context=context,
        )

    @property
    def sha256(self) -> str:
        """A hash of everything sent: two calls with equal hashes sent the same text."""
        digest = hashlib.sha256()
        parts = (self.system, self.static, self.shared) if self.shared else (self.system, self.static)
        for part in (*parts, self.user):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()


def _join(parts: Sequence[Rendered]) -> str:
    return "\n\n".join(p.text.rstrip("\n") for p in parts)


class Usage(BaseModel):
    """Tokens and dollars of one call, or a sum of calls. `input_tokens` counts only the
    input billed at the base rate: cache reads and cache writes are counted apart (as
    Anthropic reports them; OpenAI's prompt_tokens are split to match)."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    cache_read_tokens: int = Field(0, ge=0)
    cache_write_tokens: int = Field(0, ge=0)
    # None: the model has no price in the price table, so the cost is unknown.
    cost_usd: float | None = 0.0

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=cost,
        )


class Completion(BaseModel):
    """One answer. `text` is the answer itself (for a structured call, the raw JSON of the
    answer); a reasoning model's thinking is kept apart in `reasoning`."""

    model_config = ConfigDict(frozen=True)

    text: str
    reasoning: str | None = None
    usage: Usage = Usage()
    model: str
    stop_reason: str | None = None  # as the provider names it: end_turn, max_tokens, stop, length, ...
    truncated: bool = False  # the answer hit max_tokens (or the context window) and is cut off
    request_id: str | None = None


class LLMError(Exception):
    """A call that produced no usable answer; the loop decides whether to retry or fall back."""


class InvalidAnswer(LLMError):
    """The model answered, but not with what was asked: malformed JSON, an answer cut off
    at max_tokens, a refusal, or JSON that violates the schema. The answer's text and usage
    (it was paid for) travel with the error."""

    def __init__(self, reason: str, completion: Completion) -> None:
        super().__init__(f"invalid answer from {completion.model}: {reason}")
        self.reason = reason
        self.completion = completion

    @property
    def raw(self) -> str:
        return self.completion.text

    @property
    def usage(self) -> Usage:
        return self.completion.usage


class LLMUnavailable(LLMError):
    """The endpoint kept failing with transient errors (rate limits, overload, 5xx, no
    connection, unreadable responses) after every retry."""


class RequestRejected(LLMError):
    """The endpoint refused the request itself (400, 413, 422: too long a prompt, a feature
    the model does not support); sending it again would fail again."""


class RecordedChoice(BaseModel):
    """What a recorded step chose (None where its method chooses nothing): a backend that
    replays a run names it, so the replay follows the run whatever the memory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    global_id: str | None = None
    local_id: str | None = None


class LLMClient(ABC):
    """A backend (a generator of kernels): Anthropic, an OpenAI-compatible endpoint, a
    recorded script, the strategy catalog. The loop talks to every one through this
    interface alone and never asks which one it is: what differs is declared here, as
    capabilities with defaults that fit a language model (docs/ARCHITECTURE.md).

    `check()` runs before any work so that a bad key, model or endpoint is one clear
    UserError up front, not a failure in the middle of a run."""

    name: ClassVar[str]
    model: str
    # Capabilities declared by the class:
    # - fits_task_itself: the directions and strategies it names are already those that fit
    #   the task (the catalog), so the loop does not filter its offers by the task's family;
    # - writes_reflections: it writes the reflection notes later steps read (a language model).
    fits_task_itself: ClassVar[bool] = False
    writes_reflections: ClassVar[bool] = False

    @abstractmethod
    def check(self) -> None:
        """Raise UserError naming what is wrong (key, model, endpoint) and how to fix it."""

    @abstractmethod
    def complete(self, prompt: Prompt, max_tokens: int | None = None) -> Completion:
        """Free text, e.g. a candidate file. None: the configured default max_tokens."""

    @abstractmethod
    def structured(self, prompt: Prompt, schema: type[T], max_tokens: int | None = None) -> tuple[T, Completion]:
        """An answer validated against `schema`; InvalidAnswer when it is not one."""

    def directions(self, state: StepView) -> frozenset[str] | None:
        """The global directions this backend can act on in `state` (the step's state, as
        llm/request.py reads it); None means all of them: a language model can attempt any
        direction. The policy draws only among the directions named."""
        return None

    def strategies(self, state: StepView) -> list[str] | None:
        """The local strategies this backend can apply in `state`, in its own order; None
        means any: a language model can attempt every strategy. The controls without a
        memory (random, feedback) draw among the strategies named (docs/method.md)."""
        return None

    def start_kernel(self, task_source: str) -> str | None:
        """A correct, straightforward kernel a run starts from (judged once before its first
        step, not a step), or None: the run starts from the PyTorch reference."""
        return None

    def answers(self, template: str) -> bool:
        """Whether it answers calls of `template` at all (a script answers the calls it
        recorded; the loop leaves the others to the memory)."""
        return True

    def reflects(self) -> bool:
        """Whether the loop should ask it for a reflection note after a step now."""
        return self.writes_reflections

    def recorded_choice(self, step_index: int) -> RecordedChoice | None:
        """The direction and strategy a replayed run took at step `step_index` (from 0), or
        None: the method chooses."""
        return None

    def resume(self, calls: dict[str, int]) -> None:  # noqa: B027 - a hook with a default: most backends keep no position
        """A resumed run's finished steps made `calls` calls per template: a backend that
        replays answers in order continues after them."""

    def close(self) -> None:  # noqa: B027 - a hook with a default: only HTTP backends hold connections
        """Release connections; the default has none."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


_FENCE = re.compile(r"^```[\w-]*\n(?P<body>.*)\n```$", re.DOTALL)


def parse_answer(schema: type[T], completion: Completion) -> T:
    """The completion's text as a `schema` instance, or InvalidAnswer saying why not. A
    single Markdown code fence around the JSON is tolerated: some models add one even in
    JSON mode."""
    if completion.truncated:
        where = "while still reasoning" if not completion.text.strip() else "in the answer"
        raise InvalidAnswer(f"cut off at the token limit {where} (stop reason {completion.stop_reason!r})", completion)
    if completion.stop_reason == "refusal":
        raise InvalidAnswer("the model refused", completion)
    text = completion.text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced["body"]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidAnswer(f"not JSON ({e})", completion) from None
    return validate_answer(schema, data, completion)


def validate_answer(schema: type[T], data: object, completion: Completion) -> T:
    """`data` (decoded JSON) as a `schema` instance, or InvalidAnswer naming the first
    violations."""
    try:
        return schema.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors()[:3]
        )
        raise InvalidAnswer(f"does not match {schema.__name__}: {problems}", completion) from None
