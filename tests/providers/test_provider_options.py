"""Claude Code's per-call options (docs/scripts.md) through the echo and routing providers."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_workflow import (
    AgentDefinition,
    EchoProvider,
    RoutingProvider,
    SubagentRequest,
    SubagentResult,
)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
OPTIONS: dict[str, Any] = {
    "effort": "max",
    "agent_type": "reviewer",
    "agent": AgentDefinition(name="reviewer", system_prompt="Answer in French.", model="m"),
    "isolation": "worktree",
}


def request(**fields: Any) -> SubagentRequest:
    return SubagentRequest(prompt="two words", label="l", run_id="r", seq=1, **fields)


@pytest.mark.anyio
@pytest.mark.parametrize("schema", [None, SCHEMA])
async def test_echo_ignores_the_options(schema: dict[str, Any] | None) -> None:
    echo = EchoProvider()
    assert await echo.run(request(schema=schema, **OPTIONS)) == await echo.run(request(schema=schema))


class Recorder:
    def __init__(self) -> None:
        self.seen: list[SubagentRequest] = []

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.seen.append(request)
        return SubagentResult(text="ok")


@pytest.mark.anyio
async def test_routing_hands_the_options_on_unchanged() -> None:
    a, b = Recorder(), Recorder()
    routing = RoutingProvider({"a": a, "b": b}, default="a")
    sent = [request(**OPTIONS), request(provider="b", **OPTIONS)]
    for r in sent:
        await routing.run(r)
    assert a.seen == [sent[0]] and b.seen == [sent[1]]
    assert (b.seen[0].effort, b.seen[0].agent, b.seen[0].isolation) == (
        "max", OPTIONS["agent"], "worktree")
