"""RoutingProvider: route choice, unknown names, construction checks, context management."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import anyio
import pytest

from dsh_workflow._providers.routing import RoutingProvider
from dsh_workflow._subagent import SubagentProvider, SubagentRequest, SubagentResult


class Named:
    """A provider that answers with its own name and records what it saw."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[SubagentRequest] = []

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.seen.append(request)
        return SubagentResult(text=f"{self.name}:{request.prompt}")


class Managed(Named):
    """A provider that is an async context manager and logs entering and leaving."""

    def __init__(self, name: str, log: list[str], *, fail_enter: bool = False) -> None:
        super().__init__(name)
        self.log = log
        self.fail_enter = fail_enter

    async def __aenter__(self) -> Self:
        if self.fail_enter:
            raise OSError(f"{self.name} cannot start")
        self.log.append(f"enter {self.name}")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.log.append(f"exit {self.name} {exc_type.__name__ if exc_type else None}")


def request(provider: str | None = None, **fields: Any) -> SubagentRequest:
    return SubagentRequest(prompt="p", label="l", run_id="r", seq=1, provider=provider, **fields)


@pytest.mark.anyio
async def test_routes_by_request_provider_else_default() -> None:
    fast, deep = Named("fast"), Named("deep")
    router = RoutingProvider({"fast": fast, "deep": deep}, default="fast")
    assert isinstance(router, SubagentProvider)
    assert (await router.run(request())).text == "fast:p"
    assert (await router.run(request("deep"))).text == "deep:p"
    assert (await router.run(request("fast"))).text == "fast:p"
    assert len(fast.seen) == 2 and len(deep.seen) == 1
    assert deep.seen[0] == request("deep")  # the request is passed on untouched


@pytest.mark.anyio
async def test_unknown_route_is_ordinary_failure_listing_names() -> None:
    router = RoutingProvider({"zeta": Named("z"), "alpha": Named("a")}, default="zeta")
    result = await router.run(request("gpt-9"))
    assert result.stop_reason == "error"
    assert result.error == "unknown provider 'gpt-9' (configured: alpha, zeta)"


@pytest.mark.anyio
async def test_route_exceptions_and_cancellation_pass_through() -> None:
    class Broken:
        async def run(self, request: SubagentRequest) -> SubagentResult:
            raise ConnectionError("infrastructure down")

    class Slow:
        async def run(self, request: SubagentRequest) -> SubagentResult:
            await anyio.sleep(30)
            raise AssertionError("not reached")

    router = RoutingProvider({"broken": Broken(), "slow": Slow()}, default="broken")
    with pytest.raises(ConnectionError):
        await router.run(request())
    with anyio.move_on_after(0.05) as scope:
        await router.run(request("slow"))
    assert scope.cancelled_caught


def test_routes_are_copied() -> None:
    routes: dict[str, SubagentProvider] = {"a": Named("a")}
    router = RoutingProvider(routes, default="a")
    routes["b"] = Named("b")
    assert list(router.routes) == ["a"]
    assert repr(router) == "RoutingProvider(routes=['a'], default='a')"


@pytest.mark.parametrize(
    ("routes", "default", "message"),
    [
        ({}, "a", "at least one route"),
        ({"a": Named("a")}, "b", "default route 'b' is not one of the routes: a"),
        ({"": Named("a")}, "", "non-empty strings"),
    ],
)
def test_invalid_construction(routes: dict[str, Any], default: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RoutingProvider(routes, default=default)


@pytest.mark.anyio
async def test_enters_and_exits_managed_routes_in_order() -> None:
    log: list[str] = []
    first, second = Managed("first", log), Managed("second", log)
    router = RoutingProvider({"a": first, "plain": Named("plain"), "b": second, "again": first}, default="a")
    async with router as entered:
        assert entered is router
        assert log == ["enter first", "enter second"]
        assert (await router.run(request("b"))).text == "second:p"
    assert log == ["enter first", "enter second", "exit second None", "exit first None"]


@pytest.mark.anyio
async def test_body_exception_reaches_routes_and_propagates() -> None:
    log: list[str] = []
    with pytest.raises(KeyError):
        async with RoutingProvider({"a": Managed("a", log)}, default="a"):
            raise KeyError("boom")
    assert log == ["enter a", "exit a KeyError"]


@pytest.mark.anyio
async def test_failed_enter_unwinds_entered_routes() -> None:
    log: list[str] = []
    router = RoutingProvider(
        {"a": Managed("a", log), "b": Managed("b", log, fail_enter=True)}, default="a"
    )
    with pytest.raises(OSError, match="b cannot start"):
        async with router:
            raise AssertionError("not reached")
    assert log == ["enter a", "exit a OSError"]
    async with RoutingProvider({"a": Managed("a", log)}, default="a"):
        pass  # a fresh router after a failure works as usual


@pytest.mark.anyio
async def test_cannot_enter_twice_at_once() -> None:
    router = RoutingProvider({"a": Named("a")}, default="a")
    async with router:
        with pytest.raises(RuntimeError, match="already entered"):
            async with router:
                pass
