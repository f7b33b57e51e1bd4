"""A subagent provider that sends each child to one of several named providers.

Contract of :class:`RoutingProvider`:

- ``run(request)`` delegates to ``routes[request.provider]`` when the script named a provider,
  else to ``routes[default]``, and returns (or raises, or is cancelled) exactly as that route
  does. An unknown name is an ordinary failure (``stop_reason="error"``) whose ``error`` lists
  the configured names, sorted, so the model can correct its script.
- Construction raises ``ValueError`` when there is no route, a name is empty, or ``default`` is
  not one of the names. The routes are copied: later changes to the mapping have no effect.
- As an async context manager it enters every route that is itself an async context manager
  (each distinct object once, in route order) and exits them in reverse order, also when
  entering a later one fails.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import Self

from .._subagent import (
    ProviderInfo,
    SubagentProvider,
    SubagentRequest,
    SubagentResult,
    provider_description,
    provider_identity,
    provider_info,
)

__all__ = ["RoutingProvider"]


class RoutingProvider:
    """Routes each child by ``request.provider`` (see the module docstring)."""

    def __init__(self, routes: Mapping[str, SubagentProvider], *, default: str) -> None:
        if not routes:
            raise ValueError("RoutingProvider needs at least one route")
        for name in routes:
            if not isinstance(name, str) or not name:
                raise ValueError(f"route names must be non-empty strings, got {name!r}")
        if default not in routes:
            raise ValueError(
                f"default route {default!r} is not one of the routes: {', '.join(sorted(routes))}"
            )
        self.routes: dict[str, SubagentProvider] = dict(routes)
        self.default = default
        self._stack: AsyncExitStack | None = None

    @property
    def identity(self) -> str:
        """What answers this provider's calls, for durable runs' journal keys (docs/durable-runs.md): every
        route's own identity, and the default route."""
        routes = {name: provider_identity(route) for name, route in sorted(self.routes.items())}
        return "routing " + json.dumps([routes, self.default], sort_keys=True)

    @property
    def description(self) -> str:
        """One line: the routes opts.provider may name and the default one (each route
        describes itself: :meth:`route_descriptions`)."""
        return (f"routes {', '.join(sorted(self.routes))} (default {self.default}); "
                "opts.provider picks one")

    @property
    def info(self) -> ProviderInfo:
        """What this provider declares: kind ``routing``, the default route's default model,
        every route's secrets, and as its record the default route, each route's record
        (``routes``) and, by route, its default model (``models``) and its one-line
        description (``descriptions``; None for a route without one)."""
        infos = {name: provider_info(route) for name, route in sorted(self.routes.items())}
        secrets = tuple(dict.fromkeys(s for info in infos.values() for s in info.secrets))
        return ProviderInfo(kind="routing", identity=self.identity,
                            default_model=infos[self.default].default_model,
                            description=self.description,
                            record={"kind": "routing", "default": self.default,
                                    "routes": {name: info.record for name, info in infos.items()},
                                    "models": {name: info.default_model
                                               for name, info in infos.items()},
                                    "descriptions": self.route_descriptions()},
                            secrets=secrets)

    def route_descriptions(self) -> dict[str, str | None]:
        """Each route's own one-line description (None for a provider without one), by name."""
        return {name: provider_description(route) for name, route in sorted(self.routes.items())}

    def __repr__(self) -> str:
        return f"RoutingProvider(routes={sorted(self.routes)!r}, default={self.default!r})"

    async def run(self, request: SubagentRequest) -> SubagentResult:
        """Delegate to the route named by the request, or the default route."""
        name = request.provider if request.provider is not None else self.default
        route = self.routes.get(name)
        if route is None:
            return SubagentResult(
                stop_reason="error",
                error=f"unknown provider {name!r} (configured: {', '.join(sorted(self.routes))})",
            )
        return await route.run(request)

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError("this RoutingProvider is already entered")
        async with AsyncExitStack() as stack:
            seen: set[int] = set()
            for route in self.routes.values():
                if id(route) in seen:
                    continue
                seen.add(id(route))
                if isinstance(route, AbstractAsyncContextManager):
                    await stack.enter_async_context(route)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, self._stack = self._stack, None
        if stack is None:
            return None
        return await stack.__aexit__(exc_type, exc, tb)
