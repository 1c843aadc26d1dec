"""The price table: shipped prices, user overrides, and the cost of a call."""

from __future__ import annotations

from pathlib import Path

import pytest

from htam_graph.errors import BadInput
from htam_graph.llm.prices import Price, find_price, load_prices, priced_usage


def test_the_shipped_table_prices_current_claude_models() -> None:
    prices = load_prices()
    assert prices["claude-opus-5-5"] == Price(input=4.0, output=20.0, cache_write=5.0, cache_read=0.2)
    assert prices["claude-sonnet-5-5"] == Price(input=2.0, output=10.0, cache_write=2.5, cache_read=0.1)
    assert {"claude-haiku-5-5", "claude-haiku-4-5", "claude-fable-5-1", "claude-opus-4-8"} <= set(prices)


def test_a_dated_id_uses_its_alias_price() -> None:
    prices = load_prices()
    assert find_price(prices, "claude-haiku-4-5-20251001") == prices["claude-haiku-4-5"]
    assert find_price(prices, "gpt-unknown") is None


def test_cost_per_token_kind() -> None:
    price = Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.3)
    usage = priced_usage(
        price, input_tokens=1000, output_tokens=2000, cache_read_tokens=10_000, cache_write_tokens=4000
    )
    assert usage.cost_usd == pytest.approx((1000 * 3 + 2000 * 15 + 10_000 * 0.3 + 4000 * 3.75) / 1e6)
    assert priced_usage(None, input_tokens=1, output_tokens=1).cost_usd is None


def test_cache_rates_left_out_bill_at_the_input_rate() -> None:
    usage = priced_usage(Price(input=1.0, output=2.0), input_tokens=0, output_tokens=0, cache_read_tokens=10**6)
    assert usage.cost_usd == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["prices.yaml", "prices.json"])
def test_a_user_file_adds_and_overrides(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text('{"claude-opus-5-5": {"input": 1, "output": 2}, "local-vllm": {"input": 0, "output": 0}}')
    else:
        path.write_text("claude-opus-5-5: {input: 1, output: 2}\nlocal-vllm: {input: 0, output: 0}\n")
    prices = load_prices(path)
    assert prices["claude-opus-5-5"] == Price(input=1.0, output=2.0)
    assert prices["local-vllm"] == Price(input=0.0, output=0.0)
    assert prices["claude-sonnet-5-5"].input == 2.0  # the rest of the shipped table stays


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("m: {input: 1}\n", r"m.output: Field required"),
        ("m: {input: -1, output: 1}\n", r"m.input: Input should be greater than or equal to 0"),
        ("m: {input: 1, output: 1, cahce_read: 1}\n", r"m.cahce_read: Extra inputs are not permitted"),
        ("[1, 2]\n", r"<top level>: Input should be a valid dictionary"),
        ("m: {input: 1\n", r"is not YAML or JSON"),
    ],
)
def test_a_bad_price_file_is_a_user_error_naming_the_field(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(content)
    with pytest.raises(BadInput, match=rf"price file {path}.*{message}.*HTAM_LLM__PRICES") as err:
        load_prices(path)
    assert err.value.path == path


def test_a_missing_price_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="No such file or directory; fix the file or HTAM_LLM__PRICES"):
        load_prices(tmp_path / "nope.yaml")
