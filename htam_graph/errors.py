"""Errors a user can fix or must wait out. The CLI prints each as one line, `error: ...`,
and exits with its class's `exit_code`:

    UserError            2  the base: catch it to catch them all
      BadInput           2  a flag, argument or input file (seed, export, script, replay, suite)
      ConfigError        2  a setting, the settings file, or the machine (nvcc, GPU, Docker)
      TaskError          2  a task file or task id
      CandidateError     2  a candidate kernel file given to `htam eval`
      StoreError         3  the memory (Neo4j or the local file) is unreachable or failing
        StoreStateError  2  the memory is not in the state the command needs (empty, not
                            empty for an import, an unfinished import or reset): run the
                            command the message names
      BackendError       4  the LLM endpoint: unreachable, overloaded past the retries,
                            refusing the account or the request

2 is "fix what you typed or configured, or run the command named"; 3 and 4 are
"something outside failed", which a script may retry or report. Each error keeps what it
is about (the option, value, setting, task, path, store, backend) as attributes, None
when not known; the message names the bad thing and how to fix it. Errors pickle with
their attributes (a bench worker's travel to the parent).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Self


class UserError(Exception):
    """Bad input or environment: the message names the bad thing and how to fix it."""

    exit_code: ClassVar[int] = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def with_message(self, message: str) -> Self:
        """The same error (class and attributes) saying `message`: for adding context."""
        copy = type(self).__new__(type(self))
        copy.args = (message,)
        copy.__dict__.update(self.__dict__)
        return copy


class BadInput(UserError):
    """A flag, argument or input file is wrong: `option` (e.g. "--run-id"), the bad `value`,
    the `path` of a bad file."""

    def __init__(
        self, message: str, *, option: str | None = None, value: object = None, path: Path | str | None = None
    ) -> None:
        super().__init__(message)
        self.option = option
        self.value = value
        self.path = path


class ConfigError(UserError):
    """A setting (`setting`: the variable or flag, e.g. "HTAM_NEO4J_URI", with its `value`),
    the settings file (`path`), or something the machine lacks (nvcc, a GPU, Docker)."""

    def __init__(
        self, message: str, *, setting: str | None = None, value: object = None, path: Path | str | None = None
    ) -> None:
        super().__init__(message)
        self.setting = setting
        self.value = value
        self.path = path


class TaskError(UserError):
    """A task: `task` (the id or text given), its file `path` and `line` when known."""

    def __init__(
        self, message: str, *, task: str | None = None, path: Path | str | None = None, line: int | None = None
    ) -> None:
        super().__init__(message)
        self.task = task
        self.path = path
        self.line = line


class CandidateError(UserError):
    """A candidate kernel given to `htam eval`: its file `path`, the bad `value` (a format)."""

    def __init__(self, message: str, *, path: Path | str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.path = path
        self.value = value


class StoreError(UserError):
    """The memory store failed or cannot serve the command: `store` names it (a Neo4j URI,
    a local file, or its `describe()`)."""

    exit_code: ClassVar[int] = 3

    def __init__(self, message: str, *, store: str | None = None) -> None:
        super().__init__(message)
        self.store = store


class StoreStateError(StoreError):
    """The memory is not in the state the command needs: empty (`htam memory seed`), not
    empty for an import, holding an unfinished import or reset (`htam memory reset`)."""

    exit_code: ClassVar[int] = 2


class BackendError(UserError):
    """The LLM backend failed: `backend` (its name), `model`, the HTTP `status` when one came."""

    exit_code: ClassVar[int] = 4

    def __init__(
        self, message: str, *, backend: str | None = None, model: str | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.backend = backend
        self.model = model
        self.status = status


ERROR_TYPES: dict[str, type[UserError]] = {
    cls.__name__: cls
    for cls in (
        UserError,
        BadInput,
        ConfigError,
        TaskError,
        CandidateError,
        StoreError,
        StoreStateError,
        BackendError,
    )
}


def error_type(name: str | None) -> type[UserError]:
    """The class of that name (as a bench worker reports it); UserError for any other."""
    return ERROR_TYPES.get(name or "", UserError)
