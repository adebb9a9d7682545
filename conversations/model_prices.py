"""The model provider's list prices, the one table every cost is computed from (the simulator's
report, the ``lab_attendance_model_call_cost_usd_total`` metric)."""

import re
from decimal import Decimal

# USD per million tokens (input, output), OpenAI's list prices; a model not listed has no cost.
MODEL_PRICES_USD: dict[str, tuple[Decimal, Decimal]] = {
    "gpt-4o-mini": (Decimal("0.15"), Decimal("0.60")),
    "gpt-4o": (Decimal("2.50"), Decimal("10.00")),
    "gpt-4.1": (Decimal("2.00"), Decimal("8.00")),
    "gpt-4.1-mini": (Decimal("0.40"), Decimal("1.60")),
    "gpt-4.1-nano": (Decimal("0.10"), Decimal("0.40")),
    "gpt-5": (Decimal("1.25"), Decimal("10.00")),
    "gpt-5-mini": (Decimal("0.25"), Decimal("2.00")),
    "gpt-5-nano": (Decimal("0.05"), Decimal("0.40")),
}


# A dated snapshot ("gpt-4o-mini-2024-07-18"): the provider answers with it when asked for the
# alias, at the alias's list price.
_SNAPSHOT = re.compile(r"(?P<alias>.+)-\d{4}-\d{2}-\d{2}")


def call_cost_usd(model: str, *, tokens_input: int, tokens_output: int) -> Decimal | None:
    """One call's cost at `MODEL_PRICES_USD` (a dated snapshot at its alias's price); None when
    the model has no listed price."""
    snapshot = _SNAPSHOT.fullmatch(model)
    prices = MODEL_PRICES_USD.get(snapshot["alias"] if snapshot else model)
    if prices is None:
        return None
    return (tokens_input * prices[0] + tokens_output * prices[1]) / 1_000_000
