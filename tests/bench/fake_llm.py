"""A fake Anthropic endpoint for benches: the real SDK over real HTTP, answers computed
from each request alone (bench workers call it concurrently, and a resumed run must get
the answers the uninterrupted run got).

What it writes, so that methods and seeds differ: an honest ReLU kernel whose block size
(and so the stand-in's synthetic time) follows a hash of the prompt; except that a prompt
on GELU with neither a direction nor a strategy (the baselines) gets no code at its
first step and a PyTorch call (rejected) after, so those runs have no correct candidate.
A strategy choice picks one of the offered ids by the same hash.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path

from tests.llm.fakes import API_KEY, FakeAnthropic, Reply, Request, anthropic_message, text_block
from tests.loop.fake_llm import BLOCKS, CHEAT, honest

MODEL = "claude-sonnet-5-5"  # priced in the shipped table


def _pick(text: str, n: int) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % n


def answer(user: str, structured: bool, task: str = "") -> str:
    """`user`: the user message (the step's state, then the question); `task`: the system
    blocks, where the task stands (the run's cached prefix)."""
    if structured:
        offered = re.search(r"\(one of: ([^)]*)\)", user)
        assert offered, "a structured call that offers no strategy"
        ids = [s.strip() for s in offered[1].split(",")]
        return json.dumps({"local_id": ids[_pick(user, len(ids))], "reason": "the hash said so"})
    if "## This step's candidate" in user:  # reflect
        return "Changing the block size moved the time; the kernel stayed correct."
    guided = "## The direction for this step" in user or "## The strategy to apply" in user
    if "## The task: level1/11_GELU" in task and not guided:
        if "step 1 of" in user:
            return "I need to know more about the GPU first."
        return f"```python\n{CHEAT}```\n"
    return f"Here it is.\n```python\n{honest(_pick(user, len(BLOCKS)))}```\n"


class BenchAnthropic(FakeAnthropic):
    """`hold_at`: the n-th kernel-writing call (1-based) waits, with `held` set, until
    `release()`: a test kills the bench while a run is in the middle of a step."""

    def __init__(self, hold_at: int | None = None) -> None:
        super().__init__({MODEL})
        self.hold_at = hold_at
        self.held, self._released = threading.Event(), threading.Event()
        self._request = threading.local()  # the request this handler thread serves
        self._lock = threading.Lock()
        self.kernel_calls = 0

    def release(self) -> None:
        self._released.set()

    def handle(self, request: Request) -> Reply:
        self._request.body = request.body
        return super().handle(request)

    def next_reply(self) -> Reply:
        body = self._request.body
        structured = "output_config" in body or "tools" in body
        content = body["messages"][-1]["content"]
        user = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
        system = "".join(block.get("text", "") for block in body.get("system") or [])
        if not structured and re.search(r"## Your answer \(step \d+ of \d+\)\n", user):  # a generate call
            with self._lock:
                self.kernel_calls += 1
                hold = self.kernel_calls == self.hold_at
            if hold:
                self.held.set()
                self._released.wait(timeout=600)
        text = answer(user, structured, system)
        return anthropic_message(text_block(text), model=MODEL, input_tokens=1200, output_tokens=300, cache_read=800)


def env(server: BenchAnthropic) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": API_KEY, "HTAM_LLM__BASE_URL": server.url, "HTAM_LLM__MODEL": MODEL}


SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "scripts" / "softmax" / "script.yaml"
