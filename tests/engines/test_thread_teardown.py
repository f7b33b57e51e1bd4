"""No thread of a run outlives the QuickJS engine's block (SPEC §24, "Signals end what they
started"). A thread is alive a moment longer than its work: after its target has returned and
released its objects it still tears down. The engine used to stop waiting as soon as nothing
held a runtime (a weak set) or the launcher had cleared its own slot, so once in a few hundred
runs a thread was still alive when the block exited. These tests hold every engine thread in
that teardown for a while (a trace hook on the return of ``Thread.run``), which makes that order
happen every time."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import anyio
import pytest
from _support import wait_until

from dsh_workflow import EngineConfig, QuickJSEngine, WorkflowStartRequest
from dsh_workflow._engines.launcher import ThreadLauncher
from dsh_workflow.testing import FunctionProvider

META = {"name": "teardown", "description": "a run whose threads end slowly"}
#: A hanging child, and a real fatal error rethrown with a message getter that throws.
SCRIPT = """
const hanging = agent('HANG');
let e = null;
try { await agent('x', {temperature: 0}); } catch (x) { e = x; }
try { Object.defineProperty(e, 'message', {get() { throw new Error('rigged'); }}); } catch (_) {}
throw e;
"""
HOLD_S = 0.1


def engine_threads() -> list[str]:
    return [t.name for t in threading.enumerate()
            if t.name.startswith("dsh-workflow") and t.is_alive()]


@pytest.fixture
def slow_teardown() -> Iterator[None]:
    """Every engine thread started from now on stays alive ``HOLD_S`` after its target has
    returned (and ``Thread.run`` has dropped the target)."""
    run_code = threading.Thread.run.__code__

    def in_run(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            time.sleep(HOLD_S)
        return in_run

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if (event == "call" and frame.f_code is run_code
                and threading.current_thread().name.startswith("dsh-workflow")):
            return in_run
        return None

    threading.settrace(tracer)
    try:
        yield
    finally:
        threading.settrace(None)  # None clears the hook
        # Let the held threads end before the next test; one still alive is for the tests
        # that count threads to find, not for this fixture to fail on.
        with contextlib.suppress(AssertionError):
            wait_until(lambda: not engine_threads(), what="the held engine threads to end",
                       timeout=10)


async def reply(request: Any) -> str:
    if request.prompt == "HANG":
        await anyio.sleep_forever()
    return "ok"


@pytest.mark.anyio
@pytest.mark.usefixtures("slow_teardown")
async def test_no_thread_of_the_run_outlives_the_engines_block() -> None:
    before = set(engine_threads())
    async with QuickJSEngine(EngineConfig(warm_runtimes=1),
                             provider=FunctionProvider(reply)) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT))
        result = await run.result()
        assert result.error_code == "UNSUPPORTED_OPTION", result
    assert [name for name in engine_threads() if name not in before] == []


@pytest.mark.usefixtures("slow_teardown")
def test_the_launcher_is_alive_until_its_thread_has_ended() -> None:
    launcher = ThreadLauncher(name="dsh-workflow-launcher-test", idle_s=0.0)
    ran = threading.Event()
    launcher.submit(ran.set)
    launcher.close()
    assert ran.wait(5)
    threads = [t for t in threading.enumerate() if t.name == "dsh-workflow-launcher-test"]
    while threads and threads[0].is_alive():
        assert launcher.alive(), "the launcher said it was gone while its thread was alive"
        time.sleep(0.001)
    assert not launcher.alive()


@pytest.fixture(autouse=True)
def _not_under_coverage_tracing() -> None:
    if sys.gettrace() is not None:
        pytest.skip("a tracer is installed already (coverage or a debugger)")
