"""The conformance kit's base: engine construction, the per-test harness, shared assertions.

Every topic suite (``_suite_*.py``) is a mixin of :class:`ConformanceBase`; ``_suite.py``
composes them into :class:`~dsh_workflow.testing.EngineConformance`.
"""

from __future__ import annotations

import inspect
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ClassVar, TypeVar, overload

import anyio
import pytest

from .._config import EngineConfig
from .._errors import WorkflowErrorCode
from .._events import (
    WorkflowEvent,
)
from .._request import WorkflowStartRequest
from .._result import WorkflowResult, code_in_text
from .._run import WorkflowEngine, WorkflowRun
from .._subagent import SubagentProvider
from ._contract import check_run_events
from ._doubles import FunctionProvider, _Changes

__all__ = [
    "META",
    "ConformanceBase",
    "Harness",
    "assert_hook_error",
    "assert_names_setting",
    "assert_run_error",
    "caught",
    "raw_request",
    "run_threads",
]

META: dict[str, str] = {"name": "test-flow", "description": "a test workflow"}
"""The meta every kit run uses unless a test says otherwise."""

THREAD_PREFIX = "dsh-workflow"
E = TypeVar("E", bound=WorkflowEvent)


def run_threads() -> list[threading.Thread]:
    """Live threads whose name starts with ``dsh-workflow`` (an engine's run threads)."""
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX) and t.is_alive()]


def raw_request(**fields: Any) -> WorkflowStartRequest:
    """A start request built *without* model validation, to reach the engine's own checks."""
    values: dict[str, Any] = {"meta": dict(META), "script": "return 1", "args": None,
                              "provider": None, "max_total_agents": None, "parent": None}
    values.update(fields)
    return WorkflowStartRequest.model_construct(**values)


def caught(statement: str) -> str:
    """A script that runs ``statement`` and returns what it threw, as plain data.

    The value is ``{"threw": False}`` or ``{"threw": True, "name", "code", "fatal", "message"}``.
    """
    return (
        "try {\n" + statement + "\n} catch (e) {\n"
        "  return {threw: true, name: e && e.name, code: e && e.code, fatal: e && e.fatal,\n"
        "          message: e && typeof e.message === 'string' ? e.message : String(e)};\n"
        "}\nreturn {threw: false};"
    )


def assert_hook_error(value: Any, code: str, *fragments: str) -> None:
    """``value`` (from :func:`caught`) is an engine error object with ``code`` and ``fragments``."""
    assert isinstance(value, dict) and value.get("threw") is True, \
        f"expected the hook to throw {code}, the script saw {value!r}"
    assert value["name"] == "WorkflowError", f"hook errors are named WorkflowError: {value!r}"
    assert value["code"] == code, f"expected code {code}: {value!r}"
    assert value["fatal"] is True, f"engine errors are fatal: {value!r}"
    for fragment in fragments:
        assert fragment in value["message"], f"{fragment!r} missing from {value['message']!r}"


def assert_run_error(result: WorkflowResult, *fragments: str,
                     code: WorkflowErrorCode | str | None = None) -> str:
    """``result`` ended ``error``, carries an ``error_code`` (the one its text starts with as
    ``CODE:``, if it starts with one), and its error text contains every fragment; with
    ``code``, the result's code is ``code`` and the text starts with ``code:``. Returns the
    text."""
    assert result.stop_reason == "error", f"expected an error result, got {result!r}"
    assert result.value is None, f"an error result carries no value: {result!r}"
    assert result.error, f"an error result names its error: {result!r}"
    assert result.error_code is not None, f"an error result carries its code: {result!r}"
    named = code_in_text(result.error)
    assert named in (None, result.error_code), \
        f"the text starts with {named}, the result's code is {result.error_code}: {result!r}"
    if code is not None:
        assert result.error_code == code, f"expected the code {code}: {result!r}"
        assert result.error.startswith(f"{code}:"), f"expected the text to start {code}: {result!r}"
    for fragment in fragments:
        assert fragment in result.error, f"{fragment!r} missing from the error {result.error!r}"
    return result.error


def assert_names_setting(text: str, name: str, value: object) -> None:
    """``text`` names the setting ``name`` together with its configured ``value``."""
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    pattern = re.escape(name) + r"\W{1,4}" + re.escape(shown) + r"(?![\d.])"
    assert re.search(pattern, text), f"expected {name}={shown} to be named in {text!r}"


class Harness:
    """One engine under test, with every event it emitted and every run a test started.

    Built by :meth:`ConformanceBase.open`; when the block ends it disposes every run (also when
    the test failed) and, if the block succeeded, checks :func:`check_run_events` for each run.
    """

    def __init__(self, engine: WorkflowEngine, provider: Any, config: EngineConfig,
                 result_timeout_s: float) -> None:
        self.engine = engine
        self.provider = provider
        self.config = config
        self.events: list[WorkflowEvent] = []
        self.runs: list[WorkflowRun] = []
        self.result_timeout_s = result_timeout_s
        self._changes = _Changes()

    def record(self, event: WorkflowEvent) -> None:
        self.events.append(event)
        self._changes.notify()

    def request(self, script: str, *, args: Any = None, meta: Any = None,
                provider: SubagentProvider | None = None, max_total_agents: int | None = None,
                parent: Any = None) -> WorkflowStartRequest:
        return WorkflowStartRequest(meta=dict(META) if meta is None else meta, script=script,
                                    args=args, provider=provider,
                                    max_total_agents=max_total_agents, parent=parent)

    def start(self, script: str, **fields: Any) -> WorkflowRun:
        """Start ``script`` (fields as for :class:`WorkflowStartRequest`); the run is tracked."""
        run = self.engine.start(self.request(script, **fields))
        self.runs.append(run)
        return run

    def start_request(self, request: WorkflowStartRequest) -> WorkflowRun:
        run = self.engine.start(request)
        self.runs.append(run)
        return run

    async def result(self, run: WorkflowRun, *, timeout: float | None = None) -> WorkflowResult:
        """``await run.result()``, failing the test if it does not settle in time."""
        limit = self.result_timeout_s if timeout is None else timeout
        with anyio.move_on_after(limit):
            return await run.result()
        raise AssertionError(f"run {run.id} did not settle within {limit:g} s")

    async def run(self, script: str, **fields: Any) -> WorkflowResult:
        """Start ``script`` and return its result."""
        return await self.result(self.start(script, **fields))

    @overload
    def events_of(self, run: WorkflowRun) -> list[WorkflowEvent]: ...
    @overload
    def events_of(self, run: WorkflowRun, *kinds: type[E]) -> list[E]: ...
    def events_of(self, run: WorkflowRun, *kinds: type[Any]) -> list[Any]:
        """The events of ``run``, in order, optionally only those of the given types."""
        mine = [event for event in self.events if event.run.id == run.id]
        if kinds:
            mine = [event for event in mine if isinstance(event, kinds)]
        return mine

    async def wait_for_event(self, predicate: Callable[[WorkflowEvent], bool], *,
                             timeout: float = 5.0, what: str = "an event") -> WorkflowEvent:
        """Return the first recorded event matching ``predicate``, waiting for it if needed."""
        found: list[WorkflowEvent] = []

        def check() -> bool:
            found[:] = [event for event in self.events if predicate(event)][:1]
            return bool(found)

        await self._changes.wait_until(check, timeout, what)
        return found[0]

    async def dispose_all(self, limit: float) -> list[str]:
        problems: list[str] = []
        for run in self.runs:
            with anyio.move_on_after(limit) as scope:
                await run.dispose()
            if scope.cancelled_caught:
                problems.append(f"dispose() of run {run.id} did not return within {limit:g} s")
        return problems

    async def check_runs(self) -> None:
        for run in self.runs:
            check_run_events(self.events, run, await self.result(run))


class ConformanceBase:
    """Shared machinery of the conformance suites; see ``EngineConformance`` for the contract."""

    #: Engine settings every kit test starts from; a test overrides single fields.
    base_config: ClassVar[Mapping[str, Any]] = {
        "max_concurrent_agents": 8,
        "slice_cpu_limit_s": 0.3,
        "dispose_grace_s": 0.5,
    }
    #: Slack allowed on every "promptly" bound (e.g. dispose within ``dispose_grace_s`` + this).
    margin_s: ClassVar[float] = 0.4
    #: How long a test waits for any one run to settle before failing.
    result_timeout_s: ClassVar[float] = 10.0
    #: How long after a test the kit waits for run threads to end before failing it.
    thread_exit_wait_s: ClassVar[float] = 3.0
    #: Known engine failures, run as ``xfail(strict=True)``: a key is a test name
    #: (``test_x``, every parameter) or a test id where ``*`` matches anything
    #: (``test_x[trio-*]``); the value is the reason.
    known_failures: ClassVar[Mapping[str, str]] = {}

    def make_engine(self, config: EngineConfig,
                    provider: SubagentProvider) -> AbstractAsyncContextManager[WorkflowEngine]:
        """Build the engine under test (override this, and only this, in a subclass).

        An engine that takes an agent registry may accept a third keyword, ``agents=None``,
        and pass it on; the agent-registry tests need it and are skipped otherwise."""
        raise NotImplementedError(
            "subclass EngineConformance and override make_engine(self, config, provider) to "
            "return an async context manager that yields the engine under test")

    # ---- per-test plumbing ----------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _conformance_guard(self, request: pytest.FixtureRequest) -> Any:
        """Marks known failures, then fails a test that leaves a run thread behind."""
        reason = self._known_failure(request.node.name,
                                     getattr(request.node, "originalname", request.node.name))
        if reason is not None:
            request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
        before = set(run_threads())
        yield
        deadline = time.monotonic() + self.thread_exit_wait_s
        while True:
            left = [t for t in run_threads() if t not in before]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert not left, f"run threads still alive after the test: {[t.name for t in left]}"

    def _known_failure(self, name: str, original: str) -> str | None:
        for pattern, reason in self.known_failures.items():
            wildcard = re.escape(pattern).replace(r"\*", ".*")
            if pattern == original or re.fullmatch(wildcard, name):
                return reason
        return None

    def config(self, **overrides: Any) -> EngineConfig:
        """:attr:`base_config` with ``overrides`` applied."""
        return EngineConfig(**{**self.base_config, **overrides})

    def _engine_with_agents(self, config: EngineConfig, provider: SubagentProvider,
                            agents: Any) -> AbstractAsyncContextManager[WorkflowEngine]:
        """``make_engine(config, provider, agents=agents)``; a test that needs an agent registry
        is skipped when the subclass's ``make_engine`` takes no ``agents`` keyword."""
        try:
            parameters = inspect.signature(self.make_engine).parameters
        except (TypeError, ValueError):  # pragma: no cover - a builtin or odd callable
            parameters = {}  # type: ignore[assignment]  # no parameters known
        takes = "agents" in parameters or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        if not takes:
            pytest.skip("make_engine() takes no agents= keyword: the agent-registry tests need "
                        "make_engine(self, config, provider, agents=None)")
        return self.make_engine(config, provider, agents=agents)  # type: ignore[call-arg]  # make_engine takes agents=, checked above

    @asynccontextmanager
    async def open(self, provider: Any = None, *, agents: Any = None,
                   **config: Any) -> AsyncIterator[Harness]:
        """Build the engine (``config`` overrides :attr:`base_config`) and yield a harness.

        ``provider`` defaults to a :class:`FunctionProvider` answering ``"ok:" + prompt``;
        ``agents`` (an :class:`~dsh_workflow.AgentRegistry`) is passed to ``make_engine`` as
        ``agents=`` (the test is skipped when ``make_engine`` does not take it). On the way out
        every run is disposed (even when the test failed); if the block succeeded, every run's
        events are checked against the event contract.
        """
        cfg = self.config(**config)
        provider = provider if provider is not None else FunctionProvider()
        problems: list[str] = []
        engine_cm = (self.make_engine(cfg, provider) if agents is None
                     else self._engine_with_agents(cfg, provider, agents))
        try:
            async with engine_cm as engine:
                harness = Harness(engine, provider, cfg, self.result_timeout_s)
                engine.events.subscribe(harness.record)
                try:
                    yield harness
                finally:
                    with anyio.CancelScope(shield=True):
                        problems = await harness.dispose_all(
                            cfg.dispose_grace_s + self.margin_s + 1)
        except BaseExceptionGroup as group:
            # An engine that owns a task group wraps the test's own failure; unwrap a lone one.
            if len(group.exceptions) == 1 and isinstance(group.exceptions[0], AssertionError):
                raise group.exceptions[0] from None
            raise
        assert not problems, "; ".join(problems)
        await harness.check_runs()
