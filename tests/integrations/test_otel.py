"""OpenTelemetry (docs/telemetry.md, SPEC §27): every run a trace with money on it.

Spans and metrics go to the SDK's in-memory exporters; every test runs on both engines (where
it is about the engine) and both async backends.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, local_http, send_json, subprocess_factory
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from dsh_workflow import (
    AgentRegistry,
    ClaudeCodeProvider,
    CommandProvider,
    EngineConfig,
    OpenAIProvider,
    ProviderInfo,
    QuestionAnswered,
    QuestionAsked,
    QuickJSEngine,
    RetryPolicy,
    RunInfo,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowLibrary,
    WorkflowMeta,
    WorkflowStartRequest,
)
from dsh_workflow._telemetry import RunStart
from dsh_workflow.integrations.otel import MAX_LOG_EVENTS, OtelTelemetry
from dsh_workflow.testing import FunctionProvider

META = {"name": "traced", "description": "a traced run"}
ENGINES = ["quickjs", "subprocess"]


def make_engine(kind: str, provider: Any, telemetry: OtelTelemetry,
                config: EngineConfig | None = None, **more: Any) -> Any:
    """An engine of ``kind`` with ``telemetry`` (the subprocess engine skipped where it cannot
    run)."""
    if kind == "quickjs":
        return QuickJSEngine(config, provider=provider, telemetry=telemetry, **more)
    if subprocess_factory(pool_size=1) is None:
        pytest.skip(ENGINE_SKIPS.get("subprocess", "engine unavailable"))
    from dsh_workflow import SubprocessEngine

    return SubprocessEngine(config, provider=provider, telemetry=telemetry, pool_size=1, **more)


class Otel:
    """An SDK tracer and meter provider writing to memory."""

    def __init__(self, capture_content: bool = False) -> None:
        self.spans_out = InMemorySpanExporter()
        self.tracers = TracerProvider()
        self.tracers.add_span_processor(SimpleSpanProcessor(self.spans_out))
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        self.telemetry = OtelTelemetry(self.tracers, self.meters,
                                       capture_content=capture_content)

    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_out.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name.startswith(prefix)]

    def metrics(self) -> dict[str, Any]:
        data = self.reader.get_metrics_data()
        found: dict[str, Any] = {}
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = metric
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    made = Otel()
    yield made
    made.tracers.shutdown()
    made.meters.shutdown()


def priced(request: SubagentRequest) -> SubagentResult:
    if request.prompt.startswith("fail"):
        return SubagentResult(stop_reason="error", error="it broke", error_kind="other")
    return SubagentResult(text="ok:" + request.prompt, model="m-answered",
                          usage=Usage(input_tokens=10, output_tokens=5, cache_read_tokens=2,
                                      cache_write_tokens=1, cost_usd=0.25))


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ENGINES)
async def test_a_run_is_one_trace_with_money_on_it(kind: str, otel: Otel) -> None:
    script = """
        phase('Scan');
        log('looking');
        const a = await parallel([() => agent('one', {label: 'first', model: 'm-asked'}),
                                  () => agent('fail now', {label: 'second'})]);
        return a;"""
    async with make_engine(kind, FunctionProvider(priced), otel.telemetry) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        result = await run.result()
        await run.dispose()
        run_id = run.id
    assert result.stop_reason == "completed", result.error

    [workflow] = otel.named("invoke_workflow")
    agents = otel.named("invoke_agent")
    assert workflow.name == "invoke_workflow traced"
    attrs = dict(workflow.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_workflow"
    assert attrs["gen_ai.workflow.name"] == "traced"
    assert attrs["gen_ai.conversation.id"] == run_id == attrs["dsh.run.id"]
    assert attrs["dsh.agents.started"] == 2 and attrs["dsh.agents.failed"] == 1
    assert attrs["gen_ai.usage.input_tokens"] == 10
    assert attrs["gen_ai.usage.cost"] == pytest.approx(0.25)
    assert workflow.status.status_code is not StatusCode.ERROR
    assert [e.name for e in workflow.events][:2] == ["dsh.phase", "dsh.log"]

    by_label = {dict(span.attributes or {})["dsh.label"]: span for span in agents}
    first, second = by_label["first"], by_label["second"]
    for span in (first, second):
        assert span.parent is not None and span.parent.span_id == workflow.context.span_id
        assert span.context.trace_id == workflow.context.trace_id
    one = dict(first.attributes or {})
    assert first.name == "invoke_agent first"
    assert one["gen_ai.agent.id"] == f"{run_id}:{one['dsh.seq']}"
    assert one["gen_ai.request.model"] == "m-asked"
    assert one["gen_ai.response.model"] == "m-answered"
    assert one["gen_ai.usage.output_tokens"] == 5
    assert one["gen_ai.usage.cache_read.input_tokens"] == 2
    assert one["gen_ai.usage.cache_creation.input_tokens"] == 1
    assert one["gen_ai.usage.cost"] == one["operation.cost"] == pytest.approx(0.25)
    assert one["gen_ai.caller.type"] == "workflow"
    assert one["dsh.phase"] == "Scan"
    assert "gen_ai.input.messages" not in one  # no content without the opt-in
    assert second.status.status_code is StatusCode.ERROR
    assert dict(second.attributes or {})["error.type"] == "provider"

    metrics = otel.metrics()
    tokens = metrics["gen_ai.client.token.usage"].data.data_points
    kinds = {(dict(p.attributes)["gen_ai.token.type"], dict(p.attributes)["gen_ai.response.model"])
             for p in tokens}
    assert kinds == {("input", "m-answered"), ("output", "m-answered")}
    assert metrics["gen_ai.invoke_agent.duration"].unit == "s"
    assert metrics["gen_ai.workflow.duration"].unit == "s"
    cost = metrics["gen_ai.client.cost"]
    assert cost.unit == "USD" and "cost" in cost.name
    assert sum(p.value for p in cost.data.data_points) == pytest.approx(0.25)
    outcomes = {dict(p.attributes)["dsh.agent.outcome"]: p.value
                for p in metrics["dsh.agents"].data.data_points}
    assert outcomes == {"completed": 1, "failed": 1}


def test_the_extra_is_the_api_alone_and_the_tests_get_the_sdk() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                            .read_text())["project"]
    extras = project["optional-dependencies"]

    def names(deps: list[str]) -> set[str]:
        return {dep.split(">")[0].split("=")[0].split("[")[0].strip() for dep in deps}

    assert names(extras["otel"]) == {"opentelemetry-api"}
    assert {"opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"} <= names(
        extras["test"])
    assert any("otel" in dep for dep in extras["test"] if dep.startswith("dsh-workflow["))


def test_importing_the_package_loads_no_opentelemetry() -> None:
    code = ("import sys, dsh_workflow; "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


# ---- propagation: the running agent span reaches the child --------------------------------

def _agent_traceparent(span: ReadableSpan) -> str:
    ctx = span.context
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


PRINT_ENV = ("import os, sys, json; sys.stdin.read(); "
             "print(json.dumps([os.environ.get('TRACEPARENT'), "
             "os.environ.get('OTEL_TRACEPARENT')]))")


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ENGINES)
async def test_a_command_child_gets_its_agent_span_in_its_environment(
        kind: str, otel: Otel) -> None:
    provider = CommandProvider([sys.executable, "-c", PRINT_ENV])
    script = ("return await parallel([() => agent('a', {label: 'la'}), "
              "() => agent('b', {label: 'lb'})]);")
    async with make_engine(kind, provider, otel.telemetry) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed", result.error
    spans = {dict(span.attributes or {})["dsh.label"]: span for span in otel.named("invoke_agent")}
    for label, printed in zip(("la", "lb"), result.value, strict=True):
        parent, otel_parent = json.loads(printed)
        assert parent == otel_parent == _agent_traceparent(spans[label])


@pytest.mark.anyio
async def test_the_claude_preset_passes_the_trace_context_on(tmp_path: Path, otel: Otel) -> None:
    fake = tmp_path / "claude"
    fake.write_text(
        f"#!{sys.executable}\nimport json, os, sys\nsys.stdin.read()\n"
        "print(json.dumps({'type': 'result', 'subtype': 'success', 'is_error': False,\n"
        "    'result': os.environ.get('TRACEPARENT', '') + ' ' + "
        "os.environ.get('OTEL_TRACEPARENT', ''),\n"
        "    'num_turns': 1, 'session_id': 's', 'usage': {'input_tokens': 1, "
        "'output_tokens': 1}}))\n")
    fake.chmod(0o755)
    async with make_engine("quickjs", ClaudeCodeProvider(str(fake)), otel.telemetry) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return await agent('x');"))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed", result.error
    [span] = otel.named("invoke_agent")
    assert result.value == f"{_agent_traceparent(span)} {_agent_traceparent(span)}"


class _Headers(BaseHTTPRequestHandler):
    """A chat-completions endpoint that answers with the ``traceparent`` header it got."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        data = json.dumps({
            "id": "c", "object": "chat.completion", "model": "served-model",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": self.headers.get("traceparent") or "none"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}).encode()
        send_json(self, data)


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with local_http(_Headers) as base:
        yield base + "/v1"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ENGINES)
async def test_the_openai_provider_sends_the_agent_span_as_traceparent(
        kind: str, endpoint: str, otel: Otel) -> None:
    provider = OpenAIProvider(base_url=endpoint, model="asked-model", api_key="sk-test",
                              timeout_s=10.0)
    async with provider, make_engine(kind, provider, otel.telemetry) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return await agent('x');"))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed", result.error
    [span] = otel.named("invoke_agent")
    assert result.value == _agent_traceparent(span)
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.request.model"] == "asked-model"
    assert attrs["gen_ai.response.model"] == "served-model"
    assert attrs["gen_ai.provider.name"] == "openai"


@pytest.mark.anyio
async def test_no_trace_context_leaks_into_a_child_without_telemetry() -> None:
    provider = CommandProvider([sys.executable, "-c", PRINT_ENV])
    async with QuickJSEngine(provider=provider) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return await agent('x');"))
        result = await run.result()
        await run.dispose()
    assert json.loads(result.value) == [None, None]


# ---- resumes, replays, bounds, content, failures ------------------------------------------

@pytest.mark.anyio
@pytest.mark.parametrize("kind", ENGINES)
async def test_a_resumed_run_is_a_new_trace_linked_to_the_original(kind: str,
                                                                    tmp_path: Path) -> None:
    script = "const a = await agent('a'); const b = await agent('b'); return [a, b];"
    first, second = Otel(), Otel()  # as two processes: the link comes from the store
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        async with make_engine(kind, FunctionProvider(), first.telemetry, store=store) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script=script))
            assert (await run.result()).stop_reason == "completed"
            await run.dispose()
            original = run.id
        async with make_engine(kind, FunctionProvider(), second.telemetry, store=store) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script=script,
                                                    resume_from=original))
            result = await run.result()
            await run.dispose()
    assert result.agents_replayed == 2
    [before] = first.named("invoke_workflow")
    [after] = second.named("invoke_workflow")
    assert after.context.trace_id != before.context.trace_id
    assert after.parent is None
    [link] = after.links
    assert (link.context.trace_id, link.context.span_id) == (before.context.trace_id,
                                                             before.context.span_id)
    attrs = dict(after.attributes or {})
    assert attrs["dsh.run.resumed_from"] == original
    assert attrs["dsh.agents.replayed"] == 2
    replayed = second.named("invoke_agent")
    assert len(replayed) == 2
    for span in replayed:
        assert dict(span.attributes or {})["dsh.replayed"] is True
        assert span.parent is not None and span.parent.span_id == after.context.span_id
        assert span.end_time is not None and span.start_time is not None
        assert span.end_time - span.start_time <= 5_000_000
    for made in (first, second):
        made.tracers.shutdown()
        made.meters.shutdown()


@pytest.mark.anyio
async def test_the_workflow_span_keeps_at_most_a_thousand_logs(otel: Otel) -> None:
    tracers = TracerProvider(span_limits=SpanLimits(max_events=5000))
    spans = InMemorySpanExporter()
    tracers.add_span_processor(SimpleSpanProcessor(spans))
    script = "for (let i = 0; i < 1500; i++) log('line ' + i); return 1;"
    async with make_engine("quickjs", FunctionProvider(), OtelTelemetry(tracers)) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        assert (await run.result()).stop_reason == "completed"
        await run.dispose()
    [workflow] = spans.get_finished_spans()
    logs = [event for event in workflow.events if event.name == "dsh.log"]
    assert len(logs) == MAX_LOG_EVENTS == 1000
    assert dict(logs[0].attributes or {})["dsh.message"] == "line 0"
    assert dict(workflow.attributes or {})["dsh.logs.dropped"] == 500
    tracers.shutdown()


@pytest.mark.anyio
async def test_prompts_and_answers_only_with_the_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    script = "return await agent('the secret plan', {schema: {type: 'object'}});"

    def answer(request: SubagentRequest) -> SubagentResult:
        return SubagentResult(text="{}", structured={"plan": "world"})

    async def spans_of(otel: Otel) -> dict[str, Any]:
        async with make_engine("quickjs", FunctionProvider(answer), otel.telemetry) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script=script))
            assert (await run.result()).stop_reason == "completed"
            await run.dispose()
        [agent] = otel.named("invoke_agent")
        return dict(agent.attributes or {})

    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    off = await spans_of(Otel())
    assert off["gen_ai.output.type"] == "json"
    assert not any("messages" in key for key in off)
    assert "the secret plan" not in repr(off)
    for made in (Otel(capture_content=True), None):
        if made is None:
            monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
            made = Otel()
        on = await spans_of(made)
        assert json.loads(on["gen_ai.input.messages"]) == [
            {"role": "user", "parts": [{"type": "text", "content": "the secret plan"}]}]
        [out] = json.loads(on["gen_ai.output.messages"])
        assert json.loads(out["parts"][0]["content"]) == {"plan": "world"}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ENGINES)
async def test_a_failed_run_has_an_error_span_with_its_code(kind: str, otel: Otel,
                                                            tmp_path: Path) -> None:
    script = "await agent('a', {agentType: 'reviewer'}); throw new Error('secret words');"
    (tmp_path / "reviewer.md").write_text("---\nname: reviewer\ndescription: Reviews\n---\n"
                                          "You review.\n", encoding="utf-8")
    async with make_engine(kind, FunctionProvider(), otel.telemetry,
                           agents=AgentRegistry([tmp_path])) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "error" and result.error_code is not None
    [workflow] = otel.named("invoke_workflow")
    assert workflow.status.status_code is StatusCode.ERROR
    attrs = dict(workflow.attributes or {})
    assert attrs["error.type"] == result.error_code.value
    assert "secret words" not in repr(attrs) and not workflow.status.description
    [agent] = otel.named("invoke_agent")
    assert agent.name == "invoke_agent reviewer"
    assert dict(agent.attributes or {})["gen_ai.agent.name"] == "reviewer"
    durations = otel.metrics()["gen_ai.workflow.duration"].data.data_points
    assert [dict(p.attributes)["error.type"] for p in durations] == [result.error_code.value]


@pytest.mark.anyio
async def test_an_agent_span_starts_when_its_child_starts_not_when_it_queues(
        otel: Otel) -> None:
    """Two children behind a cap of one: the second's span begins after the first's ends."""
    async def slow(request: SubagentRequest) -> str:
        await anyio.sleep(0.2)
        return "ok"

    script = ("return await parallel([() => agent('a', {label: 'la'}), "
              "() => agent('b', {label: 'lb'})]);")
    async with make_engine("quickjs", FunctionProvider(slow), otel.telemetry,
                           EngineConfig(max_concurrent_agents=1)) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        assert (await run.result()).stop_reason == "completed"
        await run.dispose()
    spans = {dict(s.attributes or {})["dsh.label"]: s for s in otel.named("invoke_agent")}
    a, b = spans["la"], spans["lb"]
    assert a.end_time is not None and b.start_time is not None and b.end_time is not None
    assert b.start_time >= a.end_time
    assert (b.end_time - b.start_time) / 1e9 < 1.0  # its own run, not its wait


@pytest.mark.anyio
async def test_retries_and_phases_are_span_events(otel: Otel) -> None:
    attempts: list[int] = []

    def flaky(request: SubagentRequest) -> SubagentResult:
        attempts.append(1)
        if len(attempts) == 1:
            return SubagentResult(stop_reason="error", error="busy", error_kind="overloaded")
        return SubagentResult(text="fine")

    config = EngineConfig(retry=RetryPolicy(base_s=0.01, cap_s=0.02))
    async with make_engine("quickjs", FunctionProvider(flaky), otel.telemetry,
                           config) as engine:
        run = engine.start(WorkflowStartRequest(
            meta=META, script="phase('One'); const a = await agent('x'); phase('Two'); return a;"))
        assert (await run.result()).stop_reason == "completed"
        await run.dispose()
    [agent] = otel.named("invoke_agent")
    [retry] = [event for event in agent.events if event.name == "dsh.retry"]
    assert dict(retry.attributes or {})["dsh.retry.cause"] == "overloaded"
    [workflow] = otel.named("invoke_workflow")
    phases = [dict(e.attributes or {})["dsh.phase"] for e in workflow.events
              if e.name == "dsh.phase"]
    assert phases == ["One", "Two"]


@pytest.mark.anyio
async def test_the_spans_are_complete_when_the_block_exits_with_runs_still_going(
        otel: Otel) -> None:
    entered = anyio.Event()

    async def hang(request: SubagentRequest) -> str:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with make_engine("quickjs", FunctionProvider(hang), otel.telemetry) as engine:
        engine.start(WorkflowStartRequest(meta=META, script="return await agent('x');"))
        with anyio.fail_after(30):
            await entered.wait()  # its agent runs
    names = sorted(span.name for span in otel.spans())
    assert names == ["invoke_agent", "invoke_workflow traced"]  # its label is its prompt


@pytest.mark.anyio
async def test_a_label_made_from_the_prompt_is_content(otel: Otel) -> None:
    """A call without a label is labelled with its prompt's first line: without the opt-in,
    its span is named ``invoke_agent`` and carries no label; a given label names it."""
    script = ("return await parallel([() => agent('the private prompt'), "
              "() => agent('another private prompt', {label: 'named'})]);")
    async with make_engine("quickjs", FunctionProvider(), otel.telemetry) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        assert (await run.result()).stop_reason == "completed"
        await run.dispose()
    names = sorted(span.name for span in otel.named("invoke_agent"))
    assert names == ["invoke_agent", "invoke_agent named"]
    for span in otel.spans():
        assert "private prompt" not in repr(dict(span.attributes or {}))


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ENGINES)
async def test_a_saved_workflow_run_by_workflow_is_a_nested_workflow_span(
        kind: str, otel: Otel, tmp_path: Path) -> None:
    folder = tmp_path / "workflows"
    folder.mkdir()
    (folder / "summarize.js").write_text(
        "export const meta = { name: 'summarize', description: 'saved' };\n"
        "await agent('inner', {label: 'in'}); return 'sum';", "utf-8")
    (folder / "broken.js").write_text(
        "export const meta = { name: 'broken', description: 'saved' };\n"
        "throw new Error('no');", "utf-8")
    script = """
        const before = await agent('outer', {label: 'out'});
        const sum = await workflow('summarize');
        let failed = false;
        try { await workflow('broken'); } catch (e) { failed = true; }
        return [before, sum, failed];"""
    async with make_engine(kind, FunctionProvider(), otel.telemetry,
                           library=WorkflowLibrary([folder])) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed", result.error
    workflows = {span.name: span for span in otel.named("invoke_workflow")}
    assert sorted(workflows) == ["invoke_workflow broken", "invoke_workflow summarize",
                                 "invoke_workflow traced"]
    root = workflows["invoke_workflow traced"]
    inner, broken = workflows["invoke_workflow summarize"], workflows["invoke_workflow broken"]
    for nested in (inner, broken):
        assert nested.parent is not None and nested.parent.span_id == root.context.span_id
        attrs = dict(nested.attributes or {})
        assert attrs["gen_ai.workflow.name"] in ("summarize", "broken")
        assert attrs["dsh.run.id"] == run.id
    agents = {dict(s.attributes or {})["dsh.label"]: s for s in otel.named("invoke_agent")}
    assert inner.start_time is not None and inner.end_time is not None
    assert agents["out"].end_time is not None and agents["out"].end_time <= inner.start_time
    # the saved workflow's span covers its agent, and ends before the next one begins
    assert agents["in"].start_time is not None and inner.start_time <= agents["in"].start_time
    assert agents["in"].end_time is not None and agents["in"].end_time <= inner.end_time
    assert broken.start_time is not None and inner.end_time <= broken.start_time


def test_questions_are_workflow_span_events_their_text_only_with_the_opt_in() -> None:
    """The engine emits QuestionAsked/QuestionAnswered (SPEC §25); the telemetry maps them."""
    for capture in (False, True):
        otel = Otel(capture_content=capture)
        meta = WorkflowMeta(name="asks", description="asks a person")
        info = RunInfo(id="run-1", meta=meta)
        otel.telemetry.run_started(RunStart(run_id="run-1", meta=meta,
                                            provider=ProviderInfo(kind="echo", identity="e")))
        otel.telemetry.observe(QuestionAsked(run=info, seq=3, qid="q1", question="ship it?",
                                             kind="checkpoint"))
        otel.telemetry.observe(QuestionAnswered(run=info, seq=3, qid="q1", by="terminal"))
        otel.telemetry.run_ended("run-1", None)  # ended without a result: an engine failure
        [span] = otel.spans()
        asked, answered = span.events
        assert (asked.name, answered.name) == ("dsh.question.asked", "dsh.question.answered")
        assert dict(asked.attributes or {})["dsh.question.id"] == "q1"
        assert dict(answered.attributes or {})["dsh.question.by"] == "terminal"
        assert ("dsh.question.text" in dict(asked.attributes or {})) is capture
        assert span.status.status_code is StatusCode.ERROR
        assert dict(span.attributes or {})["error.type"] == "ENGINE_ERROR"
