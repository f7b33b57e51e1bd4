"""Prices: a child's cost in US dollars from its usage and model, through ``genai-prices``.

``genai-prices`` (pydantic's maintained price data, bundled with the package: no network) is
imported on first use only, because its data module takes about a second to import; a caller
on an event loop awaits :func:`load_async` first so that import happens on a worker thread.

Contract:

* :func:`cost_usd` is the price of ``usage`` for ``model`` (``None`` when the model is unknown
  to the price data, or no model is named: never a guess). ``usage.input_tokens`` counts every
  input token, cached ones included; the cache parts are priced at their own rates.
* The lookup is cached per model: a model the data does not know is looked up once per process
  (the library caches the models it finds itself), so pricing a child is a dictionary look-up
  and a multiplication.
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
    load()
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
