"""Responses replayed from a file instead of asked of an LLM: to reproduce a recorded run
exactly, and to drive the loop end to end with kernels a person wrote.

The file (YAML, or JSON, which YAML reads too) lists responses; each names the template
of the call it answers and is consumed in order among the responses for that template:

    responses:
      - template: generate            # the Prompt.template of the call
        file: kernels/relu_v1.py      # the answer's text, read from a file next to the script
      - template: generate
        text: |                       # ... or inline
          import torch
          ...
      - template: reflect
        answer: {summary: vectorized loads helped, keep: true}   # a structured answer
        reasoning: optional thinking, kept with the completion
        truncated: true               # optional: the answer was cut off at max_tokens

A run folder's responses.yaml also records the run's path, so that replaying it takes the
same directions and strategies whatever the memory now holds and whatever the run is named
(the policy's draws depend on both), and the kernel it started from, if any:

    start: |                          # optional: the start kernel the backend gave
      import torch ...
    steps:                            # optional: per step, in order, what the method chose
      - {global_id: memory_access, local_id: memory_access.vectorized_float4}

A structured call takes `answer` (validated against the call's schema) or a `text` that
must parse as that answer, so a recorded invalid answer fails again on replay. Usage and
cost are zero. `ScriptWriter` writes a run's responses in this format as they come.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import BaseModel, ConfigDict, model_validator

from htam_graph.errors import BadInput
from htam_graph.files import atomic_write
from htam_graph.llm.base import Completion, LLMClient, Prompt, RecordedChoice, T, parse_answer, validate_answer
from htam_graph.yamlfile import load_yaml

logger = logging.getLogger(__name__)


class ScriptEntry(BaseModel):
    """One response: exactly one of `text`, `file` (a path relative to the script file)
    and `answer` (a structured answer)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    template: str
    text: str | None = None
    file: str | None = None
    answer: dict[str, Any] | None = None
    reasoning: str | None = None
    truncated: bool = False  # the recorded answer hit max_tokens; the replay says so too

    @model_validator(mode="after")
    def _one_response(self) -> Self:
        given = [k for k in ("text", "file", "answer") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of text, file, answer (got {', '.join(given) or 'none'})")
        return self


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid")

    responses: list[ScriptEntry] = []
    start: str | None = None
    steps: list[RecordedChoice] = []  # what each recorded step chose

    def write(self, path: Path) -> None:
        """Write the script atomically (a reader sees the old file or the new one), code
        as literal blocks a person can read and edit."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        atomic_write(path, yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=1 << 16))


class ScriptClient(LLMClient):
    """Replays a script file. Every `file` is read when the script loads, so a missing one
    is reported before the run starts."""

    name = "script"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.model = path.name
        # Per template, its responses in order, each with its text (from `file` too) or answer.
        self._queues: dict[str, list[ScriptEntry]] = {}
        for entry in (loaded := _load(path)).responses:
            if entry.file is not None:
                entry = entry.model_copy(update={"text": _read_side_file(path, entry.file), "file": None})
            self._queues.setdefault(entry.template, []).append(entry)
        self._used: dict[str, int] = {}
        self._start, self._steps = loaded.start, loaded.steps
        self._lock = threading.Lock()  # concurrent calls must not replay one response twice

    def check(self) -> None:
        """Loading the script checked it."""

    def complete(self, prompt: Prompt, max_tokens: int | None = None) -> Completion:
        return self._completion(self._next(prompt.template))

    def structured(self, prompt: Prompt, schema: type[T], max_tokens: int | None = None) -> tuple[T, Completion]:
        entry = self._next(prompt.template)
        completion = self._completion(entry)
        if entry.answer is None:
            return parse_answer(schema, completion), completion
        return validate_answer(schema, entry.answer, completion), completion

    def start_kernel(self, task_source: str) -> str | None:
        """The recorded run's start kernel, when it had one."""
        return self._start

    def recorded_choice(self, step_index: int) -> RecordedChoice | None:
        """What step `step_index` (from 0) of the recorded run chose; None when not recorded."""
        return self._steps[step_index] if step_index < len(self._steps) else None

    def answers(self, template: str) -> bool:
        """Whether the script answers calls of `template` at all."""
        return template in self._queues

    def reflects(self) -> bool:
        """A script writes reflections only when it recorded some still to replay."""
        return self.remaining("reflect") > 0

    def remaining(self, template: str) -> int:
        """Responses for `template` not replayed yet."""
        with self._lock:
            return len(self._queues.get(template, [])) - self._used.get(template, 0)

    def resume(self, calls: dict[str, int]) -> None:
        """Mark responses as replayed already: a resumed run continues after the calls its
        finished steps made (`calls`: calls per template)."""
        with self._lock:
            for template, count in calls.items():
                if count > len(self._queues.get(template, [])):
                    raise BadInput(
                        f"script {self.path} has {len(self._queues.get(template, []))} responses for "
                        f"{template!r}, but the run being resumed already made {count} such calls",
                        option="--script",
                        value=template,
                        path=self.path,
                    )
                self._used[template] = count

    def _next(self, template: str) -> ScriptEntry:
        with self._lock:
            queue = self._queues.get(template, [])
            used = self._used.get(template, 0)
            if used >= len(queue):
                raise BadInput(
                    f"script {self.path} has no more responses for template {template!r} "
                    f"({used} given); add responses to it or shorten the run",
                    option="--script",
                    value=template,
                    path=self.path,
                )
            self._used[template] = used + 1
        logger.debug("script %s: response %d of %d for %s", self.path, used + 1, len(queue), template)
        return queue[used]

    def _completion(self, entry: ScriptEntry) -> Completion:
        text = entry.text if entry.text is not None else json.dumps(entry.answer)
        return Completion(
            text=text, reasoning=entry.reasoning, model=self.model, stop_reason="script", truncated=entry.truncated
        )


class ScriptWriter:
    """Records a run's responses as a script. The file is rewritten whole (atomically)
    after every response, so a run that dies leaves a script that replays it up to there."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._script = Script()

    def record(self, prompt: Prompt, completion: Completion, answer: BaseModel | None = None) -> None:
        """Add the response to `prompt`: a structured call's validated `answer`, or else the
        completion's text (which is also how an invalid structured answer is kept)."""
        response = {"answer": answer.model_dump(mode="json")} if answer is not None else {"text": completion.text}
        entry = ScriptEntry(
            template=prompt.template, **response, reasoning=completion.reasoning, truncated=completion.truncated
        )
        self._script.responses.append(entry)
        self._script.write(self.path)


class _BlockDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Writes multi-line strings (code) as literal blocks a person can read and edit; with
    libyaml's emitter where PyYAML has it (the pure-Python one took half of a replayed run)."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_BlockDumper.add_representer(str, _str)


def _load(path: Path) -> Script:
    return load_yaml(path, Script, "script", "see htam_graph/llm/script.py for the format")


def _read_side_file(script: Path, name: str) -> str:
    path = script.parent / name
    try:
        return path.read_text()
    except OSError as e:
        raise BadInput(
            f"script {script}: cannot read {name} ({path}: {e.strerror})", option="--script", path=path
        ) from None
