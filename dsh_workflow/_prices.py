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
* ``prices`` (``EngineConfig.model_prices``: dollars per million input and output tokens, by
  model name) wins over the price data: a model named there is priced from it alone (every
  input token at the input rate, cached ones included).
* Claude Code's aliases (``sonnet``, ``opus``, ``haiku`` and their ``[1m]`` forms) are priced as
  the models :data:`CLAUDE_CODE_ALIASES` names: the one table (docs/providers.md, "Prices").
* :func:`usage_problem` says why a child's reported usage cannot be counted: a count or cost
  that is negative, not finite or past :data:`MAX_CHILD_TOKENS` / :data:`MAX_CHILD_COST_USD`.
  A run whose children pass it cannot overflow its sums.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import anyio

from ._subagent import Usage

__all__ = ["CLAUDE_CODE_ALIASES", "MAX_CHILD_COST_USD", "MAX_CHILD_TOKENS", "UNPRICED",
           "ModelPrices", "cost_text", "cost_usd", "format_usd", "has_price", "load",
           "load_async", "loaded", "priced", "priced_as", "priced_async", "usage_problem"]

#: ``EngineConfig.model_prices``: model name -> (input, output) dollars per million tokens.
ModelPrices = Mapping[str, tuple[float, float]]

#: What Claude Code's model aliases name in the release the ``claude`` preset follows (Claude
#: Code 2.1, ``CLAUDE_CODE_VERSION``; first-party, as of 2.1.293): the one table the aliases are
#: priced from. ``sonnet[1m]`` and the like (the 1M-token context) name the same models.
CLAUDE_CODE_ALIASES: Mapping[str, str] = {
    "sonnet": "claude-sonnet-5-5",
    "opus": "claude-opus-5-5",
    "haiku": "claude-haiku-5-5",
}

#: Most tokens of one kind (input, output, cache read, cache write) one child may report.
MAX_CHILD_TOKENS = 10**12
#: Most US dollars one child may report (or be priced at).
MAX_CHILD_COST_USD = 1_000_000.0

#: How every view shows spend it could not price (never ``$0.0000``).
UNPRICED = "unpriced"

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


def priced_as(model: str) -> str:
    """The model name ``model`` is priced as: a Claude Code alias (``sonnet``, ``opus[1m]``)
    becomes the model :data:`CLAUDE_CODE_ALIASES` names; any other name is itself."""
    base = model[:-4] if model.endswith("[1m]") else model
    return CLAUDE_CODE_ALIASES.get(base, model)


def cost_usd(usage: Usage, model: str | None,
             prices: ModelPrices | None = None) -> float | None:
    """The cost of ``usage`` answered by ``model`` in US dollars: from ``prices`` when it names
    the model (or what the model is priced as), else from the price data; None when neither
    knows it (or ``model`` is None)."""
    if not model:
        return None
    if prices:
        pair = prices.get(model) or prices.get(priced_as(model))
        if pair is not None:
            return (usage.input_tokens * pair[0] + usage.output_tokens * pair[1]) / _MILLION
    model = priced_as(model)
    if model in _unknown:
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


def has_price(model: str, prices: ModelPrices | None = None) -> bool:
    """True when ``model`` can be priced (``prices`` or the price data knows it)."""
    return cost_usd(Usage(input_tokens=1, output_tokens=1), model, prices) is not None


def usage_problem(usage: Usage) -> str | None:
    """Why a child's reported ``usage`` cannot be counted (None: it can): a token count that is
    not a whole number from 0 to :data:`MAX_CHILD_TOKENS`, or a cost that is not a finite
    amount from 0 to :data:`MAX_CHILD_COST_USD`. Checks the values as they are, even on a usage
    built without validation."""
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        value = getattr(usage, name, None)
        if type(value) is not int or not 0 <= value <= MAX_CHILD_TOKENS:
            return (f"the provider reported {name}={_shown(value)}, not a count from 0 to "
                    f"{MAX_CHILD_TOKENS:,}")
    cost = getattr(usage, "cost_usd", None)
    # NaN fails both comparisons and infinity the upper one; an int is never converted
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)
                             or not 0 <= cost <= MAX_CHILD_COST_USD):
        return (f"the provider reported cost_usd={_shown(cost)}, not an amount from $0 to "
                f"${MAX_CHILD_COST_USD:,.0f}")
    return None


def _shown(value: object) -> str:
    """A reported number, short (a whole number of any size, a float, anything else)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        digits = int(abs(value).bit_length() * 0.30103) + 1  # str() of a huge int may refuse
        return f"{'-' if value < 0 else ''}a number of about {digits} digits"
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value)[:40]


def million_token_prices(model: str | None,
                         prices: ModelPrices | None = None) -> tuple[float, float] | None:
    """``model``'s price in US dollars per million uncached input tokens and per million
    output tokens, from the price data (the same calculation as :func:`cost_usd`, ``prices`` winning), at the rate
    of a call of ordinary size (a model priced in tiers by prompt size is quoted at its first
    tier); None when the model is unknown there (or None)."""
    base = cost_usd(Usage(), model, prices)
    if base is None:
        return None
    read = cost_usd(Usage(input_tokens=_QUOTED_TOKENS), model, prices)
    written = cost_usd(Usage(output_tokens=_QUOTED_TOKENS), model, prices)
    if read is None or written is None:
        return None
    scale = _MILLION / _QUOTED_TOKENS
    return (read - base) * scale, (written - base) * scale


def priced(usage: Usage | None, model: str | None,
           prices: ModelPrices | None = None) -> Usage | None:
    """``usage`` with its cost filled in from ``model`` when the provider reported none."""
    if usage is None or usage.cost_usd is not None:
        return usage
    cost = cost_usd(usage, model, prices)
    if cost is None:
        return usage
    return usage.model_copy(update={"cost_usd": cost})


async def priced_async(usage: Usage | None, model: str | None,
                       prices: ModelPrices | None = None) -> Usage | None:
    """:func:`priced` for a caller on an event loop: the first use imports the price data on a
    worker thread instead of blocking the loop."""
    if usage is None or usage.cost_usd is not None or not model:
        return usage
    await load_async()
    return priced(usage, model, prices)



def format_usd(amount: float) -> str:
    """``$0.0123`` (four decimals under a dollar, two above): how every view shows money."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def cost_text(cost: float | None, unpriced: int = 0) -> str | None:
    """A run's cost as the views show it: ``$0.0123``, ``$0.0123+`` when some children's cost
    is unknown (the figure is a lower bound), ``unpriced`` when children spent tokens and none
    of their costs is known (never ``$0.0000``), None when nothing was spent."""
    if cost is None:
        return UNPRICED if unpriced else None
    return format_usd(cost) + ("+" if unpriced else "")
