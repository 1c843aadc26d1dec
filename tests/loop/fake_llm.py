"""Fake LLM endpoints that write kernels: the Anthropic and OpenAI wire protocols (the
servers of tests/llm/fakes.py), answering each call from its prompt alone, so a run and
its resumption get the same answers.

What a run sees, by step (1-based, read from "step N of T" in the prompt): step 2's first
candidate does not compile and its repair does; step 4 computes with PyTorch (rejected);
step 5 answers without code (no candidate); every other step is an honest ReLU kernel
with its own block size, so each has its own content hash (the stand-in evaluator's
synthetic time).
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from tests.llm.fakes import (
    FakeAnthropic,
    FakeOpenAI,
    Reply,
    anthropic_message,
    chat_completion,
    text_block,
    tool_use_block,
)
from tests.runner.candidates import relu_candidate

BLOCKS = [128, 256, 512, 1024, 64, 32, 96, 192]


def honest(step: int) -> str:
    block = BLOCKS[step % len(BLOCKS)]
    launch = (
        f'self.kernels.launch("relu_kernel", grid=((n + {block - 1}) // {block},), block=({block},), args=(x, y, n))'
    )
    forward = f"""
        y = torch.empty_like(x)
        n = x.numel()
        {launch}
        return y
"""
    return relu_candidate(forward=forward)


BROKEN = relu_candidate(body="y[i] = undefined_name;")
CHEAT = relu_candidate(
    forward="""
        return torch.relu(x)
"""
)


def answer(user: str, structured: bool) -> str:
    """The answer to one call, from its user prompt."""
    if structured:  # select_local: the first strategy the prompt offers
        offered = re.search(r"one of: ([\w.]+)", user)
        assert offered, "a structured call that offers no strategy"
        return json.dumps({"local_id": offered[1], "reason": "first offered"})
    if "## This step's candidate" in user:  # reflect: the step's state, then the candidate
        return "Vectorized launch config was tried; keep the grid math, avoid undefined names."
    if "## The candidate that failed to build" in user:
        return f"Fixed.\n```python\n{honest(1)}```\n"
    step = int(re.search(r"step (\d+) of \d+", user)[1])  # type: ignore[index]
    code = {2: BROKEN, 4: CHEAT}.get(step, honest(step))
    if step == 5:
        return "I would need more information about the hardware before writing a kernel."
    return f"Here is the kernel.\n```python\n{code}```\n"


def _user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


class KernelWritingAnthropic(FakeAnthropic):
    """`hold_at_step`: the generate call of that step waits (`held` is set) until
    `release()`, so a test can kill the client in the middle of the step."""

    hold_at_step: int | None = None

    def __init__(self, models: set[str]) -> None:
        super().__init__(models)
        self.held, self._released = threading.Event(), threading.Event()

    def release(self) -> None:
        self._released.set()

    def next_reply(self) -> Reply:
        body = self.requests[-1].body
        structured = "output_config" in body or "tools" in body
        user = _user_text(body)
        if self.hold_at_step is not None and f"(step {self.hold_at_step} of" in user and not structured:
            self.held.set()
            self._released.wait(timeout=600)
        text = answer(user, structured)
        if "tools" in body:
            return anthropic_message(tool_use_block(body["tools"][0]["name"], json.loads(text)), stop_reason="tool_use")
        return anthropic_message(text_block(text), cache_read=400, cache_write=0)


class KernelWritingOpenAI(FakeOpenAI):
    def next_reply(self) -> Reply:
        body = self.requests[-1].body
        text = answer(_user_text(body), "tools" in body or "response_format" in body)
        if "tools" in body:
            return chat_completion(
                tool_calls=[(body["tools"][0]["function"]["name"], text)], finish_reason="tool_calls"
            )
        return chat_completion(text, reasoning_content="thinking about memory access", cached_tokens=64)
