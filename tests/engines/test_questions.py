"""``ask()`` and ``checkpoint()`` (docs/scripts.md, "Asking a person"; SPEC §25), on both engines
and both backends: who answers (``run.answer()``, ``answers=``), validation that leaves the
question open, timeouts, option checks, events, parking with ``park=True``, and that a question
takes no agent slot, no cap and no budget."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, await_until, subprocess_factory

from dsh_workflow import (
    EchoProvider,
    EngineConfig,
    QuestionAnswered,
    QuestionAsked,
    QuickJSEngine,
    WorkflowEnded,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowEvent,
    WorkflowRun,
    WorkflowStartRequest,
)
from dsh_workflow.testing import AutoAnswer, FunctionProvider, check_run_events

pytestmark = pytest.mark.anyio

META = {"name": "asks", "description": "asks a person"}


def _engines() -> dict[str, Any]:
    engines: dict[str, Any] = {"quickjs": lambda config, provider, **kw: QuickJSEngine(
        config, provider=provider, **kw)}
    if subprocess_factory(pool_size=1) is not None:
        from dsh_workflow import SubprocessEngine

        engines["subprocess"] = lambda config, provider, **kw: SubprocessEngine(
            config, provider=provider, pool_size=1, **kw)
    else:
        engines["subprocess"] = None
    return engines


ENGINES = _engines()


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


async def open_questions(run: WorkflowRun, count: int = 1) -> list[Any]:
    """Wait (bounded) until ``run`` has ``count`` open questions."""
    await await_until(lambda: len(run.pending()) >= count,
                      what=f"{count} open question(s)", timeout=20)
    return list(await run.pending())


async def test_ask_resolves_to_the_answer_and_an_invalid_one_leaves_it_open(
        make_engine: Any) -> None:
    events: list[WorkflowEvent] = []
    async with make_engine(EngineConfig(), EchoProvider()) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            const first = await agent("warm up");
            const name = await ask("Your name?", {details: "for the greeting", label: "name"});
            return {first, name};"""))
        (question,) = await open_questions(run)
        assert (question.qid, question.seq, question.kind) == ("q1", 2, "ask")
        assert question.details == "for the greeting" and question.schema == {"type": "string"}
        with pytest.raises(WorkflowError) as refused:
            run.answer("q1", 42)
        assert refused.value.code is WorkflowErrorCode.INVALID_ARGUMENT
        assert [q.qid for q in run.pending()] == ["q1"]  # still open
        with pytest.raises(WorkflowError):
            run.answer("q9", "x")
        answered = await run.answer("q1", "Ada")
        assert answered.qid == "q1"
        result = await run.result()
        await run.dispose()
    assert result.value == {"first": "echo: warm up", "name": "Ada"}
    assert result.agents_started == 1
    check_run_events(events, run.id)
    asked = [e for e in events if isinstance(e, QuestionAsked)]
    done = [e for e in events if isinstance(e, QuestionAnswered)]
    assert [(e.qid, e.seq, e.kind, e.question) for e in asked] == [("q1", 2, "ask", "Your name?")]
    assert [(e.qid, e.seq, e.by) for e in done] == [("q1", 2, "caller")]


async def test_checkpoints_choices_and_schemas_are_answered_by_their_kind(
        make_engine: Any) -> None:
    async with make_engine(EngineConfig(), EchoProvider()) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            const ok = await checkpoint("Deploy?", {details: "3 services"});
            const colour = await ask("Colour?", {choices: ["red", "blue"]});
            const many = await ask("Sizes?", {choices: ["s", "m", "l"], multiple: true});
            const form = await ask("Form?", {schema: {type: "object",
                properties: {n: {type: "integer", minimum: 1}}, required: ["n"]}});
            const no = await checkpoint("Really?");
            return {ok, colour, many, form, no};"""))
        wrong: dict[str, list[Any]] = {
            "q1": ["yes", 1, None], "q2": ["green", ["red"]], "q3": ["s", ["s", "x"], ["s", "s"]],
            "q4": [{"n": 0}, {}, "n"], "q5": ["false"]}
        right: dict[str, Any] = {"q1": True, "q2": "blue", "q3": ["m", "s"], "q4": {"n": 3},
                                 "q5": False}
        for qid in ["q1", "q2", "q3", "q4", "q5"]:
            (question,) = await open_questions(run)
            assert question.qid == qid
            for value in wrong[qid]:
                with pytest.raises(WorkflowError):
                    run.answer(qid, value)
            await run.answer(qid, right[qid])
        result = await run.result()
        await run.dispose()
    assert result.value == {"ok": True, "colour": "blue", "many": ["m", "s"], "form": {"n": 3},
                            "no": False}


async def test_a_rejected_checkpoint_with_on_reject_throw_is_a_fatal_cancel_naming_it(
        make_engine: Any) -> None:
    async with make_engine(EngineConfig(), EchoProvider()) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            const r = await parallel([() => checkpoint("Ship it?", {onReject: "throw"})]);
            return r;"""))
        await open_questions(run)
        run.answer("q1", False)
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "error"
    assert result.error_code is WorkflowErrorCode.CANCELLED
    assert "Ship it?" in (result.error or "")


async def test_timeouts_apply_on_timeout(make_engine: Any) -> None:
    async with make_engine(EngineConfig(), EchoProvider()) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            const a = await ask("a", {timeout: 0.1, default: "fallback"});
            const b = await ask("b", {timeout: "0.1s", onTimeout: "null"});
            const c = await checkpoint("c", {timeout: 0.1, default: true});
            const d = await checkpoint("d", {timeout: 0.1});
            let e;
            try { await ask("e", {timeout: 0.1, onTimeout: "throw"}); } catch (err) { e = err.code; }
            let f;
            try { await ask("f", {timeout: 0.1}); } catch (err) { f = err.code; }
            return {a, b, c, d, e, f};"""))
        result = await run.result()
        await run.dispose()
    assert result.value == {"a": "fallback", "b": None, "c": True, "d": False, "e": "TIMEOUT",
                            "f": "TIMEOUT"}


@pytest.mark.parametrize(("call", "code", "words"), [
    ('ask("x", {bogus: 1})', "UNSUPPORTED_OPTION", "supported: schema, choices"),
    ('checkpoint("x", {choices: ["a"]})', "UNSUPPORTED_OPTION", "onReject"),
    ('ask("")', "INVALID_ARGUMENT", "non-empty question"),
    ('ask("x", {choices: "a"})', "INVALID_ARGUMENT", "choices must be a list"),
    ('ask("x", {choices: ["a", "a"]})', "INVALID_ARGUMENT", "twice"),
    ('ask("x", {multiple: true})', "INVALID_ARGUMENT", "needs choices"),
    ('ask("x", {timeout: "soon"})', "INVALID_ARGUMENT", "timeout must be"),
    ('ask("x", {timeout: -1})', "INVALID_ARGUMENT", "timeout must be"),
    ('ask("x", {onTimeout: "ignore"})', "INVALID_ARGUMENT", "onTimeout must be one of"),
    ('checkpoint("x", {onReject: "later"})', "INVALID_ARGUMENT", "onReject must be one of"),
    ('ask("x", {choices: ["a"], default: "b"})', "INVALID_ARGUMENT", "default"),
    ('checkpoint("x", {default: "yes"})', "INVALID_ARGUMENT", "default"),
    ('ask("x", {schema: {type: "string"}})', "UNSUPPORTED_SCHEMA", "object"),
    ('ask("x", {schema: {type: "object"}, choices: ["a"]})', "INVALID_ARGUMENT", "not both"),
    ('ask("x", {details: () => 1})', "INVALID_ARGUMENT", "plain JSON data"),
])
async def test_bad_options_are_fatal_as_agent_options_are(make_engine: Any, call: str, code: str,
                                                          words: str) -> None:
    async with make_engine(EngineConfig(), EchoProvider()) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=f"""
            const r = await parallel([() => {call}]);
            return r;"""))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "error", result
    assert result.error_code == code
    assert words in (result.error or "")


async def test_questions_take_no_slot_no_cap_and_no_budget(make_engine: Any) -> None:
    async with make_engine(EngineConfig(max_total_agents=1, max_concurrent_agents=1,
                                        budget_tokens=1),
                           EchoProvider()) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            const a = await agent("spend it all");
            const answers = await Promise.all([ask("one"), ask("two"), ask("three")]);
            return {a, answers, spent: budget.spent() >= budget.total};"""))
        questions = await open_questions(run, 3)
        for question in questions:
            run.answer(question.qid, question.question.upper())
        result = await run.result()
        await run.dispose()
    assert result.value == {"a": "echo: spend it all", "answers": ["ONE", "TWO", "THREE"],
                            "spent": True}


async def test_an_answer_provider_answers_and_an_invalid_answer_never_reaches_the_script(
        make_engine: Any, caplog: pytest.LogCaptureFixture) -> None:
    answers = AutoAnswer({"Name?": "Ada", "Age?": "not a number"})
    events: list[WorkflowEvent] = []
    async with make_engine(EngineConfig(), EchoProvider(), answers=answers) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            const name = await ask("Name?");
            const age = await ask("Age?", {schema: {type: "object",
                properties: {years: {type: "integer"}}, required: ["years"]}});
            return {name, age};"""))
        # "Name?" is open too until the provider's answer is delivered: wait for the provider
        # to have refused its answer to "Age?" (then "Name?" is long answered)
        await await_until(lambda: any("answer to q2 is invalid" in record.getMessage()
                                      for record in caplog.records),
                          what="the answer provider's answer to q2 refused", timeout=20)
        (question,) = await open_questions(run)
        assert question.question == "Age?"  # the provider's invalid answer left it open
        await run.answer(question.qid, {"years": 36})
        result = await run.result()
        await run.dispose()
    assert result.value == {"name": "Ada", "age": {"years": 36}}
    assert [(e.qid, e.by) for e in events if isinstance(e, QuestionAnswered)] == [
        ("q1", "answers"), ("q2", "caller")]


async def test_a_callable_auto_answer_gets_the_question(make_engine: Any) -> None:
    answers = AutoAnswer(lambda q: q.kind == "checkpoint" or q.choices[-1])  # type: ignore[index]
    async with make_engine(EngineConfig(), EchoProvider(), answers=answers) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            return [await checkpoint("go?"), await ask("which?", {choices: ["a", "b"]})];"""))
        result = await run.result()
        await run.dispose()
    assert result.value == [True, "b"]
    assert [q.qid for q in answers.asked] == ["q1", "q2"]


async def test_park_true_parks_a_run_waiting_only_on_questions(make_engine: Any) -> None:
    events: list[WorkflowEvent] = []
    gate = anyio.Event()

    async def slow(request: Any) -> str:
        await gate.wait()
        return "slow done"

    async with make_engine(EngineConfig(), FunctionProvider(slow), park=True) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            const [a, b, c] = await Promise.all([agent("slow"), ask("one?"), checkpoint("two?")]);
            return {a, b, c};"""))
        await open_questions(run, 2)
        await anyio.sleep(0.2)
        assert run.pending()  # a child still runs: the run does not park
        gate.set()
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "waiting" and result.waiting_reason == "question"
    assert result.value is None and result.error is None and result.error_code is None
    assert [(q.qid, q.kind, q.question) for q in result.pending] == [
        ("q1", "ask", "one?"), ("q2", "checkpoint", "two?")]
    assert result.agents_started == 1 and result.agents_failed == 0
    ended = [e for e in events if isinstance(e, WorkflowEnded)]
    assert [(e.stop_reason, e.waiting_reason) for e in ended] == [("waiting", "question")]
    check_run_events(events, run.id)


async def test_a_run_that_returns_with_a_question_open_completes(make_engine: Any) -> None:
    async with make_engine(EngineConfig(), EchoProvider(), park=True) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            ask("never awaited"); return 1;"""))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed" and result.value == 1


async def test_without_park_or_answers_the_run_waits_for_answer(make_engine: Any) -> None:
    async with make_engine(EngineConfig(), EchoProvider()) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return await ask('q?')"))
        await open_questions(run)
        await anyio.sleep(0.3)
        assert [q.qid for q in run.pending()] == ["q1"]  # waits; neither parks nor stalls
        run.answer("q1", "a")  # plain, not awaited
        result = await run.result()
        await run.dispose()
    assert result.value == "a"


async def test_cancel_while_waiting_ends_cancelled_and_answer_then_refuses(
        make_engine: Any) -> None:
    async with make_engine(EngineConfig(), EchoProvider()) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return await ask('q?')"))
        await open_questions(run)
        run.cancel()
        result = await run.result()
        with pytest.raises(WorkflowError):
            run.answer("q1", "late")
        assert list(run.pending()) == []
        await run.dispose()
    assert result.stop_reason == "cancelled"


async def test_a_runaway_loop_of_questions_is_stopped(make_engine: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_workflow._engines.host import questions

    monkeypatch.setattr(questions, "MAX_QUESTIONS", 3)
    async with make_engine(EngineConfig(), EchoProvider(), answers=AutoAnswer(str)) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            const out = [];
            for (let i = 0; i < 5; i++) out.push(await ask("n" + i));
            return out;"""))
        result = await run.result()
        await run.dispose()
    assert result.error_code is WorkflowErrorCode.RESOURCE_LIMIT
    assert "asked 3 questions" in (result.error or "")


async def test_an_answer_provider_may_name_who_it_is(make_engine: Any) -> None:
    class Terminal:
        answered_by = "terminal"

        async def answer(self, question: Any) -> Any:
            return "typed"

    events: list[WorkflowEvent] = []
    async with make_engine(EngineConfig(), EchoProvider(), answers=Terminal()) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script="return await ask('q?')"))
        result = await run.result()
        await run.dispose()
    assert result.value == "typed"
    assert [e.by for e in events if isinstance(e, QuestionAnswered)] == ["terminal"]
