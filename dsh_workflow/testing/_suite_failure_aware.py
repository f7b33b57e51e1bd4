"""``settle()``, ``vote()``, ``first()`` and ``gate()`` (docs/scripts.md, "Failure-aware
combinators")."""

from __future__ import annotations

from typing import Any

import pytest

from .._events import AgentEnded, AgentStarted, LogEmitted
from .._subagent import SubagentRequest, SubagentResult, Usage
from ._doubles import FailingProvider, FunctionProvider, GatedProvider
from ._suite_base import ConformanceBase, Harness, assert_hook_error, caught

__all__ = ["FailureAwareSuite"]

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _answers(request: SubagentRequest) -> SubagentResult:
    """``fail…`` prompts fail with a reason; schema calls get ``{"n": "not a number"}``
    (invalid); every other child answers ``ok:<prompt>`` and costs 5 tokens."""
    if request.prompt.startswith("fail"):
        return SubagentResult(stop_reason="error", error=f"refused {request.prompt}")
    if request.schema is not None:
        return SubagentResult(structured={"n": "not a number"})
    return SubagentResult(text="ok:" + request.prompt,
                          usage=Usage(input_tokens=2, output_tokens=3))


#: Statements that make the engine throw each fatal code the combinators must not absorb,
#: each inside one thunk ``T`` of the combinator.
FATAL = {
    "UNSUPPORTED_OPTION": ("() => agent('x', {bogus: 1})", {}),
    "AGENT_CAP": ("() => agent('over the cap')", {"max_total_agents": 1}),
    "BUDGET_EXCEEDED": ("() => agent('over budget')", {"budget_tokens": 1}),
    "AGENT_FAILED": ("() => agent('raises')", {}),
}


class FailureAwareSuite(ConformanceBase):
    """The failure-aware combinators.

    Checks: ``settle`` gives one ``{ok, value}`` / ``{ok: false, error: {kind, message,
    code?}}`` record per thunk, in order, with a failed child's own kind and reason (under the
    default ``failure: "null"`` and under ``failure: "throw"``) and a thrown error's message;
    ``vote`` counts a majority by default (4 voters need 3), honours ``quorum`` and the three
    ``failed`` modes, and lists one vote per voter; ``first`` resolves to the first value that
    completes (and satisfies ``until``), ends the losers' children ``cancelled`` before the
    script's next call (a loser's code stops at its pending call, and cancelled losers are not
    failures), and gives ``null`` when every thunk fails; ``gate`` passes the feedback back to
    ``make`` until ``check`` is satisfied or the attempts run out. All four reject with the
    fatal errors ``parallel`` propagates; bad arguments are fatal before any thunk runs.
    """

    # ---- settle ---------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_settle_keeps_every_reason_in_order(self) -> None:
        script = """
            return await settle([
              () => agent('a'),
              () => agent('fail one'),
              async () => { const r = await agent('fail two', {failure: 'throw'}); return r; },
              () => agent('typed', {schema: args.schema}),
              () => { throw new Error('plain error'); },
              () => { throw 'a string'; },
              () => { const e = new Error('coded'); e.code = 'MINE'; throw e; },
              () => 'plain value',
              () => null,
            ]);"""
        async with self.open(FunctionProvider(_answers)) as h:
            value = (await h.run(script, args={"schema": SCHEMA})).value
        assert value[0] == {"ok": True, "value": "ok:a"}
        assert value[1] == {"ok": False, "error": {"kind": "provider",
                                                    "message": "refused fail one"}}
        assert value[2] == {"ok": False, "error": {"kind": "provider",
                                                    "message": "refused fail two"}}
        assert value[3]["ok"] is False and value[3]["error"]["kind"] == "invalid"
        assert "/n" in value[3]["error"]["message"]
        assert value[4] == {"ok": False, "error": {"kind": "thrown", "message": "plain error"}}
        assert value[5] == {"ok": False, "error": {"kind": "thrown", "message": "a string"}}
        assert value[6] == {"ok": False, "error": {"kind": "thrown", "message": "coded",
                                                    "code": "MINE"}}
        assert value[7] == {"ok": True, "value": "plain value"}
        assert value[8] == {"ok": True, "value": None}

    @pytest.mark.anyio
    async def test_settle_keeps_the_failure_of_a_child_caught_inside_the_thunk(self) -> None:
        script = """
            return await settle([async () => {
              const r = await agent('fail inner');
              return r === null ? null : r.toUpperCase();
            }, async () => (await agent('b')) || 'fallback']);"""
        async with self.open(FunctionProvider(_answers)) as h:
            value = (await h.run(script)).value
        assert value == [{"ok": False, "error": {"kind": "provider",
                                                  "message": "refused fail inner"}},
                         {"ok": True, "value": "ok:b"}]

    @pytest.mark.anyio
    async def test_settle_of_nothing_is_an_empty_array(self) -> None:
        async with self.open() as h:
            assert (await h.run("return await settle([])")).value == []

    @pytest.mark.anyio
    async def test_settle_honours_concurrency(self) -> None:
        gate = GatedProvider()
        gate.release_all()
        async with self.open(gate) as h:
            result = await h.run(
                "return (await settle(['a', 'b', 'c', 'd'].map(x => () => agent(x)),"
                " {concurrency: 2})).map(r => r.value)")
        assert result.value == ["ok:a", "ok:b", "ok:c", "ok:d"]
        assert gate.max_running <= 2

    @pytest.mark.anyio
    @pytest.mark.parametrize("call", [
        pytest.param("settle('no')", id="not-an-array"),
        pytest.param("settle([() => 1, 3])", id="not-a-function"),
        pytest.param("settle([], {concurrency: 0})", id="bad-concurrency"),
        pytest.param("vote(0, i => i, {pass: v => v})", id="vote-no-voters"),
        pytest.param("vote(3, 'no', {pass: v => v})", id="vote-not-a-function"),
        pytest.param("vote(3, i => i)", id="vote-no-pass"),
        pytest.param("vote(3, i => i, {pass: v => v, quorum: 4})", id="vote-quorum-over-n"),
        pytest.param("vote(3, i => i, {pass: v => v, quorum: 1.5})", id="vote-quorum-fraction"),
        pytest.param("vote(3, i => i, {pass: v => v, failed: 'ignore'})", id="vote-bad-failed"),
        pytest.param("first({})", id="first-not-an-array"),
        pytest.param("first([() => 1], {until: 3})", id="first-until-not-a-function"),
        pytest.param("first([() => 1], {failure: 'raise'})", id="first-bad-failure"),
        pytest.param("gate('no', v => true, {attempts: 2})", id="gate-make"),
        pytest.param("gate(() => 1, null, {attempts: 2})", id="gate-check"),
        pytest.param("gate(() => 1, v => true)", id="gate-no-attempts"),
        pytest.param("gate(() => 1, v => true, {attempts: 0})", id="gate-zero-attempts"),
    ])
    async def test_bad_arguments_are_fatal_before_anything_runs(self, call: str) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            value = (await h.run(caught(f"await {call}"))).value
        assert_hook_error(value, "INVALID_ARGUMENT", call.split("(")[0] + "()")
        assert provider.requests == []

    @pytest.mark.anyio
    @pytest.mark.parametrize("call", [
        pytest.param("settle([() => agent('x')], {concurency: 2})", id="settle"),
        pytest.param("vote(2, i => agent('x'), {pass: v => v, quorom: 2})", id="vote"),
        pytest.param("first([() => agent('x')], {untill: v => v})", id="first"),
        pytest.param("gate(() => agent('x'), v => true, {attempts: 2, tries: 3})", id="gate"),
    ])
    async def test_unknown_options_are_fatal(self, call: str) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            value = (await h.run(caught(f"await {call}"))).value
        assert_hook_error(value, "UNSUPPORTED_OPTION", call.split("(")[0] + "()")
        assert provider.requests == []

    # ---- fatal transparency ---------------------------------------------------------------

    @pytest.mark.anyio
    @pytest.mark.parametrize("code", sorted(FATAL))
    @pytest.mark.parametrize("combinator", [
        "settle([T, () => agent('fine')])",
        "vote(2, i => i === 0 ? (T)() : agent('fine'), {pass: v => true})",
        "first([T])",
        "gate(T, v => ({ok: false}), {attempts: 2})",
    ])
    async def test_fatal_errors_reject_the_combinator(self, code: str, combinator: str) -> None:
        thunk, config = FATAL[code]
        provider: Any = FailingProvider() if code == "AGENT_FAILED" else FunctionProvider(
            _answers)
        # The cap and the budget are reached by a first call the script makes itself.
        before = "" if code in ("UNSUPPORTED_OPTION", "AGENT_FAILED") else "await agent('a');\n"
        statement = before + "await " + combinator.replace("T", thunk)
        async with self.open(provider, **config) as h:
            value = (await h.run(caught(statement))).value
        assert_hook_error(value, code)

    # ---- vote -----------------------------------------------------------------------------

    @pytest.mark.anyio
    @pytest.mark.parametrize(("approvals", "passed"), [(3, True), (2, False), (4, True)])
    async def test_vote_needs_a_majority_by_default(self, approvals: int,
                                                    passed: bool) -> None:
        script = ("return await vote(4, i => agent(i < args.yes ? 'yes' : 'no'), "
                  "{pass: v => v === 'ok:yes'})")
        async with self.open() as h:
            value = (await h.run(script, args={"yes": approvals})).value
        assert value["passed"] is passed
        assert (value["for"], value["against"], value["abstained"]) == (approvals,
                                                                        4 - approvals, 0)
        assert [v["vote"] for v in value["votes"]] == \
            ["for"] * approvals + ["against"] * (4 - approvals)
        assert value["votes"][0]["value"] == ("ok:yes" if approvals else "ok:no")

    @pytest.mark.anyio
    @pytest.mark.parametrize(("failed", "counts", "passed"), [
        (None, (2, 0, 2), False),
        ("abstain", (2, 0, 2), False),
        ("against", (2, 2, 0), False),
        ("for", (4, 0, 0), True),
    ])
    async def test_vote_counts_failed_voters_as_asked(self, failed: str | None,
                                                      counts: tuple[int, int, int],
                                                      passed: bool) -> None:
        option = "" if failed is None else f", failed: {failed!r}"
        # voters 0 and 1 approve; 2's child fails; 3 throws
        script = f"""
            return await vote(4, i => {{
              if (i === 3) throw new Error('voter 3 broke');
              return agent(i === 2 ? 'fail vote' : 'yes');
            }}, {{pass: v => v === 'ok:yes'{option}}});"""
        async with self.open(FunctionProvider(_answers)) as h:
            value = (await h.run(script)).value
        assert (value["for"], value["against"], value["abstained"]) == counts
        assert value["passed"] is passed
        votes = value["votes"]
        assert len(votes) == 4
        mode = failed or "abstain"
        assert [v["vote"] for v in votes] == ["for", "for", mode, mode]
        assert votes[2]["error"] == {"kind": "provider", "message": "refused fail vote"}
        assert votes[3]["error"] == {"kind": "thrown", "message": "voter 3 broke"}
        assert votes[2]["value"] is None and "error" not in votes[0]

    @pytest.mark.anyio
    async def test_vote_quorum_is_honoured_and_voters_get_their_index(self) -> None:
        script = """
            const seen = [];
            const r = await vote(5, i => { seen.push(i); return agent('v' + i); },
                                 {pass: v => v === 'ok:v0' || v === 'ok:v4', quorum: 2});
            return {r, seen};"""
        async with self.open() as h:
            value = (await h.run(script)).value
        assert sorted(value["seen"]) == [0, 1, 2, 3, 4]
        assert value["r"]["passed"] is True and value["r"]["for"] == 2
        assert value["r"]["against"] == 3

    @pytest.mark.anyio
    async def test_vote_runs_its_voters_concurrently(self) -> None:
        gate = GatedProvider()
        async with self.open(gate) as h:
            run = h.start("return await vote(3, i => agent('v' + i), {pass: v => true})")
            await gate.wait_running(3)
            gate.release_all()
            result = await h.result(run)
        assert result.value["passed"] is True and result.value["for"] == 3

    # ---- first ----------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_first_resolves_the_winner_and_cancels_the_losers_before_the_next_call(
            self) -> None:
        gate = GatedProvider()
        script = """
            const w = await first([() => agent('a'), () => agent('b'), () => agent('c')]);
            return {w, next: await agent('next')};"""
        async with self.open(gate, max_failed_agents=0) as h:
            run = h.start(script)
            await gate.wait_running(3)
            gate.release(2)
            await gate.wait_started(4)
            gate.release(4)
            result = await h.result(run)
            events = h.events_of(run, AgentStarted, AgentEnded)
        assert result.stop_reason == "completed", result.error
        assert result.value == {"w": "ok:b", "next": "ok:next"}
        ended = {e.seq: e for e in events if isinstance(e, AgentEnded)}
        assert ended[2].outcome == "completed" and ended[4].outcome == "completed"
        for loser in (1, 3):
            error = ended[loser].error
            assert ended[loser].outcome == "cancelled"
            assert error is not None and error.kind == "cancelled"
            assert "first()" in error.message
        next_started = next(i for i, e in enumerate(events)
                            if isinstance(e, AgentStarted) and e.seq == 4)
        assert all(events.index(ended[loser]) < next_started for loser in (1, 3))
        await gate.wait_until(lambda: sorted(gate.cancelled) == [1, 3],
                              what="the losers' provider calls are cancelled")
        assert 1 not in gate.finished and 3 not in gate.finished

    @pytest.mark.anyio
    async def test_first_skips_values_until_rejects_and_failures(self) -> None:
        gate = GatedProvider()
        script = """
            return await first([() => agent('a'), () => agent('b'), () => agent('c'),
                                () => { throw new Error('no'); }],
                               {until: v => v !== 'ok:a'});"""
        async with self.open(gate) as h:
            run = h.start(script)
            await gate.wait_running(3)
            gate.release(1)
            await gate.wait_finished(1)
            gate.release(3, result=SubagentResult(stop_reason="error", error="down"))
            await gate.wait_finished(3)
            gate.release(2)
            result = await h.result(run)
        assert result.value == "ok:b"

    @pytest.mark.anyio
    async def test_a_losers_code_stops_at_its_pending_call(self) -> None:
        gate = GatedProvider()
        script = """
            const w = await first([
              async () => { await agent('slow'); log('loser went on'); return agent('after'); },
              () => agent('fast'),
            ]);
            return w;"""
        async with self.open(gate) as h:
            run = h.start(script)
            await gate.wait_running(2)
            gate.release(2)
            result = await h.result(run)
            logs = h.events_of(run, LogEmitted)
        assert result.value == "ok:fast"
        assert "after" not in gate.prompts and logs == []

    @pytest.mark.anyio
    async def test_first_gives_null_when_every_thunk_fails(self) -> None:
        script = """
            return [await first([() => agent('fail a'), () => { throw new Error('x'); },
                                 () => null]),
                    await first([])];"""
        async with self.open(FunctionProvider(_answers)) as h:
            assert (await h.run(script)).value == [None, None]

    @pytest.mark.anyio
    async def test_first_with_failure_throw_rejects_with_the_last_failure(self) -> None:
        # thunk 1 always ends after thunk 0: its first child answers once thunk 0's failed
        script = """
            const out = [];
            const late = {
              child: () => agent('fail b child'),
              throw: async () => { await agent('x throw'); throw new Error('late'); },
              null: async () => { await agent('x null'); return null; },
              until: async () => { await agent('x until'); return agent('rejected'); },
            };
            for (const last of ['child', 'throw', 'null', 'until']) {
              try {
                out.push(await first([() => agent('fail a ' + last), late[last]],
                                     {failure: 'throw', until: v => v !== 'ok:rejected'}));
              } catch (e) {
                out.push({name: e.name, kind: e.kind ?? null, message: e.message,
                          fatal: e.fatal === true});
              }
            }
            return out;"""
        harness: list[Harness] = []

        async def answers(request: SubagentRequest) -> SubagentResult:
            if request.prompt.startswith(("fail b", "x ")):
                case = request.prompt.rsplit(" ", 1)[1]
                await harness[0].wait_for_event(
                    lambda e: isinstance(e, AgentEnded) and e.label == "fail a " + case)
            return _answers(request)

        async with self.open(FunctionProvider(answers)) as h:
            harness.append(h)
            value = (await h.run(script)).value
        assert value[0] == {"name": "AgentFailure", "kind": "provider",
                            "message": "refused fail b child", "fatal": False}
        assert value[1] == {"name": "Error", "kind": None, "message": "late", "fatal": False}
        assert value[2]["name"] == "Error" and "thunk 1 gave null" in value[2]["message"]
        assert "thunk 1's value did not pass until" in value[3]["message"]

    # ---- gate -----------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_gate_feeds_back_until_the_check_passes(self) -> None:
        script = """
            const calls = [];
            const r = await gate(
              (feedback, attempt) => { calls.push([feedback === undefined ? 'none' : feedback,
                                                   attempt]);
                                       return agent('draft ' + attempt); },
              value => ({ok: value === 'ok:draft 3', feedback: 'fix ' + value}),
              {attempts: 5});
            return {r, calls};"""
        async with self.open() as h:
            value = (await h.run(script)).value
        assert value["r"] == {"ok": True, "value": "ok:draft 3", "attempts": 3,
                              "feedback": "fix ok:draft 3"}
        assert value["calls"] == [["none", 1], ["fix ok:draft 1", 2], ["fix ok:draft 2", 3]]

    @pytest.mark.anyio
    async def test_gate_gives_the_last_value_and_feedback_when_attempts_run_out(self) -> None:
        script = """
            return await gate((fb, n) => agent('try ' + n),
                              v => ({ok: false, feedback: 'still wrong: ' + v}),
                              {attempts: 2});"""
        async with self.open() as h:
            value = (await h.run(script)).value
        assert value == {"ok": False, "value": "ok:try 2", "attempts": 2,
                         "feedback": "still wrong: ok:try 2"}
