"""Truthful outcomes (SPEC §17, issue 26): every child that did not complete carries its reason.

Checked on both engines, on both async backends: each kind of ``AgentEnded.error``
(``provider``, ``invalid``, ``missing``, ``timeout``, ``cancelled``), redaction and bounds, the
count on the result and ``WorkflowEnded``, the stored events and run row, a provider that is
unavailable for every child (the run ends at once), the failure ceiling, and
``agent(prompt, {failure: "throw"})``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import TIGHT_CONFIG, await_until, both_engines, quickjs_factory

from dsh_workflow import (
    AgentEnded,
    AgentFailure,
    AgentStarted,
    EngineConfig,
    ProviderUnavailable,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    WorkflowEnded,
    WorkflowErrorCode,
    WorkflowEvent,
    WorkflowResult,
    WorkflowStartRequest,
)
from dsh_workflow.testing import check_run_events

pytestmark = pytest.mark.anyio

META = {"name": "failures", "description": "reasons for failed children"}
ENGINES = both_engines()
INVOICE = {"type": "object", "required": ["number"],
           "properties": {"number": {"type": "string", "pattern": r"^INV-\d{4}$"}}}


class _Provider:
    """Answers by prompt: ``error <text>`` fails with that text, ``bad`` gives an invalid
    invoice, ``textonly`` a schema call without a structured value, ``hang`` never answers,
    ``gone`` raises ProviderUnavailable, anything else completes."""

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.calls += 1
        prompt = request.prompt
        if prompt.startswith("error "):
            return SubagentResult(stop_reason="error", error=prompt[len("error "):])
        if prompt == "bad":
            return SubagentResult(text="{}", structured={"number": "INV-12"})
        if prompt == "textonly":
            return SubagentResult(text="I could not find the invoice")
        if prompt == "hang":
            await anyio.sleep_forever()
        if prompt == "gone":
            raise ProviderUnavailable("the provider refused its credentials: 401 Incorrect API "
                                      "key provided: sk-abcdefghijklmnop (http://127.0.0.1/v1)")
        if request.schema is not None:
            return SubagentResult(text="{}", structured={"number": "INV-1234"})
        return SubagentResult(text="ok:" + prompt)


async def _run(factory: Any, script: str, *, config: EngineConfig = TIGHT_CONFIG,
               provider: Any = None, args: Any = None,
               cancel_after: float | None = None) -> tuple[WorkflowResult, list[WorkflowEvent]]:
    events: list[WorkflowEvent] = []
    async with factory(config, provider or _Provider()) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script=script, args=args))
        if cancel_after is not None:
            await await_until(lambda: any(isinstance(e, AgentStarted) for e in events),
                              what="a child to start", timeout=10)
            await anyio.sleep(cancel_after)
            run.cancel("enough")
        result = await run.result()
        await run.dispose()
    check_run_events(events, run.id)
    return result, events


def _ends(events: list[WorkflowEvent]) -> list[AgentEnded]:
    return sorted((e for e in events if isinstance(e, AgentEnded)), key=lambda e: e.seq)


def _ended(events: list[WorkflowEvent]) -> WorkflowEnded:
    return next(e for e in events if isinstance(e, WorkflowEnded))


@pytest.mark.parametrize("factory", ENGINES)
async def test_every_kind_of_failure_has_its_reason(factory: Any) -> None:
    script = """
      const schema = args.schema;
      return await parallel([
        () => agent('fine'),
        () => agent('error the endpoint said no'),
        () => agent('bad', {schema}),
        () => agent('textonly', {schema}),
        () => agent('hang'),
      ]);
    """
    config = TIGHT_CONFIG.model_copy(update={"agent_timeout_s": 0.5})
    result, events = await _run(factory, script, config=config, args={"schema": INVOICE})
    assert result.stop_reason == "completed", result
    assert result.value == ["ok:fine", None, None, None, None]
    ends = _ends(events)
    assert [e.outcome for e in ends] == ["completed", "failed", "failed", "failed", "timeout"]
    assert ends[0].error is None
    provider, invalid, missing, timeout = (e.error for e in ends[1:])
    # A provider that did not classify its failure: the cause is "other", never absent.
    assert provider == AgentFailure(kind="provider", message="the endpoint said no",
                                    cause="other")
    assert invalid is not None and invalid.kind == "invalid"
    assert invalid.details == ("/number: 'INV-12' does not match '^INV-\\d{4}$'",)
    assert invalid.message == invalid.details[0]
    assert missing is not None and missing.kind == "missing"
    assert "I could not find the invoice" in missing.message
    assert timeout is not None and timeout.kind == "timeout"
    assert "agent_timeout_s=0.5" in timeout.message
    assert result.agents_failed == 4 == _ended(events).agents_failed
    assert result.agents_started == 5


@pytest.mark.parametrize("factory", ENGINES)
async def test_a_cancelled_child_says_it_was_cancelled(factory: Any) -> None:
    result, events = await _run(factory, "return await agent('hang')", cancel_after=0.1)
    assert result.stop_reason == "cancelled"
    (end,) = _ends(events)
    assert end.outcome == "cancelled"
    assert end.error is not None and end.error.kind == "cancelled"
    assert end.error.message == "cancelled: enough"
    # Counted apart from the failed ones (SPEC §23).
    assert result.agents_failed == 0 == _ended(events).agents_failed
    assert result.agents_cancelled == 1 == _ended(events).agents_cancelled


@pytest.mark.parametrize("factory", ENGINES)
async def test_secrets_are_redacted_and_the_message_bounded(factory: Any) -> None:
    long_tail = "x" * 5000
    script = (f"return await agent('error Authorization: Bearer abc.def-ghi key sk-proj-12345678 "
              f"api_key=hunter22 {long_tail}')")
    _, events = await _run(factory, script)
    (end,) = _ends(events)
    assert end.error is not None
    message = end.error.message
    assert len(message) <= 1000
    for secret in ("abc.def-ghi", "sk-proj-12345678", "hunter22"):
        assert secret not in message
    assert message.count("[REDACTED]") == 3, message


@pytest.mark.parametrize("factory", ENGINES)
async def test_an_unavailable_provider_ends_the_run_at_once(factory: Any) -> None:
    provider = _Provider()
    # The script catches everything: the fault still ends the run, and no later child starts.
    script = """
      const out = [];
      for (let i = 0; i < 5; i++) {
        try { out.push(await agent('gone')); } catch (e) { out.push('caught ' + e.code); }
      }
      return out;
    """
    result, events = await _run(factory, script, provider=provider)
    assert result.stop_reason == "error"
    assert result.error_code == WorkflowErrorCode.AGENT_FAILED
    assert result.error == ("AGENT_FAILED: agent 1 (gone) failed: the provider refused its "
                            "credentials: 401 Incorrect API key provided: [REDACTED] "
                            "(http://127.0.0.1/v1)")
    assert provider.calls == 1
    (end,) = _ends(events)
    assert end.error is not None and end.error.kind == "provider"
    assert result.agents_failed == 1


@pytest.mark.parametrize("factory", ENGINES)
async def test_the_failure_ceiling_ends_the_run(factory: Any) -> None:
    provider = _Provider()
    config = TIGHT_CONFIG.model_copy(update={"max_failed_agents": 2, "max_concurrent_agents": 1})
    script = """
      const out = [];
      for (let i = 0; i < 6; i++) out.push(await agent(i === 1 ? 'bad' : 'error quota used up',
                                                     i === 1 ? {schema: args.schema} : {}));
      return out;
    """
    result, _ = await _run(factory, script, config=config, provider=provider,
                                args={"schema": INVOICE})
    assert result.error_code == WorkflowErrorCode.AGENT_FAILED
    assert result.error == ("AGENT_FAILED: 3 agents failed, more than the failure ceiling "
                            "allows (max_failed_agents=2); the most frequent reason (2 of them): "
                            "provider: quota used up")
    assert provider.calls == 3
    assert result.agents_failed == 3


@pytest.mark.parametrize("factory", ENGINES)
async def test_no_ceiling_by_default_and_the_ceiling_itself_is_allowed(factory: Any) -> None:
    config = TIGHT_CONFIG.model_copy(update={"max_failed_agents": 2})
    script = "return [await agent('error a'), await agent('error b'), await agent('c')]"
    result, _ = await _run(factory, script, config=config)
    assert result.stop_reason == "completed" and result.value == [None, None, "ok:c"]
    assert result.agents_failed == 2


@pytest.mark.parametrize("factory", ENGINES)
async def test_failure_throw_rejects_with_a_catchable_agent_failure(factory: Any) -> None:
    script = """
      const shape = (e) => [e.name, e.kind, e.message, e.details, e.fatal === true,
                            e instanceof Error];
      const out = [];
      try { await agent('error nope', {failure: 'throw'}); } catch (e) { out.push(shape(e)); }
      try { await agent('bad', {schema: args.schema, failure: 'throw'}); }
      catch (e) { out.push(shape(e)); }
      out.push(await agent('fine', {failure: 'throw'}));
      out.push(await agent('error default'));
      out.push(await agent('error null', {failure: 'null'}));
      out.push(await parallel([() => agent('error p', {failure: 'throw'}), () => agent('x')]));
      out.push(await pipeline([1, 2], (_, i) => agent(i === 1 ? 'error q' : 'y',
                                                       {failure: 'throw'})));
      return out;
    """
    result, _ = await _run(factory, script, args={"schema": INVOICE})
    assert result.stop_reason == "completed", result.error
    assert result.value == [
        ["AgentFailure", "provider", "nope", [], False, True],
        ["AgentFailure", "invalid", "/number: 'INV-12' does not match '^INV-\\d{4}$'",
         ["/number: 'INV-12' does not match '^INV-\\d{4}$'"], False, True],
        "ok:fine", None, None, [None, "ok:x"], [None, "ok:y"]]


@pytest.mark.parametrize("factory", ENGINES)
async def test_an_uncaught_agent_failure_is_the_scripts_own_error(factory: Any) -> None:
    result, _ = await _run(factory, "return await agent('error nope', {failure: 'throw'})")
    assert result.stop_reason == "error"
    assert result.error is not None and result.error.startswith("AgentFailure: nope"), result


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize("value", ["'raise'", "1", "true"])
async def test_an_invalid_failure_option_is_fatal(factory: Any, value: str) -> None:
    script = f"try {{ await agent('a', {{failure: {value}}}); }} catch (e) {{ return e.code; }}"
    result, _ = await _run(factory, script + "; return 'not caught'")
    assert result.value == "INVALID_ARGUMENT"
    script = f"return await parallel([() => agent('a', {{failure: {value}}})])"
    result, _ = await _run(factory, script)
    assert result.error_code == WorkflowErrorCode.INVALID_ARGUMENT
    assert result.error is not None and 'option "failure" must be one of' in result.error


@pytest.mark.parametrize("factory", ENGINES)
async def test_reasons_and_the_count_are_stored(factory: Any, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite3")
    async with SQLiteRunStore(db) as store:
        if factory is quickjs_factory:
            engine: Any = QuickJSEngine(TIGHT_CONFIG, provider=_Provider(), store=store)
        else:
            from dsh_workflow import SubprocessEngine
            engine = SubprocessEngine(TIGHT_CONFIG, provider=_Provider(), store=store,
                                      pool_size=1)
        async with engine:
            run = engine.start(WorkflowStartRequest(
                meta=META, script="return [await agent('error why'), await agent('ok')]"))
            result = await run.result()
            await run.dispose()
        record = await store.get_run(run.id)
        stored = await store.events(run.id)
    assert result.agents_failed == 1
    assert record is not None and record.agents_failed == 1
    assert record.result is not None and record.result["agents_failed"] == 1
    ends = [e.data for e in stored if e.data["event"] == "AgentEnded"]
    assert ends[0]["error"] == {"kind": "provider", "message": "why", "details": [],
                                "cause": "other"}  # the store keeps the cause
    assert ends[1]["error"] is None
    workflow_end = next(e.data for e in stored if e.data["event"] == "WorkflowEnded")
    assert workflow_end["agents_failed"] == 1


@pytest.mark.parametrize("factory", ENGINES)
async def test_a_missing_command_ends_the_run_and_a_failing_one_fails_its_child(
        factory: Any, tmp_path: Path) -> None:
    import sys

    from dsh_workflow import CommandProvider

    result, events = await _run(factory, "return [await agent('a'), await agent('b')]",
                                provider=CommandProvider(["no-such-agent-cli-xyz"]))
    assert result.error == ("AGENT_FAILED: agent 1 (a) failed: the command "
                            "'no-such-agent-cli-xyz' was not found on PATH")
    assert len(_ends(events)) == 1
    failing = CommandProvider([sys.executable, "-c",
                               "import sys; print('quota exhausted', file=sys.stderr); sys.exit(4)"])
    result, events = await _run(factory, "return [await agent('a'), await agent('b')]",
                                provider=failing)
    assert result.stop_reason == "completed" and result.value == [None, None]
    for end in _ends(events):
        assert end.error == AgentFailure(
            kind="provider", cause="other",
            message="quota exhausted (command exited with status 4)\nstderr: quota exhausted")
    assert result.agents_failed == 2


@pytest.mark.parametrize("factory", ENGINES)
async def test_offline_answers_are_valid_or_say_why(factory: Any) -> None:
    from dsh_workflow import EchoProvider

    script = """
      const invoices = await parallel([1, 2, 3].map((i) =>
        () => agent('invoice ' + i, {schema: args.schema})));
      const impossible = await agent('x', {schema: {type: 'object', required: ['s'],
        properties: {s: {type: 'string', not: {const: ''}}}}});
      return {invoices, impossible};
    """
    result, events = await _run(factory, script, provider=EchoProvider(), args={"schema": INVOICE})
    assert result.stop_reason == "completed", result.error
    numbers = [invoice["number"] for invoice in result.value["invoices"]]
    assert all(re.fullmatch(r"INV-\d{4}", number) for number in numbers), numbers
    assert result.value["impossible"] is None
    end = _ends(events)[-1]
    assert end.error == AgentFailure(
        kind="provider", cause="other",
        message="the echo provider cannot build a value that satisfies the "
        "schema: /s: '' should not be valid under {'const': ''}")
    again, _ = await _run(factory, script, provider=EchoProvider(), args={"schema": INVOICE})
    assert again.value == result.value  # deterministic


@pytest.mark.parametrize("factory", ENGINES)
async def test_the_failure_option_is_part_of_no_journal_key(factory: Any, tmp_path: Path) -> None:
    from dsh_workflow import AgentReplayed

    db = str(tmp_path / "runs.sqlite3")
    events: list[WorkflowEvent] = []
    async with SQLiteRunStore(db) as store:
        if factory is quickjs_factory:
            engine: Any = QuickJSEngine(TIGHT_CONFIG, provider=_Provider(), store=store)
        else:
            from dsh_workflow import SubprocessEngine
            engine = SubprocessEngine(TIGHT_CONFIG, provider=_Provider(), store=store,
                                      pool_size=1)
        async with engine:
            engine.events.subscribe(events.append)
            first = engine.start(WorkflowStartRequest(
                meta=META, script="return await agent('a', {failure: 'throw'})"))
            assert (await first.result()).value == "ok:a"
            await first.dispose()
            again = engine.start(WorkflowStartRequest(
                meta=META, script="return await agent('a')", resume_from=first.id))
            result = await again.result()
            await again.dispose()
    assert result.value == "ok:a" and result.agents_replayed == 1
    assert [e.seq for e in events if isinstance(e, AgentReplayed) and e.run.id == again.id] == [1]


@pytest.mark.parametrize("factory", ENGINES)
async def test_a_raising_providers_secret_never_reaches_the_script_or_the_result(
        factory: Any) -> None:
    class Leaky:
        async def run(self, request: SubagentRequest) -> SubagentResult:
            raise RuntimeError("POST failed with headers {'Authorization': 'Bearer tok-123456789'}")

    result, events = await _run(factory, "return await agent('a')", provider=Leaky())
    assert result.error_code == WorkflowErrorCode.AGENT_FAILED
    assert result.error is not None and "tok-123456789" not in result.error
    assert "Bearer [REDACTED]" in result.error
    (end,) = _ends(events)
    assert end.error is not None and "tok-123456789" not in end.error.message
