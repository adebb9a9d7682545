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


@pytest.mark.parametrize(
    ("model", "tokens_cached", "cost"),
    [
        # 2,000 input tokens (of which `tokens_cached` from the cache), 100 output tokens.
        # gpt-4o-mini: 0.15 input, 0.075 cached, 0.60 output per million. Nothing cached:
        # 2000 × 0.15 + 100 × 0.60.
        ("gpt-4o-mini", 0, Decimal("0.00036")),
        # 1024 × 0.075 + 976 × 0.15 + 100 × 0.60.
        ("gpt-4o-mini", 1024, Decimal("0.0002832")),
        # All cached: 2000 × 0.075 + 100 × 0.60.
        ("gpt-4o-mini", 2000, Decimal("0.00021")),
        # A dated snapshot at its alias's cached price.
        ("gpt-4o-mini-2024-07-18", 2000, Decimal("0.00021")),
        # gpt-5: 1.25 input, 0.125 cached (a tenth), 10.00 output: 2000 × 0.125 + 100 × 10.
        ("gpt-5-2025-08-07", 2000, Decimal("0.00125")),
        # gpt-4.1-nano: 0.10 input, 0.025 cached, 0.40 output: 1 × 0.10 + 1999 × 0.025
        # + 100 × 0.40.
        ("gpt-4.1-nano", 1999, Decimal("0.000090075")),
        ("llama-3-70b", 1024, None),
    ],
)
def test_cached_input_is_priced_at_the_cached_price_and_the_rest_at_the_input_price(
    model: str, tokens_cached: int, cost: Decimal | None
) -> None:
    assert (
        call_cost_usd(model, tokens_input=2000, tokens_output=100, tokens_cached=tokens_cached)
        == cost
    )


@pytest.mark.parametrize(
    ("model", "input_price", "cached_price", "output_price"),
    [
        ("gpt-4o-mini", "0.15", "0.075", "0.60"),
        ("gpt-4o", "2.50", "1.25", "10.00"),
        ("gpt-4.1", "2.00", "0.50", "8.00"),
        ("gpt-4.1-mini", "0.40", "0.10", "1.60"),
        ("gpt-4.1-nano", "0.10", "0.025", "0.40"),
        ("gpt-5", "1.25", "0.125", "10.00"),
        ("gpt-5-mini", "0.25", "0.025", "2.00"),
        ("gpt-5-nano", "0.05", "0.005", "0.40"),
    ],
)
def test_each_listed_model_costs_its_list_prices_per_million(
    model: str, input_price: str, cached_price: str, output_price: str
) -> None:
    million = 1_000_000
    costs = [
        call_cost_usd(model, tokens_input=million, tokens_output=0),
        call_cost_usd(model, tokens_input=million, tokens_output=0, tokens_cached=million),
        call_cost_usd(model, tokens_input=0, tokens_output=million),
    ]

    assert costs == [Decimal(input_price), Decimal(cached_price), Decimal(output_price)]


@pytest.mark.parametrize("tokens_cached", [-1, 2001])
def test_cached_tokens_outside_the_input_are_refused(tokens_cached: int) -> None:
    with pytest.raises(ValueError, match="cached tokens"):
        call_cost_usd(
            "gpt-4o-mini", tokens_input=2000, tokens_output=100, tokens_cached=tokens_cached
        )
