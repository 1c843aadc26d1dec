"""What the harness checks inside a candidate's process, on CPU tensors: the op recorder,
the held-stream arithmetic, and the integrity of the process."""

from __future__ import annotations

import signal
import sys

import pytest
import torch

from htam_graph.runner.harness import probes
from htam_graph.runner.protocol import SHORT_TEXT


def test_the_op_recorder_allows_allocation_and_views_only():
    x = torch.randn(4, 4)
    with probes.OpRecorder() as recorder:
        y = torch.empty_like(x)
        y.view(16).zero_()
        x.t().contiguous()
    assert recorder.disallowed() == []
    with probes.OpRecorder() as recorder:
        torch.relu(x)
        x @ x
    assert recorder.disallowed() == ["aten.relu", "aten.mm"]


def test_early_fraction_counts_only_elements_the_call_changed():
    before = torch.tensor([0.0, 1.0, 2.0, 3.0])
    out = torch.tensor([0.0, 5.0, 6.0, 7.0])  # element 0 did not change, so it says nothing
    assert probes.early_fraction([before.clone()], [out], [before]) == 0.0  # stale buffer: honest
    assert probes.early_fraction([out.clone()], [out], [before]) == 1.0  # already final: off-stream work
    half = torch.tensor([0.0, 5.0, 2.0, 3.0])
    assert probes.early_fraction([half], [out], [before]) == pytest.approx(1 / 3)
    assert probes.early_fraction([out.clone()], [out], [out.clone()]) == 0.0  # nothing changed at all


class _Judge:
    def step(self) -> int:
        return 1

    @classmethod
    def build(cls) -> _Judge:
        return cls()


@pytest.fixture
def integrity():
    from pydantic import BaseModel

    return probes.Integrity(modules=[probes], classes=[_Judge, BaseModel], instances=[_Judge()])


def test_a_clean_process_reports_nothing(integrity):
    assert integrity.check() == []
    assert integrity.concurrency() == ""


def test_replaced_and_shadowed_functions_are_reported(integrity, monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(probes, "poison_memory", lambda *a, **k: None)
    monkeypatch.setattr(_Judge, "step", lambda self: 2)
    monkeypatch.setattr(integrity.instances[0], "step", lambda: 3, raising=False)
    found = integrity.check()
    assert "replaced torch.cuda.synchronize" in found
    assert "replaced htam_graph.runner.harness.probes.poison_memory" in found
    assert "replaced _Judge.step" in found
    assert "shadowed _Judge.step" in found


def test_hooks_traces_signals_and_precision_flags_are_reported(integrity):
    handle = torch.nn.modules.module.register_module_forward_hook(lambda *a: None)
    previous = signal.signal(signal.SIGUSR1, lambda *a: None)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    sys.settrace(lambda *a: None)
    torch.backends.cuda.matmul.allow_tf32 = not tf32
    try:
        found = integrity.check()
    finally:
        sys.settrace(None)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        signal.signal(signal.SIGUSR1, previous)
        handle.remove()
    assert any(f.startswith("registered global module hooks") for f in found)
    assert "installed a trace or profile function" in found
    assert f"installed a handler for signal {int(signal.SIGUSR1)}" in found
    assert "changed torch.backends.cuda.matmul.allow_tf32" in found
    assert integrity.check() == []


def test_threads_left_running_are_reported(integrity):
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert integrity.concurrency() == "1 new thread(s)"
    finally:
        stop.set()
        thread.join()


MONITORING = getattr(sys, "monitoring", None)  # Python 3.12+


def test_sys_monitoring_is_only_read(integrity):
    """On Python 3.11 there is nothing to read; where sys.monitoring exists, reading it
    registers nothing, and a process the candidate did not touch reports nothing."""
    code = {"step": _Judge.step.__code__}
    state = probes.monitoring_state(code)
    if MONITORING is None:
        assert state == {}
    else:
        assert {key[:2] for key in state} >= {(what, tool) for what in ("tool", "events") for tool in range(6)}
        assert probes.monitoring_state(code) == state
    assert integrity.check() == []


def test_sys_monitoring_entries_fit_a_reply():
    """A tool's name is the candidate's to choose: the entry stays within the reply's limit."""
    found = probes.monitoring_changes({("tool", 2, ""): None}, {("tool", 2, ""): "x" * 10_000})
    assert len(found) == 1 and found[0].startswith("registered a sys.monitoring tool (id 2, name 'xxx")
    assert len(found[0]) < SHORT_TEXT


class _FakeMonitoring:
    """sys.monitoring's read side as Python 3.12 has it, on any Python: the report's logic
    runs in CI (Python 3.11), the real API in the test below."""

    class events:  # as sys.monitoring names it
        PY_START, PY_RETURN, CALL = 1, 2, 16

    def __init__(self) -> None:
        self.tools: dict[int, str] = {}
        self.global_events: dict[int, int] = {}
        self.local: dict[tuple[int, object], int] = {}

    def get_tool(self, tool: int) -> str | None:
        return self.tools.get(tool)

    def get_events(self, tool: int) -> int:
        return self.global_events.get(tool, 0)

    def get_local_events(self, tool: int, code: object) -> int:
        return self.local.get((tool, code), 0)


def test_the_report_names_sys_monitoring_tools_and_events(monkeypatch):
    fake = _FakeMonitoring()
    monkeypatch.setattr(probes, "_MONITORING", fake)
    from pydantic import BaseModel

    integrity = probes.Integrity(modules=[probes], classes=[_Judge, BaseModel], instances=[_Judge()])
    assert integrity.check() == []
    fake.tools[3], fake.global_events[3] = "candidate", fake.events.PY_RETURN
    found = integrity.check()
    assert "registered a sys.monitoring tool (id 3, name 'candidate')" in found
    assert "set the sys.monitoring events of tool 3 to PY_RETURN" in found
    # Local events on the harness's own code, with the tool id freed to look unused.
    del fake.tools[3], fake.global_events[3]
    fake.local[3, probes.poison_memory.__code__] = fake.events.PY_START | fake.events.PY_RETURN
    key = "htam_graph.runner.harness.probes.poison_memory"
    assert integrity.check() == [f"set sys.monitoring events of tool 3 on {key}: PY_RETURN|PY_START"]
    fake.local.clear()
    assert integrity.check() == []


# Marked gpu so that it runs where the GPU tests run: the GPU machines have Python 3.12,
# the CI machine 3.11 (where the fake above stands in for the API).
@pytest.mark.gpu
@pytest.mark.skipif(MONITORING is None, reason="sys.monitoring is Python 3.12+ (the GPU machines run 3.12)")
def test_sys_monitoring_tools_and_events_are_reported(integrity):
    mon = MONITORING
    tool = next(i for i in range(6) if mon.get_tool(i) is None)
    target = probes.poison_memory.__code__
    reported: list[str] = []
    mon.use_tool_id(tool, "candidate")
    try:
        mon.register_callback(tool, mon.events.PY_RETURN, lambda *a: None)
        mon.set_events(tool, mon.events.PY_RETURN)
        reported += (found := integrity.check())
        assert f"registered a sys.monitoring tool (id {tool}, name 'candidate')" in found
        assert f"set the sys.monitoring events of tool {tool} to PY_RETURN" in found
        # Local events on the harness's own code, with the tool id freed to look unused.
        mon.set_events(tool, 0)
        mon.set_local_events(tool, target, mon.events.PY_START | mon.events.PY_RETURN)
        mon.free_tool_id(tool)
        reported += (found := integrity.check())
        key = "htam_graph.runner.harness.probes.poison_memory"
        assert found == [f"set sys.monitoring events of tool {tool} on {key}: PY_RETURN|PY_START"]
        # A freed id keeps its global events on 3.12 and 3.13: they are read all the same.
        mon.use_tool_id(tool, "candidate")
        mon.set_local_events(tool, target, 0)
        mon.set_events(tool, mon.events.CALL)
        mon.free_tool_id(tool)
        if mon.get_events(tool):
            reported += (found := integrity.check())
            assert found == [f"set the sys.monitoring events of tool {tool} to CALL"]
        assert not any(entry.startswith("changed ") for entry in reported)  # the referee's precision prefix
    finally:
        if mon.get_tool(tool) is None:
            mon.use_tool_id(tool, "cleanup")
        mon.set_events(tool, 0)
        mon.set_local_events(tool, target, 0)
        mon.register_callback(tool, mon.events.PY_RETURN, None)
        mon.free_tool_id(tool)
    assert integrity.check() == []
