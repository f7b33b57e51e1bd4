"""What an engine checks of the provider it is handed, and of a request's (SPEC §28: declared
seams): a callable ``run``, through ``_subagent.is_provider``, the one such check."""

from __future__ import annotations

import pytest

from dsh_workflow import (
    EchoProvider,
    EngineConfig,
    QuickJSEngine,
    SubagentRequest,
    SubagentResult,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowStartRequest,
)
from dsh_workflow._subagent import is_provider

META = {"name": "p", "description": "d"}


class DuckProvider:
    """A provider of someone else's: no base class, no ``info``, only ``run``."""

    async def run(self, request: SubagentRequest) -> SubagentResult:
        return SubagentResult(text="duck: " + request.prompt)


class NotCallable:
    run = "not a method"


def test_a_provider_is_what_has_a_callable_run() -> None:
    assert is_provider(EchoProvider()) and is_provider(DuckProvider())
    assert not is_provider(object()) and not is_provider(NotCallable())
    assert not is_provider(None)


@pytest.mark.parametrize("provider", [object(), NotCallable()])
def test_an_engine_refuses_what_is_not_a_provider(provider: object) -> None:
    with pytest.raises(TypeError, match="provider must be a SubagentProvider"):
        QuickJSEngine(EngineConfig(), provider=provider)  # type: ignore[arg-type]  # the point


@pytest.mark.anyio
async def test_a_request_provider_is_checked_and_a_duck_provider_answers() -> None:
    async with QuickJSEngine(EngineConfig(), provider=EchoProvider()) as engine:
        with pytest.raises(WorkflowError) as refused:
            engine.start(WorkflowStartRequest(meta=META, script="return 1",
                                              provider=NotCallable()))
        assert refused.value.code is WorkflowErrorCode.INVALID_ARGUMENT
        run = engine.start(WorkflowStartRequest(meta=META, script="return await agent('q')",
                                                provider=DuckProvider()))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed" and result.value == "duck: q"
