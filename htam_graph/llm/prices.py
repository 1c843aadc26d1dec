"""Dollars per call: a price table per model, shipped as data (prices.yaml) and
overridable by a user file, so a new model or a changed price needs no code change."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from htam_graph.llm.base import Usage
from htam_graph.yamlfile import load_yaml

SHIPPED = Path(__file__).with_name("prices.yaml")
_DATED = re.compile(r"-\d{8}$")  # claude-haiku-4-5-20251001 -> claude-haiku-4-5


class Price(BaseModel):
    """USD per million tokens. Cache rates left out bill at the input rate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0.0)
    output: float = Field(ge=0.0)
    cache_write: float | None = Field(None, ge=0.0)
    cache_read: float | None = Field(None, ge=0.0)

    def cost_usd(
        self, *, input_tokens: int, output_tokens: int, cache_read_tokens: int, cache_write_tokens: int
    ) -> float:
        cache_write = self.input if self.cache_write is None else self.cache_write
        cache_read = self.input if self.cache_read is None else self.cache_read
        return (
            input_tokens * self.input
            + output_tokens * self.output
            + cache_write_tokens * cache_write
            + cache_read_tokens * cache_read
        ) / 1e6


_TABLE = TypeAdapter(dict[str, Price])


def load_prices(user_file: Path | None = None) -> dict[str, Price]:
    """The shipped table, with the entries of `user_file` (YAML or JSON, same shape) added
    or replacing the shipped ones."""
    table = _read(SHIPPED)
    if user_file is not None:
        table |= _read(user_file)
    return table


def find_price(prices: dict[str, Price], model: str) -> Price | None:
    """The model's price; a dated id falls back to its alias's entry."""
    return prices.get(model) or prices.get(_DATED.sub("", model))


def priced_usage(
    price: Price | None,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> Usage:
    """Usage with its cost; the cost is None (unknown) when the model has no price."""
    tokens = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_tokens": cache_read_tokens,
        "cache_write_tokens": cache_write_tokens,
    }
    return Usage(**tokens, cost_usd=None if price is None else price.cost_usd(**tokens))


def _read(path: Path) -> dict[str, Price]:
    return load_yaml(
        path, _TABLE, "price file", "fix the file or HTAM_LLM__PRICES",
        expected="expected model: {input, output, cache_write, cache_read} in USD per million tokens",
    )  # fmt: skip
