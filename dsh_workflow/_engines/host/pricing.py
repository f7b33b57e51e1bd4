"""Where a child's reported usage is checked and priced: the one place the engine decides what
a child cost (docs/embedding.md, "Cost in money").

Contract of :class:`ChildPricing`:

* :meth:`~ChildPricing.check` refuses a usage no sum may hold (:func:`~..._prices.usage_problem`:
  a count or cost that is negative, not finite or past the per-child bounds): the child fails
  with that reason instead of its numbers reaching the run's sums.
* :meth:`~ChildPricing.price` fills in the cost of a usage that carries tokens and no cost of
  its own, for the model that answered: the result's ``model``, else the request's (aliases
  already applied), else the default model of the route the request names (the provider's
  ``info.default_model`` when it names none). ``EngineConfig.model_prices`` wins over the price
  data. A cost the provider reported is kept.
* :meth:`~ChildPricing.uncounted` says why the dollar budget cannot count a priced child (None:
  it can, or the run has no dollar budget). A child of a provider of kind ``echo`` is never
  uncounted: echo calls no model and spends nothing.
* :func:`unpriced_defaults` lists the default models (the provider's and every route's) that
  have no price: with a dollar budget, the run is refused at start when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..._prices import ModelPrices, cost_usd, has_price, loaded, usage_problem
from ..._subagent import ProviderInfo, SubagentRequest, SubagentResult, Usage, provider_info

__all__ = ["ChildPricing", "unpriced_defaults"]

#: Provider kinds whose children cost nothing (they call no model).
_FREE_KINDS = frozenset({"echo"})


def _routes(info: ProviderInfo) -> Mapping[str, object]:
    """A routing provider's route records by name (empty for any other provider)."""
    routes = info.record.get("routes")
    return routes if isinstance(routes, Mapping) else {}


def _record_text(record: object, key: str) -> str | None:
    value = record.get(key) if isinstance(record, Mapping) else None
    return value if isinstance(value, str) and value else None


def unpriced_defaults(provider: object, prices: ModelPrices | None = None) -> list[str]:
    """The default models of ``provider`` (its own and each route's, from ``provider.info``)
    that neither ``prices`` nor the price data can price, each once, in order. Providers that
    name no default model add nothing. Loads the price data (about a second, once)."""
    info = provider_info(provider)
    models = [info.default_model]
    models += [_record_text(record, "model") for record in _routes(info).values()]
    missing: list[str] = []
    for model in models:
        if model and model not in missing and not has_price(model, prices):
            missing.append(model)
    return missing


class ChildPricing:
    """One run's pricing of its children (see the module docstring)."""

    __slots__ = ("_budget_usd", "_info", "_prices", "_routes")

    def __init__(self, provider: object, prices: ModelPrices | None,
                 budget_usd: float | None) -> None:
        self._info = provider_info(provider)
        self._routes = _routes(self._info)
        self._prices = prices or None
        self._budget_usd = budget_usd

    def _route(self, request: SubagentRequest) -> object:
        """The record of the route ``request`` runs on (None: the provider's own)."""
        if not self._routes:
            return None
        return self._routes.get(request.provider or _record_text(self._info.record, "default")
                                or "")

    def model(self, result: SubagentResult, request: SubagentRequest) -> str | None:
        """The model ``result`` is priced as answered by (see the module docstring)."""
        if result.model:
            return result.model
        if request.model:
            return request.model
        if self._routes:
            return _record_text(self._route(request), "model")
        return self._info.default_model

    @staticmethod
    def check(usage: Usage) -> str | None:
        """Why ``usage`` cannot be counted (None: it can)."""
        return usage_problem(usage)

    def needs_data(self, result: SubagentResult, request: SubagentRequest) -> bool:
        """True when pricing ``result`` needs the price data and it is not loaded yet (the
        caller awaits ``load_async()`` first, so the import never blocks the loop)."""
        usage = result.usage
        return not loaded() and usage is not None and usage.cost_usd is None \
            and usage.total_tokens > 0 and self.model(result, request) is not None

    def price(self, result: SubagentResult, request: SubagentRequest) -> Usage | None:
        """``result.usage`` with its cost filled in when the provider reported none and the
        model has a price (a dictionary look-up once the model's rates are known). Checked
        first with :meth:`check`; see :meth:`needs_data`."""
        usage = result.usage
        if usage is None or usage.cost_usd is not None or not usage.total_tokens:
            return usage
        model = self.model(result, request)
        if model is None:
            return usage
        cost = cost_usd(usage, model, self._prices)
        if cost is None:
            return usage
        return usage.model_copy(update={"cost_usd": cost})

    def uncounted(self, usage: Usage | None, result: SubagentResult,
                  request: SubagentRequest) -> str | None:
        """Why the dollar budget cannot count a priced ``usage`` (``"agent N: model 'x' has no
        price"``), or None."""
        if self._budget_usd is None or usage is None or not usage.unpriced:
            return None
        route = self._route(request) if self._routes else self._info.record
        kind = _record_text(route, "kind") if self._routes else self._info.kind
        if kind in _FREE_KINDS:
            return None
        model = self.model(result, request)
        if model is None:
            return (f"agent {request.seq}: its provider named no model and reported no cost "
                    "(name a model with a price, or have the provider report cost_usd)")
        return f"agent {request.seq}: model {model!r} has no price"
