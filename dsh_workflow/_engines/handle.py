"""The object ``engine.start()`` returns: the seam of one run and nothing more.

:class:`~dsh_workflow._engines.host.host.HostedRun` is the engine's side of a run; its wiring
(``attach``, ``launch``, ``report``, ``drive``, ``record_end``, ...) is for the engine alone.
A caller gets a :class:`RunHandle`, which offers exactly the :class:`~dsh_workflow.WorkflowRun`
contract (``id``, ``meta``, ``result()``, ``cancel()``, ``dispose()``) and holds the hosted run
in a slot only this module names. Engine code that must map a handle back to its run (for
example ``SubprocessEngine.sandbox_pid``) and tests that inspect a run's internals use
:func:`hosted_run_of`, the one documented way in.
"""

from __future__ import annotations

from .._questions import AnswerReceipt, PendingQuestions
from .._result import WorkflowResult
from .._run import WorkflowRun
from .host.host import HostedRun

__all__ = ["RunHandle", "hosted_run_of"]


class RunHandle(WorkflowRun):
    """One started run, as its caller sees it. Built only by an engine's ``start()``.

    Has no ``__dict__``: nothing but the seam's names can be read from it or set on it.
    """

    __slots__ = ("_hosted", "id", "meta")

    def __init__(self, hosted: HostedRun) -> None:
        self._hosted = hosted
        self.id = hosted.id
        self.meta = hosted.meta

    async def result(self) -> WorkflowResult:
        return await self._hosted.result()

    def cancel(self, reason: str | None = None) -> None:
        self._hosted.cancel(reason)

    async def dispose(self) -> None:
        await self._hosted.dispose()

    def pending(self) -> PendingQuestions:
        return self._hosted.pending()

    def answer(self, qid: str, value: object) -> AnswerReceipt:
        return self._hosted.answer(qid, value)

    def __repr__(self) -> str:
        return f"<WorkflowRun {self._hosted.id}>"


def hosted_run_of(run: object) -> HostedRun | None:
    """The engine-side run behind ``run`` if it is a :class:`RunHandle`, else None.

    For engine code and tests only; never hand the result to a caller of the engine."""
    return run._hosted if isinstance(run, RunHandle) else None
