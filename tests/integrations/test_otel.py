"""OpenTelemetry (docs/telemetry.md, SPEC §27): every run a trace with money on it.

Spans and metrics go to the SDK's in-memory exporters; every test runs on both engines (where
it is about the engine) and both async backends.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from _support import ENGINE_SKIPS, subprocess_factory
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from dsh_workflow import (
    EngineConfig,
    QuickJSEngine,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowStartRequest,
)
from dsh_workflow.integrations.otel import OtelTelemetry
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


def test_importing_the_package_loads_no_opentelemetry() -> None:
    code = ("import sys, dsh_workflow; "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"
