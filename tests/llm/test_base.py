"""The call records: a prompt built from rendered templates, its hash, usage sums."""

from __future__ import annotations

from htam_graph.llm.base import Prompt, Usage
from htam_graph.templating import Rendered


def rendered(name: str, text: str) -> Rendered:
    return Rendered(name=name, version=1, text=text, sha256="-")


def test_build_joins_parts_and_keeps_every_template() -> None:
    system = rendered("system", "You write CUDA.\n")
    contract = rendered("native_contract", "## Output format\n...\n")
    memory = rendered("memory_summary", "Globals: ...")
    user = rendered("generate", "Task: relu\n")
    prompt = Prompt.build(system=[system], static=[contract, memory], user=user)

    assert prompt.template == "generate"
    assert prompt.system == "You write CUDA."
    assert prompt.static == "## Output format\n...\n\nGlobals: ..."
    assert prompt.user == "Task: relu\n"
    assert prompt.rendered == (system, contract, memory, user)


def test_the_hash_covers_every_part_and_where_it_is() -> None:
    a = Prompt(template="t", system="s", static="x", user="u")
    assert a.sha256 == Prompt(template="other", system="s", static="x", user="u").sha256  # text, not names
    assert a.sha256 != Prompt(template="t", system="s", static="", user="xu").sha256
    assert a.sha256 != Prompt(template="t", system="sx", static="", user="u").sha256


def test_usage_adds_up_and_an_unknown_cost_stays_unknown() -> None:
    a = Usage(input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4, cost_usd=0.5)
    b = Usage(input_tokens=10, output_tokens=20, cache_read_tokens=30, cache_write_tokens=40, cost_usd=0.25)
    assert a + b == Usage(input_tokens=11, output_tokens=22, cache_read_tokens=33, cache_write_tokens=44, cost_usd=0.75)
    assert (a + Usage(cost_usd=None)).cost_usd is None
