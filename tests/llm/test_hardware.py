"""Hardware and build facts (issue 34, item 4): every method's prompt states the same facts,
taken from the machine that judges; where no GPU was read, the prompt says so instead of
quoting another GPU's numbers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from htam_graph.loop.evaluators import (
    STAND_IN_DEVICE,
    RecordingEvaluator,
    ReplayEvaluator,
    StandInEvaluator,
    hardware_of,
)
from htam_graph.runner.build import DEFAULT_FLAGS
from htam_graph.runner.hardware import device_facts
from htam_graph.templating import render
from htam_graph.vocab import Method
from tests.llm.loop_harness import H200, ScriptedJudge
from tests.llm.test_prompts import prompts_of


def section(static: str) -> str:
    start = static.index("## The machine that judges")
    return static[start : static.index("## ", start + 3)]


def test_every_method_gets_the_same_facts_of_the_judging_gpu(tmp_path: Path) -> None:
    sections = {
        section(prompts_of(method, tmp_path / method.value)[0][0].static)
        for method in (Method.HTAM, Method.HTAM_NO_HIERARCHY, Method.FLAT, Method.FEEDBACK, Method.VANILLA)
    }
    assert len(sections) == 1
    (text,) = sections
    assert "NVIDIA H200, compute capability 9.0, 132 SMs" in text
    assert "peak bandwidth 4800 GB/s" in text and "L2 cache: 50.0 MiB" in text
    assert "up to 227.0 KiB per block" in text and "228.0 KiB per SM" in text
    assert f"`nvcc -cubin {' '.join(DEFAULT_FLAGS)} -arch=sm_90`" in text and "release 12.8" in text
    assert "no `a` suffix" in text and "no cuBLAS, cuDNN or CUTLASS" in text


def test_the_memory_bank_says_its_numbers_are_an_h200s(tmp_path: Path) -> None:
    static = prompts_of(Method.HTAM, tmp_path)[0][0].static
    assert "The memory's text was written for an NVIDIA H200" in static
    assert static.index("## The machine that judges") < static.index("## The memory's optimization directions")


def test_other_gpus_facts_come_from_the_gpu(tmp_path: Path) -> None:
    a100 = H200.model_copy(update={"gpu": "NVIDIA A100-SXM4-80GB", "capability": "8.0", "sm_count": 108,
                                   "arch": "sm_80", "nvcc_flags": [*DEFAULT_FLAGS, "-arch=sm_80"]})  # fmt: skip
    text = render("hardware", hw=a100).text
    assert "NVIDIA A100-SXM4-80GB, compute capability 8.0, 108 SMs" in text and "-arch=sm_80" in text
    assert "132" not in text and "H200" not in text


def test_a_stand_in_says_what_is_known_and_nothing_more() -> None:
    facts = StandInEvaluator().hardware
    assert not facts.measured and facts.sm_count is None and facts.peak_bandwidth_gbs is None
    text = " ".join(render("hardware", hw=facts).text.split())
    assert f"What judges: {STAND_IN_DEVICE}." in text
    assert "SM count, memory bandwidth, shared memory and L2 sizes were not measured here" in text
    assert "SMs," not in text and "GB/s" not in text and "MiB" not in text
    assert f"`nvcc -cubin {' '.join(DEFAULT_FLAGS)} -arch={facts.arch}`" in text


def test_an_evaluator_without_facts_is_stated_as_unmeasured() -> None:
    judge = SimpleNamespace(device="replay of NVIDIA H100 (sm_90) results")
    facts = hardware_of(judge)
    assert not facts.measured and facts.arch == "sm_90" and facts.judged_by == judge.device
    assert hardware_of(ScriptedJudge()) is H200


def test_the_referee_reads_the_facts_from_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    props = SimpleNamespace(
        name="NVIDIA H200", major=9, minor=0, multi_processor_count=132, total_memory=150_110_011_392,
        memory_clock_rate=2_619_000, memory_bus_width=6144, L2_cache_size=52_428_800,
        shared_memory_per_block_optin=232_448, shared_memory_per_multiprocessor=233_472,
        regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
    )  # fmt: skip
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    facts = device_facts(0, "sm_90")
    assert facts.measured and facts.gpu == "NVIDIA H200" and facts.capability == "9.0" and facts.sm_count == 132
    assert facts.peak_bandwidth_gbs == 4023 and facts.l2_mib == 50.0
    assert facts.shared_per_block_kib == 227.0 and facts.shared_per_sm_kib == 228.0
    assert facts.nvcc_flags == [*DEFAULT_FLAGS, "-arch=sm_90"] and facts.nvcc_version is None


def test_a_recording_keeps_the_facts_and_its_replay_states_them(tmp_path: Path) -> None:
    path = tmp_path / "rec.json"
    with RecordingEvaluator(path, "htam demo --record", ScriptedJudge()):
        pass
    replay = ReplayEvaluator(path)
    assert replay.hardware.measured and replay.hardware.sm_count == 132
    assert replay.hardware.judged_by.startswith("replay of scripted timings")
