"""Prices: a child's cost in US dollars from its usage and model, through ``genai-prices``.

``genai-prices`` (pydantic's maintained price data, bundled with the package: no network) is
imported on first use only, because its data module takes about a second to import; a caller
on an event loop awaits :func:`load_async` first so that import happens on a worker thread.

Contract:

* :func:`cost_usd` is the price of ``usage`` for ``model`` (``None`` when the model is unknown
  to the price data, or no model is named: never a guess). ``usage.input_tokens`` counts every
  input token, cached ones included; the cache parts are priced at their own rates.
* The lookup is cached per model: a model the data does not know is looked up once per process,
  and for a known one the per-token rates (uncached input, cache read, cache write, output, and
  any per-call fee) are worked out once from the library's own calculation, so pricing a child
  is a dictionary look-up and a few multiplications (the library's calculation takes about
  1.5 ms a call). A model whose prices are tiered by size (more per token past 200k input
  tokens, say) is priced by the library on every call instead.
* :func:`priced` returns the usage with ``cost_usd`` filled in, unless the provider already
  reported a cost (a reported cost always wins).
"""

from __future__ import annotations

import threading
from typing import Any

import anyio

from ._subagent import Usage

__all__ = ["cost_text", "cost_usd", "format_usd", "load", "load_async", "loaded", "priced", "priced_async"]

_module: Any = None
_lock = threading.Lock()
_unknown: set[str] = set()  # models the price data does not know (looked up once)
# model -> (per call, per uncached input, cache read, cache write and output token) in dollars;
# None: the model's prices are tiered, so each call asks the price data
_rates: dict[str, tuple[float, float, float, float, float] | None] = {}


def load() -> None:
    """Import the price data (about a second, once per process); safe from any thread."""
    global _module
    if _module is not None:
        return
    with _lock:
        if _module is None:
            import genai_prices as module

            _module = module


def loaded() -> bool:
    """True once the price data is imported (pricing then never blocks for long)."""
    return _module is not None


async def load_async() -> None:
    """:func:`load` on a worker thread (a no-op once loaded)."""
    if _module is None:
        await anyio.to_thread.run_sync(load)


def cost_usd(usage: Usage, model: str | None) -> float | None:
    """The cost of ``usage`` answered by ``model`` in US dollars; None when the model is not in
    the price data (or is None)."""
    if not model or model in _unknown:
        return None
    rates = _rates.get(model)
    if rates is None and model not in _rates:
        load()
        rates = _rates[model] = _linear_rates(model)
    if rates is not None:
        fixed, uncached, read, write, output = rates
        plain = max(usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens, 0)
        return max(fixed + uncached * plain + read * usage.cache_read_tokens
                   + write * usage.cache_write_tokens + output * usage.output_tokens, 0.0)
    return _library_cost(usage, model)


def _library_cost(usage: Usage, model: str) -> float | None:
    """The price data's own calculation (about a millisecond and a half per call)."""
    module = _module
    try:
        price = module.calc_price(
            module.Usage(input_tokens=max(usage.input_tokens,
                                          usage.cache_read_tokens + usage.cache_write_tokens),
                         output_tokens=usage.output_tokens,
                         cache_read_tokens=usage.cache_read_tokens or None,
                         cache_write_tokens=usage.cache_write_tokens or None),
            model_ref=model)
    except LookupError:
        _unknown.add(model)
        return None
    return float(price.total_price)


_MILLION = 1_000_000
#: The call size a price per million tokens is worked out from (below every tier's threshold).
_QUOTED_TOKENS = 10_000


def _linear_rates(model: str) -> tuple[float, float, float, float, float] | None:
    """The model's price per call and per token (uncached input, cache read, cache write,
    output), worked out once from the price data's own calculation; None when its prices are
    tiered by size (or cannot be inspected), so that each call asks the price data instead.
    An unknown model lands in ``_unknown``."""
    try:
        from datetime import UTC, datetime

        from genai_prices import data_snapshot, types

        _, info = data_snapshot.get_snapshot().find_provider_model(model, None, None, None)
        prices = info.get_prices(datetime.now(UTC))
        if any(isinstance(value, types.TieredPrices) for value in vars(prices).values()):
            return None
    except LookupError:
        _unknown.add(model)
        return None
    except Exception:  # noqa: BLE001 - a changed private API: the public calculation still works
        return None
    fixed = _library_cost(Usage(), model)
    if fixed is None:
        return None
    per: list[float] = []
    for usage in (Usage(input_tokens=_MILLION),
                  Usage(input_tokens=_MILLION, cache_read_tokens=_MILLION),
                  Usage(input_tokens=_MILLION, cache_write_tokens=_MILLION),
                  Usage(output_tokens=_MILLION)):
        cost = _library_cost(usage, model)
        if cost is None:
            return None
        per.append((cost - fixed) / _MILLION)
    return fixed, per[0], per[1], per[2], per[3]


def million_token_prices(model: str | None) -> tuple[float, float] | None:
    """``model``'s price in US dollars per million uncached input tokens and per million
    output tokens, from the price data (the same calculation as :func:`cost_usd`), at the rate
    of a call of ordinary size (a model priced in tiers by prompt size is quoted at its first
    tier); None when the model is unknown there (or None)."""
    base = cost_usd(Usage(), model)
    if base is None:
        return None
    read = cost_usd(Usage(input_tokens=_QUOTED_TOKENS), model)
    written = cost_usd(Usage(output_tokens=_QUOTED_TOKENS), model)
    if read is None or written is None:
        return None
    scale = _MILLION / _QUOTED_TOKENS
    return (read - base) * scale, (written - base) * scale


def priced(usage: Usage | None, model: str | None) -> Usage | None:
    """``usage`` with its cost filled in from ``model`` when the provider reported none."""
    if usage is None or usage.cost_usd is not None:
        return usage
    cost = cost_usd(usage, model)
    if cost is None:
        return usage
    return usage.model_copy(update={"cost_usd": cost})


async def priced_async(usage: Usage | None, model: str | None) -> Usage | None:
    """:func:`priced` for a caller on an event loop: the first use imports the price data on a
    worker thread instead of blocking the loop."""
    if usage is None or usage.cost_usd is not None or not model or model in _unknown:
        return usage
    await load_async()
    return priced(usage, model)



def format_usd(amount: float) -> str:
    """``$0.0123`` (four decimals under a dollar, two above): how every view shows money."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def cost_text(cost: float | None, unpriced: int = 0) -> str | None:
    """A run's cost as the views show it: ``$0.0123``, ``$0.0123+`` when some children's cost
    is unknown (the figure is a lower bound), None when no child's cost is known."""
    if cost is None:
        return None
    return format_usd(cost) + ("+" if unpriced else "")
