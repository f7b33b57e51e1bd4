"""The engine decides what a classified provider failure means (SPEC §23, docs/providers.md,
"Faults and retries"): a user's duck-typed provider returning ``error_kind`` values, against
the real QuickJS engine; the retry policy, the shared gate, ``AgentRetried`` and its usage."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import anyio
import pytest
from _support import await_until
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import (
    AgentEnded,
    AgentRetried,
    EngineConfig,
    QuickJSEngine,
    RetryPolicy,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowEvent,
    WorkflowResult,
    WorkflowStartRequest,
)
from dsh_workflow._engines.host.faults import RetryGates, backoff_delay, retry_delay
from dsh_workflow.testing import check_run_events

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
QUICK = RetryPolicy(attempts=3, base_s=0.01, cap_s=5.0)


class Scripted:
    """A user's provider (no ``info``): answers from ``answers`` per prompt, in order, then
    completes; records each call's prompt and time."""

    def __init__(self, answers: dict[str, list[SubagentResult]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, float]] = []

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.calls.append((request.prompt, time.monotonic()))
        if request.prompt.startswith("slow"):
            await anyio.sleep(0.15)
        queue = self.answers.get(request.prompt)
        if queue:
            return queue.pop(0)
        return SubagentResult(text=f"ok {request.prompt}", usage=Usage(input_tokens=1,
                                                                       output_tokens=1))


def failed(kind: Any, error: str = "it failed", **fields: Any) -> SubagentResult:
    return SubagentResult(stop_reason="error", error=error, error_kind=kind, **fields)


async def run_script(provider: Any, script: str, *, retry: RetryPolicy = QUICK,
                     concurrency: int = 4,
                     on_limit: Literal["park", "fail"] = "park",
                     ) -> tuple[WorkflowResult, list[WorkflowEvent]]:
    events: list[WorkflowEvent] = []
    config = EngineConfig(max_concurrent_agents=concurrency, retry=retry, on_limit=on_limit)
    async with QuickJSEngine(config, provider=provider) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta={"name": "faults", "description": "d"},
                                                script=script))
        with anyio.fail_after(20):
            result = await run.result()
        await run.dispose()
    check_run_events(events, run, result)  # AgentRetried inside its agent's start and end
    return result, events


def ends(events: list[WorkflowEvent]) -> list[AgentEnded]:
    return [e for e in events if isinstance(e, AgentEnded)]


def retries(events: list[WorkflowEvent]) -> list[AgentRetried]:
    return [e for e in events if isinstance(e, AgentRetried)]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["auth", "not_found"])
async def test_a_users_provider_saying_auth_or_not_found_ends_the_run(kind: str) -> None:
    provider = Scripted({"a": [failed(kind, "Invalid API key · Please run /login")]})
    result, events = await run_script(
        provider, "const r = []; for (const p of ['a', 'b', 'c']) r.push(await agent(p, "
                  "{label: 'L' + p})); return r", concurrency=1)
    assert result.stop_reason == "error" and result.error_code == "AGENT_FAILED"
    assert result.error is not None
    assert result.error == f"AGENT_FAILED: agent 1 (La) failed ({kind}): Invalid API key · " \
                           "Please run /login"
    assert [p for p, _ in provider.calls] == ["a"]  # no other child was started
    (end,) = ends(events)
    assert end.error is not None and end.error.kind == "provider" and end.error.cause == kind


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["bad_request", "other", "timeout", None])
async def test_other_causes_stay_that_childs_failure(kind: str | None) -> None:
    provider = Scripted({"a": [failed(kind, "no such parameter")]})
    result, events = await run_script(
        provider, "return [await agent('a'), await agent('b')]", concurrency=1)
    assert result.stop_reason == "completed" and result.value == [None, "ok b"]
    failure = ends(events)[0].error
    assert failure is not None and failure.kind == "provider"
    assert failure.cause == (kind or "other")  # every failure from a result carries a cause
    assert failure.message == "no such parameter"
    assert not retries(events)


@pytest.mark.anyio
async def test_server_failures_are_retried_and_every_attempts_usage_counted() -> None:
    spent = Usage(input_tokens=10, output_tokens=5)
    provider = Scripted({"a": [failed("server", "HTTP 500: boom", usage=spent),
                               failed("overloaded", "HTTP 529: busy\nsecond line", usage=spent)]})
    result, events = await run_script(provider, "return await agent('a')")
    assert result.stop_reason == "completed" and result.value == "ok a"
    assert len(provider.calls) == 3
    first, second = retries(events)
    assert (first.seq, first.attempt, first.cause, first.message) == (1, 1, "server",
                                                                      "HTTP 500: boom")
    assert (second.attempt, second.cause, second.message) == (2, "overloaded", "HTTP 529: busy")
    assert first.usage == spent and 0 <= first.delay_s <= 0.01
    assert 0 <= second.delay_s <= 0.02  # full jitter up to base_s * 2
    assert result.usage is not None and result.usage.total_tokens == 15 + 15 + 2
    (end,) = ends(events)
    assert end.usage is not None and end.usage.total_tokens == 32  # the child's every attempt


@pytest.mark.anyio
async def test_attempts_spent_leave_a_child_failure_with_its_cause() -> None:
    provider = Scripted({"a": [failed("rate_limited", "HTTP 429")] * 3})
    result, events = await run_script(provider, "return await agent('a')")
    assert result.stop_reason == "completed" and result.value is None
    assert len(provider.calls) == 3 and len(retries(events)) == 2
    failure = ends(events)[0].error
    assert failure is not None and (failure.kind, failure.cause) == ("provider", "rate_limited")


@pytest.mark.anyio
async def test_network_after_the_retries_ends_the_run() -> None:
    provider = Scripted({"a": [failed("network", "connection refused")] * 2})
    result, events = await run_script(provider, "return await agent('a')",
                                      retry=RetryPolicy(attempts=2, base_s=0.01))
    assert result.error_code == "AGENT_FAILED"
    assert result.error == ("AGENT_FAILED: agent 1 (a) failed (network, after 2 attempts): "
                            "connection refused")
    assert len(provider.calls) == 2 and len(retries(events)) == 1


@pytest.mark.anyio
async def test_a_limit_is_not_retried_and_a_far_reset_is_a_limit() -> None:
    far = datetime.now(UTC) + timedelta(hours=3)
    provider = Scripted({"a": [failed("limit", "usage limit", retry_at=far)],
                         "b": [failed("rate_limited", "HTTP 429", retry_at=far)]})
    # on_limit="fail": the child's failure (the default parks: tests/durable/test_limit_parking.py)
    result, events = await run_script(provider, "return [await agent('a'), await agent('b')]",
                                      on_limit="fail")
    assert result.value == [None, None] and len(provider.calls) == 2
    assert [e.error.cause for e in ends(events) if e.error] == ["limit", "limit"]
    assert not retries(events)


@pytest.mark.anyio
async def test_a_retry_at_pauses_every_child_of_the_provider() -> None:
    soon = datetime.now(UTC) + timedelta(seconds=0.6)
    provider = Scripted({"a": [failed("rate_limited", "HTTP 429", retry_at=soon)]})
    # "b" starts while "a"'s pause holds: it waits for it although it was never refused.
    result, events = await run_script(
        provider, "return await parallel([() => agent('a'), async () => { "
                  "await agent('slow'); return await agent('b') }])")
    assert result.value == ["ok a", "ok b"]
    times = {prompt: at for prompt, at in provider.calls}
    first_a = provider.calls[0][1]
    assert times["b"] - first_a >= 0.5
    (retried,) = retries(events)
    assert 0.3 <= retried.delay_s <= 0.6


@pytest.mark.anyio
async def test_cancelling_during_a_retry_wait_ends_at_once() -> None:
    later = datetime.now(UTC) + timedelta(seconds=30)
    provider = Scripted({"a": [failed("rate_limited", "HTTP 429", retry_at=later)]})
    config = EngineConfig(retry=RetryPolicy(cap_s=60))
    events: list[WorkflowEvent] = []
    async with QuickJSEngine(config, provider=provider) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta={"name": "wait", "description": "d"},
                                                script="return await agent('a')"))
        await await_until(lambda: retries(events), what="the retry to be announced", timeout=5)
        started = time.monotonic()
        run.cancel("enough")
        with anyio.fail_after(5):
            result = await run.result()
        await run.dispose()
    assert time.monotonic() - started < 2
    assert result.stop_reason == "cancelled" and len(provider.calls) == 1
    assert [e.outcome for e in ends(events)] == ["cancelled"]


@pytest.mark.anyio
async def test_an_invalid_answer_is_kind_invalid_with_the_engines_details() -> None:
    provider = Scripted({"a": [failed("invalid_answer", "the answer does not satisfy the schema",
                                      structured={"n": "seven"}, text='{"n": "seven"}')],
                         "b": [failed("invalid_answer", "not JSON", text="sure, here it is")]})
    result, events = await run_script(
        provider, f"const s = {SCHEMA!r}; return [await agent('a', {{schema: s}}), "
                  "await agent('b', {schema: s})]".replace("'", '"').replace('"a"', "'a'")
        .replace('"b"', "'b'"), concurrency=1)
    assert result.value == [None, None]
    first, second = (e.error for e in ends(events))
    assert first is not None and first.kind == "invalid" and first.cause == "invalid_answer"
    assert first.details == ("/n: 'seven' is not of type 'integer'",)
    assert second is not None and second.kind == "invalid"
    assert second.details[0].startswith("/: the answer is not JSON: it began 'sure, here it is'")


def test_backoff_is_full_jitter_under_a_doubling_ceiling_capped() -> None:
    policy = RetryPolicy(attempts=10, base_s=1.0, cap_s=5.0)

    class Top:
        def uniform(self, low: float, high: float) -> float:
            return high

    # Top stands in for random.Random: the one method backoff_delay calls
    assert [backoff_delay(policy, n, Top()) for n in (1, 2, 3, 4, 5)] == [  # type: ignore[arg-type]
        1.0, 2.0, 4.0, 5.0, 5.0]
    assert all(0 <= backoff_delay(policy, 3) <= 4.0 for _ in range(50))


def test_retry_delay_says_when_and_whether_shared() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    result = failed("rate_limited", retry_at=now + timedelta(seconds=12))
    assert retry_delay(QUICK, result, 1, now) is None  # 12 s is beyond cap_s=5: a limit
    policy = RetryPolicy(attempts=3, cap_s=60)
    assert retry_delay(policy, result, 1, now) == (12.0, True)
    assert retry_delay(policy, result, 3, now) is None  # attempts spent
    assert retry_delay(policy, failed("bad_request"), 1, now) is None


@pytest.mark.anyio
async def test_a_gate_is_extended_never_shortened() -> None:
    gates = RetryGates()
    gates.close_for("k", 0.3)
    gates.close_for("k", 0.05)
    assert gates.remaining("k") > 0.2 and gates.remaining("other") == 0
    started = time.monotonic()
    await gates.wait("k")
    assert time.monotonic() - started >= 0.25


def test_the_event_contract_places_a_retry_inside_its_agent() -> None:
    from dsh_workflow import AgentStarted, RunInfo, WorkflowEnded, WorkflowStarted
    from dsh_workflow.testing import EventContractError

    info = RunInfo(id="r", meta={"name": "n", "description": "d"})
    retried = AgentRetried(run=info, seq=1, label="a", attempt=1, cause="server", delay_s=0.1)
    started = AgentStarted(run=info, seq=1, label="a")
    ended = AgentEnded(run=info, seq=1, label="a", outcome="completed")
    begin = WorkflowStarted(run=info)
    end = WorkflowEnded(run=info, stop_reason="completed", agents_started=1)
    check_run_events([begin, started, retried, ended, end], "r")
    with pytest.raises(EventContractError, match="AgentRetried outside"):
        check_run_events([begin, started, ended, retried, end], "r")


@given(attempts=st.integers(1, 20), base=st.floats(0, 100), cap=st.floats(0, 1000),
       attempt=st.integers(1, 200))
def test_a_backoff_stays_under_its_doubling_ceiling(attempts: int, base: float, cap: float,
                                                   attempt: int) -> None:
    policy = RetryPolicy(attempts=attempts, base_s=base, cap_s=cap)
    delay = backoff_delay(policy, attempt)
    assert 0 <= delay <= min(cap, base * 2.0 ** min(attempt - 1, 60))


@given(micros=st.integers(-10**9, 10**9), cap=st.floats(0, 500),
       kind=st.sampled_from(["rate_limited", "overloaded", "server", "network", "auth",
                             "limit", "bad_request"]))
def test_a_reset_within_the_cap_is_waited_for_and_beyond_it_is_a_limit(
        micros: int, cap: float, kind: Any) -> None:
    from dsh_workflow._engines.host.faults import final_cause

    now = datetime(2026, 1, 1, tzinfo=UTC)
    policy = RetryPolicy(attempts=3, cap_s=cap)
    reset = timedelta(microseconds=micros)
    seconds = reset.total_seconds()
    result = failed(kind, retry_at=now + reset)
    plan = retry_delay(policy, result, 1, now)
    retried = kind in ("rate_limited", "overloaded", "server", "network")
    if not retried or seconds > cap:
        assert plan is None
    else:
        assert plan == (max(0.0, seconds), True)
    assert final_cause(policy, result, now) == ("limit" if retried and seconds > cap else kind)


@given(text=st.text(max_size=300))
def test_any_cli_text_gets_one_known_kind(text: str) -> None:
    from typing import get_args

    from dsh_workflow import ErrorKind
    from dsh_workflow._providers.agent_cli import reset_said, said_kind

    assert said_kind(text) in get_args(ErrorKind)
    for words in (text, f"try again in {text}", f"resets {text}", f"limit reached|{text}"):
        reset = reset_said(words)
        assert reset is None or reset.tzinfo is not None
