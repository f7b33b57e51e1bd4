"""Prices from the price library: the cost of a usage, per model, and how costs sum."""

from __future__ import annotations

import time
from typing import Any

import genai_prices
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dsh_workflow import Usage
from dsh_workflow._prices import (
    CLAUDE_CODE_ALIASES,
    MAX_CHILD_COST_USD,
    MAX_CHILD_TOKENS,
    cost_text,
    cost_usd,
    format_usd,
    has_price,
    priced,
    priced_as,
    usage_problem,
)


def _library(model: str, **tokens: int) -> float:
    return float(genai_prices.calc_price(genai_prices.Usage(**tokens), model_ref=model).total_price)


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5", "gpt-5"])
def test_cost_comes_from_the_price_library(model: str) -> None:
    usage = Usage(input_tokens=12_000, output_tokens=800)
    assert cost_usd(usage, model) == pytest.approx(_library(model, input_tokens=12_000,
                                                             output_tokens=800))


def test_cache_tokens_are_priced_at_their_own_rates() -> None:
    usage = Usage(input_tokens=10_000, output_tokens=100, cache_read_tokens=6_000,
                  cache_write_tokens=2_000)
    expected = _library("claude-sonnet-4-5", input_tokens=10_000, output_tokens=100,
                        cache_read_tokens=6_000, cache_write_tokens=2_000)
    assert cost_usd(usage, "claude-sonnet-4-5") == pytest.approx(expected)
    assert expected != pytest.approx(_library("claude-sonnet-4-5", input_tokens=10_000,
                                              output_tokens=100))


def test_unknown_or_missing_model_is_none() -> None:
    usage = Usage(input_tokens=10, output_tokens=10)
    assert cost_usd(usage, "echo") is None
    assert cost_usd(usage, "echo") is None  # the cached miss answers the same
    assert cost_usd(usage, None) is None
    assert priced(usage, "echo") == usage


def test_a_reported_cost_wins() -> None:
    reported = Usage(input_tokens=1000, output_tokens=1000, cost_usd=0.5)
    assert priced(reported, "gpt-4o") == reported
    computed = priced(Usage(input_tokens=1000, output_tokens=1000), "gpt-4o")
    assert computed is not None and computed.cost_usd != 0.5
    assert computed.cost_usd == pytest.approx(_library("gpt-4o", input_tokens=1000,
                                                         output_tokens=1000))


def test_sums_keep_the_known_costs() -> None:
    a = Usage(input_tokens=1, output_tokens=1, cost_usd=0.25)
    b = Usage(input_tokens=2, output_tokens=2, cost_usd=0.5)
    unknown = Usage(input_tokens=3, output_tokens=3)
    assert (a + b).cost_usd == pytest.approx(0.75)
    mixed = a + unknown + b
    assert mixed.cost_usd == pytest.approx(0.75) and mixed.total_tokens == 12
    assert unknown.unpriced and not a.unpriced and not Usage().unpriced
    assert (unknown + unknown).cost_usd is None
    cached = Usage(cache_read_tokens=4) + Usage(cache_read_tokens=1, cache_write_tokens=2)
    assert (cached.cache_read_tokens, cached.cache_write_tokens) == (5, 2)


def test_money_is_shown_with_a_lower_bound_marker() -> None:
    assert format_usd(0.012345) == "$0.0123"
    assert format_usd(12.3) == "$12.30"
    assert cost_text(None) is None
    assert cost_text(0.5, unpriced=2) == "$0.5000+"
    assert cost_text(None, unpriced=3) == "unpriced"  # spend of unknown cost: never $0.0000


def test_usage_refuses_a_negative_or_infinite_cost() -> None:
    with pytest.raises(ValueError):
        Usage(cost_usd=-1.0)
    with pytest.raises(ValueError):
        Usage(cost_usd=float("inf"))


def test_a_dump_shows_cache_counts_and_cost_only_when_known() -> None:
    assert Usage(input_tokens=1, output_tokens=2).model_dump() == {"input_tokens": 1,
                                                                    "output_tokens": 2}
    full = Usage(input_tokens=5, output_tokens=2, cache_read_tokens=3, cost_usd=0.0)
    assert full.model_dump(mode="json") == {"input_tokens": 5, "output_tokens": 2,
                                            "cache_read_tokens": 3, "cost_usd": 0.0}
    assert Usage.model_validate_json(full.model_dump_json()) == full


_SIZES = [Usage(input_tokens=1_000, output_tokens=100, cache_read_tokens=10),
          Usage(input_tokens=300_000, output_tokens=5_000, cache_read_tokens=100_000,
                cache_write_tokens=2_000),
          Usage(output_tokens=7)]


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "o3", "claude-sonnet-4-5",
                                   "claude-opus-4-1", "gemini-2.5-pro", "gpt-5"])
def test_the_cached_rates_agree_with_the_library_at_every_size(model: str) -> None:
    for usage in _SIZES:  # the second crosses the 200k-token tier where a model has one
        expected = _library(model, input_tokens=usage.input_tokens,
                            output_tokens=usage.output_tokens,
                            cache_read_tokens=usage.cache_read_tokens,
                            cache_write_tokens=usage.cache_write_tokens)
        assert cost_usd(usage, model) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_pricing_a_known_model_is_cheap_once_looked_up() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=100)
    cost_usd(usage, "gpt-4o")
    started = time.perf_counter()
    for _ in range(1_000):
        cost_usd(usage, "gpt-4o")
    # The library's own calculation takes about 1.5 ms a call: 1,000 calls would take seconds.
    assert time.perf_counter() - started < 0.5


def test_model_prices_win_over_the_price_data_and_price_unknown_models() -> None:
    usage = Usage(input_tokens=2_000_000, output_tokens=500_000, cache_read_tokens=1_000_000)
    prices = {"my-model": (0.5, 1.5), "gpt-4o": (1.0, 1.0)}
    assert cost_usd(usage, "my-model", prices) == pytest.approx(2 * 0.5 + 0.5 * 1.5)
    assert cost_usd(usage, "gpt-4o", prices) == pytest.approx(2.5)  # every input token
    assert cost_usd(usage, "gpt-4o") != pytest.approx(2.5)
    assert cost_usd(usage, "my-model") is None
    assert has_price("my-model", prices) and not has_price("my-model")
    assert priced(Usage(input_tokens=1_000_000), "my-model", prices) == Usage(
        input_tokens=1_000_000, cost_usd=0.5)


def test_claude_code_aliases_resolve_through_one_table() -> None:
    assert set(CLAUDE_CODE_ALIASES) == {"sonnet", "opus", "haiku"}
    for alias, model in CLAUDE_CODE_ALIASES.items():
        assert priced_as(alias) == priced_as(f"{alias}[1m]") == model
        assert has_price(alias)
    assert priced_as("gpt-4o") == "gpt-4o" and priced_as("sonnet-x") == "sonnet-x"
    # a price given for the alias itself wins over the table
    assert cost_usd(Usage(input_tokens=1_000_000), "sonnet", {"sonnet": (7.0, 0.0)}) == 7.0


_NUMBERS = st.one_of(st.integers(min_value=-10**30, max_value=10**30),
                     st.integers(min_value=10**300, max_value=10**400),
                     st.floats(allow_nan=True, allow_infinity=True),
                     st.booleans(), st.none(), st.text(max_size=3))


@given(tokens=st.lists(_NUMBERS, min_size=4, max_size=4),
       cost=st.one_of(st.none(), _NUMBERS))
@example(tokens=[0, 0, 0, 0], cost=10**400)  # past a float's range: never converted
@example(tokens=[10**400, 0, 0, -1], cost=float("nan"))
@example(tokens=[MAX_CHILD_TOKENS, 0, 0, 0], cost=MAX_CHILD_COST_USD)
def test_usage_problem_accepts_exactly_the_bounded_numbers_and_never_raises(
        tokens: list[object], cost: object) -> None:
    names = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    # Unvalidated on purpose: model_construct keeps any value, as a provider's own model could.
    fields: dict[str, Any] = {**dict(zip(names, tokens, strict=True)), "cost_usd": cost}
    usage = Usage.model_construct(**fields)
    problem = usage_problem(usage)
    counts_ok = all(type(t) is int and 0 <= t <= MAX_CHILD_TOKENS for t in tokens)
    cost_ok = cost is None or (type(cost) in (int, float)
                               and 0 <= cost <= MAX_CHILD_COST_USD)  # type: ignore[operator]  # its type just checked
    assert (problem is None) == (counts_ok and cost_ok)
    if problem is not None:
        assert problem.startswith("the provider reported ") and len(problem) < 200
