"""One call's cost at the list prices, a dated snapshot at its alias's price."""

from decimal import Decimal

import pytest

from conversations.model_prices import call_cost_usd


@pytest.mark.parametrize(
    ("model", "cost"),
    [
        # 1,000 input and 100 output tokens at US$ 0.15 and 0.60 per million.
        ("gpt-4o-mini", Decimal("0.00021")),
        ("gpt-4o-mini-2024-07-18", Decimal("0.00021")),
        # The date is stripped, not the last word: gpt-4o's own price (2.50 and 10.00).
        ("gpt-4o-2024-08-06", Decimal("0.0035")),
        ("gpt-4o-mini-2024-07", None),
        ("gpt-4o-mini-latest", None),
        ("gpt-4o-mini-2024-07-18-preview", None),
        ("llama-3-70b", None),
    ],
)
def test_a_call_costs_its_models_list_price(model: str, cost: Decimal | None) -> None:
    assert call_cost_usd(model, tokens_input=1000, tokens_output=100) == cost
