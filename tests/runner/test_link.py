"""The referee's side of the channel to a candidate's process: only what the judge's own
harness sends gets through (CPU; the channel is a pipe, no CUDA is touched)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from multiprocessing import Pipe

import pytest
import torch

from htam_graph.runner.forkserver import CandidateProcess
from htam_graph.runner.ipc import ProtocolViolation
from htam_graph.runner.protocol import MAX_REPLY_BYTES, Finish, Finished, Free, Freed
from htam_graph.runner.referee.candidate import CandidateDied, Stop
from htam_graph.runner.referee.link import ProcessLink
from htam_graph.vocab import Verdict


@pytest.fixture
def channel():
    ours, theirs = Pipe()
    link = ProcessLink(CandidateProcess(pid=0, conn=ours, start_seconds=0.0, wait_seconds=0.0), torch.device("cpu"))
    yield link, theirs
    theirs.close()


def _later() -> float:
    return time.monotonic() + 5.0


def test_a_valid_reply_of_the_expected_kind_is_returned(channel):
    link, theirs = channel
    theirs.send_bytes(json.dumps({"kind": "finished", "health": {"tampered": [], "concurrency": ""}}).encode())
    assert isinstance(link.request(Finish(), Finished, _later()), Finished)
    assert isinstance(theirs.recv(), Finish)  # commands are pickled: the candidate trusts the referee


@pytest.mark.parametrize(
    "reply",
    [
        b"not json",
        json.dumps({"kind": "freed", "extra": 1}).encode()[:-1],  # truncated
        json.dumps({"kind": "finished", "health": {"tampered": ["x" * 400]}}).encode(),  # over a field's limit
        json.dumps({"kind": "freed"}).encode(),  # the wrong kind for the command
        json.dumps({"kind": "failed", "verdict": "ok", "errors": ""}).encode(),  # a verdict it may not claim
        json.dumps(
            {
                "kind": "allocated",
                "tensors": [{"handle": "zz", "base": 0, "offset": 0, "shape": [1], "stride": [1], "dtype": "float32"}],
            }
        ).encode(),
    ],
)
def test_anything_else_is_a_protocol_violation(channel, reply):
    link, theirs = channel
    theirs.send_bytes(reply)
    with pytest.raises(ProtocolViolation):
        link.request(Finish(), Finished, _later())


def test_a_reply_over_the_size_limit_is_a_protocol_violation(channel):
    link, theirs = channel

    def send() -> None:
        with contextlib.suppress(OSError):  # we stop reading after the length: the rest is refused
            theirs.send_bytes(b" " * (MAX_REPLY_BYTES + 1))

    sender = threading.Thread(target=send)
    sender.start()  # a pipe holds less than the reply: the sender blocks until we read
    with pytest.raises(ProtocolViolation, match="more than"):
        link.request(Free(), Freed, _later())
    link.conn.close()
    sender.join(timeout=5)


def test_its_own_failure_ends_the_job_with_that_verdict(channel):
    link, theirs = channel
    theirs.send_bytes(json.dumps({"kind": "failed", "verdict": "runtime_error", "errors": "forward raised"}).encode())
    with pytest.raises(Stop) as stop:
        link.request(Finish(), Finished, _later())
    assert stop.value.verdict == Verdict.RUNTIME_ERROR and stop.value.errors == "forward raised"


def test_silence_past_the_deadline_is_a_timeout_and_a_closed_channel_a_death(channel):
    link, theirs = channel
    with pytest.raises(Stop) as stop:
        link.request(Finish(), Finished, time.monotonic() + 0.05)
    assert stop.value.verdict == Verdict.TIMEOUT
    theirs.close()
    with pytest.raises(CandidateDied):
        link.request(Finish(), Finished, _later())
