"""The typed user errors (htam_graph/errors.py) and the exit code the CLI gives each."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import click
import pytest

import htam_graph.cli as cli_module
from htam_graph.bench.executor import user_failure
from htam_graph.errors import (
    ERROR_TYPES,
    BackendError,
    BadInput,
    CandidateError,
    ConfigError,
    StoreError,
    StoreStateError,
    TaskError,
    UserError,
    error_type,
)
from htam_graph.llm.base import LLMUnavailable
from htam_graph.memory.store import StepConflict, UnfinishedOperation

EXIT_CODES = {
    UserError: 2,
    BadInput: 2,
    ConfigError: 2,
    TaskError: 2,
    CandidateError: 2,
    StoreStateError: 2,
    StoreError: 3,
    BackendError: 4,
}


def test_every_error_is_a_user_error_with_its_exit_code():
    assert set(EXIT_CODES) == set(ERROR_TYPES.values())
    for cls, code in EXIT_CODES.items():
        assert issubclass(cls, UserError) and cls.exit_code == code, cls
    assert issubclass(StoreStateError, StoreError)  # `except StoreError` catches both
    assert issubclass(StepConflict, BadInput) and issubclass(UnfinishedOperation, StoreStateError)


def test_errors_keep_their_fields_and_message():
    e = BadInput("--run-id 'a b': use letters", option="--run-id", value="a b")
    assert (e.option, e.value, e.path, str(e), e.message) == ("--run-id", "a b", None, e.message, str(e))
    assert ConfigError("x", setting="HTAM_NVCC", value="/no").setting == "HTAM_NVCC"
    assert TaskError("x", task="level1/1", path="p.py", line=3).line == 3
    assert CandidateError("x", path="c.py", value="fmt").path == "c.py"
    assert StoreError("x", store="bolt://h:1").store == "bolt://h:1"
    assert BackendError("x", backend="openai", model="m", status=429).status == 429


@pytest.mark.parametrize(
    "error",
    [
        BadInput("bad", option="--gpus", value="x", path=Path("/tmp/f")),
        StoreError("down", store="bolt://127.0.0.1:1"),
        BackendError("quota", backend="openai", model="m", status=402),
        UserError("plain"),
    ],
)
def test_errors_pickle_with_their_fields(error):
    """A bench worker's error crosses a process boundary."""
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and str(back) == str(error) and back.__dict__ == error.__dict__


def test_with_message_keeps_the_type_and_fields():
    e = StoreError("lost the connection", store="bolt://h:1")
    more = e.with_message(f"{e}; run `htam memory reset`")
    assert type(more) is StoreError and more.store == "bolt://h:1" and str(more).endswith("reset`")
    assert str(e) == "lost the connection"


@pytest.mark.parametrize(
    ("error", "name"),
    [
        (BackendError("quota"), "BackendError"),
        (LLMUnavailable("529 after 3 retries"), "BackendError"),
        (StepConflict("step 's1' was recorded before"), "BadInput"),  # a subclass: its listed parent
        (UserError("plain"), "UserError"),
    ],
)
def test_a_bench_workers_error_keeps_its_exit_code(error, name):
    """A worker's error reaches the bench (another process) by name; the bench raises that type."""
    event = user_failure("worker0", error)
    assert (event.error, event.message, event.user_error) == (name, str(error), True)
    assert error_type(event.error).exit_code == (4 if name == "BackendError" else 2)


def test_error_type_by_name():
    assert error_type("BackendError") is BackendError
    assert error_type(None) is UserError and error_type("KeyError") is UserError


@pytest.mark.parametrize(
    ("error", "code"),
    [(cls("the bad thing; fix it"), code) for cls, code in EXIT_CODES.items()]
    + [(click.UsageError("no such option: --nope"), 2), (click.exceptions.Abort(), 1)],
)
def test_the_cli_exits_with_the_errors_code_and_one_line(monkeypatch, capsys, error, code):
    def fail(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(cli_module.cli, "main", fail)
    with pytest.raises(SystemExit) as exited:
        cli_module.main()
    assert exited.value.code == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and (err.startswith("error: ") or err == "aborted\n"), err


def htam(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "htam_graph", *args],
        cwd=cwd,
        env={**os.environ, "HTAM_LOCAL_PATH": str(cwd / "memory.sqlite"), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_exit_codes_end_to_end(tmp_path):
    """A bad setting is 2; a store that does not answer is 3 (the memory was never opened)."""
    bad_uri = htam("memory", "show", cwd=tmp_path, HTAM_NEO4J_URI="http://127.0.0.1:7474")
    assert bad_uri.returncode == 2 and "is not a Neo4j Bolt URI" in bad_uri.stderr, bad_uri.stderr
    down = htam("memory", "show", cwd=tmp_path, HTAM_NEO4J_URI="bolt://127.0.0.1:1")
    assert down.returncode == 3 and down.stderr.count("\n") == 1, down.stderr
    assert "cannot reach Neo4j at bolt://127.0.0.1:1" in down.stderr
