"""The model provider's list prices and the one cost formula every cost is computed with (a
call's, a conversation's in the simulator, a prompt version's, a replay's and its cap, the
``lab_attendance_model_call_cost_usd_total`` metric)."""

import re
from decimal import Decimal
from typing import NamedTuple


class ModelPrice(NamedTuple):
    """USD per million tokens. `cached_input` is the price of the input tokens the provider
    read from its prompt cache (a prefix it saw in a recent request)."""

    input: Decimal
    cached_input: Decimal
    output: Decimal


# OpenAI's list prices; a model not listed has no cost.
MODEL_PRICES_USD: dict[str, ModelPrice] = {
    "gpt-4o-mini": ModelPrice(Decimal("0.15"), Decimal("0.075"), Decimal("0.60")),
    "gpt-4o": ModelPrice(Decimal("2.50"), Decimal("1.25"), Decimal("10.00")),
    "gpt-4.1": ModelPrice(Decimal("2.00"), Decimal("0.50"), Decimal("8.00")),
    "gpt-4.1-mini": ModelPrice(Decimal("0.40"), Decimal("0.10"), Decimal("1.60")),
    "gpt-4.1-nano": ModelPrice(Decimal("0.10"), Decimal("0.025"), Decimal("0.40")),
    "gpt-5": ModelPrice(Decimal("1.25"), Decimal("0.125"), Decimal("10.00")),
    "gpt-5-mini": ModelPrice(Decimal("0.25"), Decimal("0.025"), Decimal("2.00")),
    "gpt-5-nano": ModelPrice(Decimal("0.05"), Decimal("0.005"), Decimal("0.40")),
}


# A dated snapshot ("gpt-4o-mini-2024-07-18"): the provider answers with it when asked for the
# alias, at the alias's list price.
_SNAPSHOT = re.compile(r"(?P<alias>.+)-\d{4}-\d{2}-\d{2}")


def model_price(model: str) -> ModelPrice | None:
    """The model's list price (a dated snapshot's is its alias's); None when not listed."""
    snapshot = _SNAPSHOT.fullmatch(model)
    return MODEL_PRICES_USD.get(snapshot["alias"] if snapshot else model)


def call_cost_usd(
    model: str, *, tokens_input: int, tokens_output: int, tokens_cached: int = 0
) -> Decimal | None:
    """The cost of calls to `model` at its list price; None when it has none.

    `tokens_cached` is the part of `tokens_input` read from the prompt cache: those are priced
    at the cached-input price, the rest of the input at the input price. The counts may be one
    call's or a sum over calls of one model (the formula is linear)."""
    price = model_price(model)
    if price is None:
        return None
    if not 0 <= tokens_cached <= tokens_input:
        raise ValueError(f"cached tokens ({tokens_cached}) outside 0..{tokens_input}")
    uncached = tokens_input - tokens_cached
    return (
        uncached * price.input + tokens_cached * price.cached_input + tokens_output * price.output
    ) / 1_000_000
