"""``ask()`` and ``checkpoint()``: questions a script asks a person (docs/scripts.md, "Asking a
person"; docs/embedding.md, "Questions")."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from .._errors import WorkflowError, WorkflowErrorCode
from .._events import QuestionAnswered, QuestionAsked
from .._run import WorkflowRun
from ._suite_base import ConformanceBase, assert_run_error

__all__ = ["QuestionSuite"]


async def _open(run: WorkflowRun, count: int, timeout: float) -> list[Any]:
    with anyio.fail_after(timeout):
        while len(run.pending()) < count:
            await anyio.sleep(0.01)
    return list(await run.pending())


class QuestionSuite(ConformanceBase):
    """Questions answered through the seam (``run.pending()``, ``run.answer()``).

    Checks: ``ask()`` resolves to the answer given with ``run.answer(qid, value)`` (plain or
    awaited); ``pending()`` lists the open questions in ask order (qids ``q1``, ``q2``, ...;
    seqs shared with ``agent()`` calls) and may be awaited; an invalid answer or an unknown qid
    raises ``WorkflowError`` ``INVALID_ARGUMENT`` and leaves the question open; a checkpoint
    takes ``True``/``False`` and with ``onReject: "throw"`` a rejection is a fatal ``CANCELLED``
    naming it; choices and schemas are enforced; timeouts apply ``onTimeout``; bad options are
    fatal as ``agent()``'s are; questions take no agent cap; ``QuestionAsked`` and
    ``QuestionAnswered`` carry the question's seq and qid, the answer's ``by`` is ``caller``.
    """

    @pytest.mark.anyio
    async def test_ask_resolves_to_the_callers_answer(self) -> None:
        async with self.open() as h:
            run = h.start("""
                const a = await agent('first');
                const [x, y] = await Promise.all([ask('Name?'), ask('Size?',
                    {choices: ['s', 'm']})]);
                return {a, x, y};""")
            questions = await _open(run, 2, self.result_timeout_s)
            assert [(q.qid, q.seq, q.kind) for q in questions] == [("q1", 2, "ask"),
                                                                  ("q2", 3, "ask")]
            with pytest.raises(WorkflowError) as refused:
                run.answer("q2", "xl")
            assert refused.value.code == WorkflowErrorCode.INVALID_ARGUMENT
            with pytest.raises(WorkflowError):
                run.answer("q3", "x")
            assert [q.qid for q in run.pending()] == ["q1", "q2"]
            run.answer("q2", "m")
            await run.answer("q1", "Ada")
            result = await h.result(run)
            assert result.value == {"a": "ok:first", "x": "Ada", "y": "m"}
            asked = h.events_of(run, QuestionAsked)
            answered = h.events_of(run, QuestionAnswered)
            assert sorted((e.qid, e.seq) for e in asked) == [("q1", 2), ("q2", 3)]
            assert sorted((e.qid, e.seq, e.by) for e in answered) == [("q1", 2, "caller"),
                                                                      ("q2", 3, "caller")]

    @pytest.mark.anyio
    async def test_checkpoints_take_booleans_and_on_reject_throw_cancels(self) -> None:
        async with self.open() as h:
            run = h.start("""
                const a = await checkpoint('Go?');
                const b = await checkpoint('Really?');
                await parallel([() => checkpoint('Ship it?', {onReject: 'throw'})]);
                return 'unreachable';""")
            for qid, value in (("q1", True), ("q2", False), ("q3", False)):
                (question,) = await _open(run, 1, self.result_timeout_s)
                assert (question.qid, question.kind) == (qid, "checkpoint")
                with pytest.raises(WorkflowError):
                    run.answer(qid, "yes")
                await run.answer(qid, value)
            result = await h.result(run)
            assert_run_error(result, "Ship it?", code=WorkflowErrorCode.CANCELLED)

    @pytest.mark.anyio
    async def test_timeouts_apply_on_timeout(self) -> None:
        async with self.open() as h:
            run = h.start("""
                const a = await ask('a', {timeout: 0.05, default: 'fallback'});
                const b = await ask('b', {timeout: '0.05s', onTimeout: 'null'});
                const c = await checkpoint('c', {timeout: 0.05});
                let d;
                try { await ask('d', {timeout: 0.05, onTimeout: 'throw'}); }
                catch (e) { d = e.code; }
                return {a, b, c, d};""")
            result = await h.result(run)
            assert result.value == {"a": "fallback", "b": None, "c": False, "d": "TIMEOUT"}

    @pytest.mark.anyio
    @pytest.mark.parametrize(("call", "code"), [
        ("ask('x', {colour: 'red'})", "UNSUPPORTED_OPTION"),
        ("ask('x', {choices: []})", "INVALID_ARGUMENT"),
        ("ask('x', {timeout: 'later'})", "INVALID_ARGUMENT"),
        ("checkpoint('x', {onReject: 'maybe'})", "INVALID_ARGUMENT"),
        ("ask('x', {schema: {type: 'array'}})", "UNSUPPORTED_SCHEMA"),
        ("ask(42)", "INVALID_ARGUMENT"),
    ])
    async def test_bad_options_are_fatal(self, call: str, code: str) -> None:
        async with self.open() as h:
            result = await h.result(h.start(f"return await parallel([() => {call}])"))
            assert_run_error(result, code=code)

    @pytest.mark.anyio
    async def test_questions_take_no_agent_cap(self) -> None:
        async with self.open(max_total_agents=1) as h:
            run = h.start("""
                const a = await agent('one');
                const qs = await Promise.all([ask('1'), ask('2'), ask('3')]);
                return [a, ...qs];""")
            for question in await _open(run, 3, self.result_timeout_s):
                run.answer(question.qid, question.question)
            result = await h.result(run)
            assert result.value == ["ok:one", "1", "2", "3"]
