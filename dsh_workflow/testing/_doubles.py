"""Test doubles for the subagent seam: providers whose behaviour a test controls exactly.

Every double is an ordinary :class:`~dsh_workflow.SubagentProvider` (one ``async run(request)``
method), written with anyio only, so it works under trio and asyncio and inside any engine. None
of them depends on pytest. They record what they were asked, in order, so a test can assert on
the :class:`~dsh_workflow.SubagentRequest` objects an engine built.

Doubles that wait (``GatedProvider``, ``HangingProvider``) offer ``wait_*`` coroutines that
return once a condition holds and raise :class:`TimeoutError` (naming what was awaited) when it
does not hold within ``timeout`` seconds, so a broken engine fails a test instead of hanging it.
All their state is read and written on the event-loop thread, where an engine calls providers.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

import anyio

from .._subagent import SubagentRequest, SubagentResult

__all__ = ["FailingProvider", "FunctionProvider", "GatedProvider", "HangingProvider", "Reply"]

#: What a handler may answer: a full result, or just the child's text.
Reply = SubagentResult | str
#: What answers each request of a :class:`FunctionProvider` (plain or async).
ReplyHandler = Callable[[SubagentRequest], Reply | Awaitable[Reply]]


def default_reply(request: SubagentRequest) -> Reply:
    """The reply of a double built without a handler: ``"ok:" + prompt``."""
    return "ok:" + request.prompt


def _as_result(reply: object) -> SubagentResult:
    if isinstance(reply, SubagentResult):
        return reply
    if isinstance(reply, str):
        return SubagentResult(text=reply)
    raise TypeError(f"a provider handler must return a SubagentResult or a str, "
                    f"not {type(reply).__name__}")


class _Changes:
    """Wakes every waiter whenever the owner's state changes (a broadcast condition)."""

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    def notify(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        try:
            with anyio.fail_after(timeout):
                while not predicate():
                    if self._event is None:
                        self._event = anyio.Event()
                    await self._event.wait()
        except TimeoutError:
            raise TimeoutError(f"timed out after {timeout:g} s waiting until {what}") from None


class FunctionProvider:
    """A provider that answers every child with ``handler(request)``.

    ``handler`` may be a plain function or a coroutine function; it returns a
    :class:`~dsh_workflow.SubagentResult` or a ``str`` (shorthand for a completed result with
    that text). Whatever it raises, the provider raises (an infrastructure fault to the engine);
    a cancelled handler is cancelled as usual. Without a handler every child answers
    ``"ok:" + prompt``.

    ``requests`` lists every request received, in call order (including calls whose handler
    then raised or was cancelled).

    Example::

        provider = FunctionProvider(lambda request: f"answer to {request.prompt}")
    """

    def __init__(self, handler: ReplyHandler | None = None) -> None:
        self.handler: ReplyHandler = handler if handler is not None else default_reply
        self.requests: list[SubagentRequest] = []

    @property
    def prompts(self) -> list[str]:
        """The prompts of :attr:`requests`, in call order."""
        return [request.prompt for request in self.requests]

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.requests.append(request)
        reply = self.handler(request)
        if inspect.isawaitable(reply):
            reply = await reply
        return _as_result(reply)


class GatedProvider:
    """A provider whose children wait until the test releases them.

    Children are identified by their ``seq`` (1-based per run), so one gated provider serves one
    run at a time (route a single run to it with ``WorkflowStartRequest(provider=...)`` when
    other runs share the engine).

    * :meth:`release` lets the named children finish (also before they started: they then
      finish as soon as they start); :meth:`release_all` opens the gate for every child, current
      and future.
    * A released child answers ``reply(request)`` (default ``"ok:" + prompt``) unless
      :meth:`release` was given an explicit result for it.
    * ``started``, ``finished`` and ``cancelled`` list seqs in the order those things happened;
      ``running`` is the set of children started and not yet finished or cancelled;
      ``max_running`` is the largest size ``running`` ever had; ``requests`` lists requests in
      start order.
    * :meth:`wait_running`, :meth:`wait_started`, :meth:`wait_finished` and :meth:`wait_until`
      let a test await "n children running" and similar conditions.
    """

    def __init__(self, reply: Callable[[SubagentRequest], Reply] | None = None) -> None:
        self.reply = reply if reply is not None else default_reply
        self.requests: list[SubagentRequest] = []
        self.started: list[int] = []
        self.finished: list[int] = []
        self.cancelled: list[int] = []
        self.running: set[int] = set()
        self.max_running = 0
        self._open = False
        self._released: dict[int, Reply | None] = {}
        self._changes = _Changes()

    @property
    def prompts(self) -> list[str]:
        """The prompts of :attr:`requests`, in start order."""
        return [request.prompt for request in self.requests]

    def request(self, seq: int) -> SubagentRequest:
        """The request of child ``seq`` (it must have started)."""
        for request in self.requests:
            if request.seq == seq:
                return request
        raise KeyError(f"child {seq} has not started")

    def release(self, *seqs: int, result: Reply | None = None) -> None:
        """Let children ``seqs`` finish, answering ``result`` if given, else ``reply(request)``."""
        for seq in seqs:
            self._released[seq] = result
        self._changes.notify()

    def release_all(self) -> None:
        """Open the gate: every waiting child finishes now and every later child at once."""
        self._open = True
        self._changes.notify()

    async def run(self, request: SubagentRequest) -> SubagentResult:
        seq = request.seq
        self.requests.append(request)
        self.started.append(seq)
        self.running.add(seq)
        self.max_running = max(self.max_running, len(self.running))
        self._changes.notify()
        try:
            await self._changes.wait_until(lambda: self._open or seq in self._released,
                                           float("inf"), f"child {seq} is released")
        except anyio.get_cancelled_exc_class():
            self.running.discard(seq)
            self.cancelled.append(seq)
            self._changes.notify()
            raise
        self.running.discard(seq)
        self.finished.append(seq)
        self._changes.notify()
        given = self._released.get(seq)
        return _as_result(given if given is not None else self.reply(request))

    async def wait_until(self, predicate: Callable[[], bool], *, timeout: float = 5.0,
                         what: str = "the condition holds") -> None:
        """Return once ``predicate()`` is true (checked whenever a child changes state)."""
        await self._changes.wait_until(predicate, timeout, what)

    async def wait_running(self, n: int, *, timeout: float = 5.0) -> None:
        """Return once at least ``n`` children are running at the same time."""
        await self.wait_until(lambda: len(self.running) >= n, timeout=timeout,
                              what=f"{n} children are running (running: {sorted(self.running)})")

    async def wait_started(self, n: int, *, timeout: float = 5.0) -> None:
        """Return once at least ``n`` children have started in total."""
        await self.wait_until(lambda: len(self.started) >= n, timeout=timeout,
                              what=f"{n} children have started (started: {self.started})")

    async def wait_finished(self, *seqs: int, timeout: float = 5.0) -> None:
        """Return once children ``seqs`` have finished (returned their result)."""
        await self.wait_until(lambda: all(seq in self.finished for seq in seqs),
                              timeout=timeout, what=f"children {list(seqs)} have finished")


class FailingProvider:
    """A provider that raises on every call: the infrastructure fault of docs/providers.md.

    ``error`` is an exception instance, an exception class, or a zero-argument factory; a new
    exception is raised on each call when a class or factory is given. The default raises
    ``RuntimeError("provider exploded")``. ``requests`` lists every request received.
    """

    def __init__(self, error: BaseException | Callable[[], BaseException] | None = None) -> None:
        self.error = error if error is not None else (lambda: RuntimeError("provider exploded"))
        self.requests: list[SubagentRequest] = []

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.requests.append(request)
        error = self.error
        raise error if isinstance(error, BaseException) else error()


class HangingProvider:
    """A provider whose children never return; they end only by cancellation.

    ``requests`` lists every request received; ``cancellations`` counts children cancelled (the
    backend's cancellation reached ``run``); ``running`` counts children waiting now.
    :meth:`wait_started` and :meth:`wait_cancelled` await those counters.
    """

    def __init__(self) -> None:
        self.requests: list[SubagentRequest] = []
        self.cancellations = 0
        self.running = 0
        self._changes = _Changes()

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.requests.append(request)
        self.running += 1
        self._changes.notify()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancellations += 1
            raise
        finally:
            self.running -= 1
            self._changes.notify()
        raise AssertionError("unreachable")  # pragma: no cover

    async def wait_started(self, n: int = 1, *, timeout: float = 5.0) -> None:
        """Return once at least ``n`` children have started in total."""
        await self._changes.wait_until(lambda: len(self.requests) >= n, timeout,
                                       f"{n} hanging children have started")

    async def wait_cancelled(self, n: int = 1, *, timeout: float = 5.0) -> None:
        """Return once at least ``n`` children have been cancelled."""
        await self._changes.wait_until(lambda: self.cancellations >= n, timeout,
                                       f"{n} hanging children were cancelled")
