"""A script's own end decides its verdict however late the host reads it (SPEC §24; issue 36,
item 10). A run past ``run_timeout_s`` used to time out as soon as the host noticed the
deadline, also when the script had already ended and only the host had not yet read its end
(a busy machine; here, a slow event listener): the verdict depended on the host's load. The
host now stops the runtime and waits for its end first; an end with the script's own outcome
stands. These tests make the host late on purpose, every time."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from _support import await_until, both_engines

from dsh_workflow import EngineConfig, LogEmitted, WorkflowEvent, WorkflowStartRequest
from dsh_workflow.testing import FunctionProvider

pytestmark = pytest.mark.anyio
META = {"name": "late-host", "description": "a run whose end the host reads late"}
TIMEOUT_S = 1.0


def hold_the_loop(event: WorkflowEvent) -> None:
    """Keep the event loop busy past the run's deadline while the first log is delivered."""
    if isinstance(event, LogEmitted) and event.message == "hold":
        time.sleep(TIMEOUT_S + 0.5)


async def warm(engine: Any) -> None:
    run = engine.start(WorkflowStartRequest(meta=META, script="return 0;"))
    await run.result()
    await run.dispose()
    pooled = getattr(engine, "pooled_pids", None)  # the sandbox engine's warm pool
    if pooled is not None:
        await await_until(pooled, what="the sandbox pool's next warm process")


@pytest.mark.parametrize("make_engine", both_engines())
@pytest.mark.parametrize(("script", "value", "error"), [
    ("log('hold'); return 42;", 42, None),
    ("log('hold'); await new Promise(() => {});", None, "nothing will ever settle"),
], ids=["returned", "stalled"])
async def test_an_end_made_before_the_deadline_stands(make_engine: Any, script: str,
                                                      value: Any, error: str | None) -> None:
    config = EngineConfig(run_timeout_s=TIMEOUT_S, dispose_grace_s=2.0)
    async with make_engine(config, FunctionProvider()) as engine:
        await warm(engine)
        engine.events.subscribe(hold_the_loop)
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        result = await run.result()
        await run.dispose()
    assert result.error_code != "TIMEOUT", result
    if error is None:
        assert result.stop_reason == "completed" and result.value == value, result
    else:
        assert result.stop_reason == "error" and error in (result.error or ""), result


@pytest.mark.parametrize("make_engine", both_engines())
async def test_a_script_still_running_at_the_deadline_times_out(make_engine: Any) -> None:
    config = EngineConfig(run_timeout_s=0.3, dispose_grace_s=2.0)
    async def never(request: Any) -> str:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    slow = FunctionProvider(never)
    async with make_engine(config, slow) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return await agent('x');"))
        started = time.monotonic()
        result = await run.result()
        waited = time.monotonic() - started
        await run.dispose()
    assert result.error_code == "TIMEOUT", result
    assert waited < 0.3 + 2.0, f"the timeout took {waited:.2f} s to be reported"
