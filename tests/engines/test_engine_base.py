"""The lifecycle every engine shares (``_engines/base.py``) and the run handle ``start()`` returns.

Both real engines are built on :class:`EngineBase` and keep none of the lifecycle to
themselves (their own test files and conformance runs are the main proof that it works for
them); a third, fake engine with a fake runtime shows what a new engine has to supply.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from _support import await_until
from anyio.abc import TaskGroup

from dsh_workflow import (
    EchoProvider,
    EngineConfig,
    QuickJSEngine,
    WorkflowEvent,
    WorkflowRun,
    WorkflowStarted,
    WorkflowStartRequest,
)
from dsh_workflow._engines.admission import Admission
from dsh_workflow._engines.base import EngineBase
from dsh_workflow._engines.handle import RunHandle, hosted_run_of
from dsh_workflow._engines.host.host import HostedRun
from dsh_workflow._engines.subprocess import SubprocessEngine
from dsh_workflow.testing import check_run_events

pytestmark = pytest.mark.anyio

META = {"name": "base-test", "description": "an engine-base test"}
SEAM = {"id", "meta", "result", "cancel", "dispose", "pending", "answer"}  # answer, pending: §25
#: What a HostedRun offers its engine; none of it may be reachable through a handle.
INTERNALS = ("report", "attach", "launch", "drive", "record_end", "journal", "ended",
             "budget_tokens", "runtime_exited", "wait_runtime_gone", "on_runtime_start_failed",
             "questions")


def request(script: str) -> WorkflowStartRequest:
    return WorkflowStartRequest(meta=META, script=script)


# ---- the handle ---------------------------------------------------------------------------


def assert_only_the_seam(run: WorkflowRun) -> None:
    assert type(run) is RunHandle
    assert {name for name in dir(run) if not name.startswith("_")} == SEAM
    assert not hasattr(run, "__dict__")
    for name in INTERNALS:
        assert not hasattr(run, name), name
        with pytest.raises(AttributeError):
            setattr(run, name, None)


@pytest.mark.parametrize("make", [
    lambda: QuickJSEngine(provider=EchoProvider()),
    lambda: SubprocessEngine(provider=EchoProvider(), pool_size=0),
], ids=["quickjs", "subprocess"])
async def test_start_returns_a_handle_with_only_the_seam(make: Any) -> None:
    async with make() as engine:
        run = engine.start(request("return 7"))
        assert_only_the_seam(run)
        hosted = hosted_run_of(run)
        assert isinstance(hosted, HostedRun) and (hosted.id, hosted.meta) == (run.id, run.meta)
        assert (await run.result()).value == 7
        await _ended(hosted)
        await run.dispose()
    assert hosted_run_of(object()) is None


async def _ended(hosted: HostedRun) -> None:
    await await_until(lambda: hosted.ended, what="the hosted run to end", timeout=5)


def test_both_engines_take_their_lifecycle_from_the_base() -> None:
    for engine in (QuickJSEngine, SubprocessEngine):
        assert issubclass(engine, EngineBase)
        for name in ("start", "__aenter__", "__aexit__", "_drive", "_drive_to_end"):
            assert name not in vars(engine), f"{engine.__name__} defines {name} again"


# ---- a third engine -----------------------------------------------------------------------


class FakeRuntime:
    """Runs scripts of the form ``return <JSON>``; ``wait`` runs until stopped. A runtime
    stopped before it was started (a run cancelled before its drive began) never runs and
    reports nothing, as a real one."""

    def __init__(self, script: str) -> None:
        self.script = script.strip()
        self._started = False
        self._woken = anyio.Event()  # started or stopped
        self._stopped = anyio.Event()
        self._alive = True

    def start(self) -> None:
        self._started = True
        self._woken.set()

    def settle(self, entry: list[Any]) -> None:  # never asked: the fake calls no hooks
        raise AssertionError(entry)

    def stop(self) -> None:
        self._stopped.set()
        self._woken.set()

    def is_alive(self) -> bool:
        return self._alive

    async def serve(self, run: HostedRun) -> None:
        await self._woken.wait()
        if not self._started:
            self._alive = False
            return
        if self.script == "wait":
            await self._stopped.wait()
            outcome: dict[str, Any] = {"ok": False, "code": None, "error": "stopped"}
        else:
            outcome = {"ok": True, "value": json.loads(self.script.removeprefix("return "))}
        self._alive = False
        run.report("end", outcome)


class FakePool:
    """Hands out nothing; records what the base asked of it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def open(self, task_group: TaskGroup) -> None:
        self.calls.append("open")

    def take(self) -> None:
        self.calls.append("take")

    def refill(self) -> None:
        self.calls.append("refill")

    async def close(self) -> None:
        self.calls.append("close")


class FakeEngine(EngineBase[FakeRuntime]):
    _engine_name = "FakeEngine"

    def __init__(self) -> None:
        super().__init__(EngineConfig(dispose_grace_s=1.0), provider=EchoProvider(),
                         agents=None, store=None, library=None)
        self._pool: FakePool = FakePool()
        self.released = False

    def _new_runtime(self, admission: Admission, run: HostedRun) -> FakeRuntime:
        self._pool.take()
        runtime = FakeRuntime(admission.script)
        run.attach(runtime)
        return runtime

    async def _serve(self, run: HostedRun, runtime: FakeRuntime) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.serve, run)
            await self._drive_to_end(run)

    async def _wait_released(self) -> None:
        await self._drives_done.wait()
        self.released = True


async def test_a_fake_engine_on_the_base_runs_and_ends_runs() -> None:
    engine = FakeEngine()
    with pytest.raises(RuntimeError, match=r"^FakeEngine\.start\(\) called outside the engine's "
                                           r"`async with` block; use `async with FakeEngine"):
        engine.start(request("return 1"))
    events: list[WorkflowEvent] = []
    engine.events.subscribe(events.append)
    async with engine:
        run = engine.start(request('return {"a": [1, 2]}'))
        assert_only_the_seam(run)
        assert isinstance(events[-1], WorkflowStarted) and events[-1].run.id == run.id
        result = await run.result()
        assert (result.stop_reason, result.value) == ("completed", {"a": [1, 2]})
        check_run_events(events, run, result)
        await await_until(lambda: not engine._runs, what="the engine to forget the run", timeout=5)
        assert engine._pool.calls == ["open", "take", "refill"]
        waiting = engine.start(request("wait"))
    assert engine.released
    assert engine._pool.calls == ["open", "take", "refill", "take", "close", "refill"]
    late = await waiting.result()
    assert (late.stop_reason, late.error) == \
        ("cancelled", "workflow run cancelled: workflow disposed")
    check_run_events(events, waiting, late)
    with pytest.raises(RuntimeError, match=r"FakeEngine\.start"):
        engine.start(request("return 1"))
    with pytest.raises(RuntimeError, match=r"^a FakeEngine can be entered only once$"):
        async with engine:
            pass
