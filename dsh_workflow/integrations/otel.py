"""OpenTelemetry for workflow runs: every run a trace, with money on it (docs/telemetry.md).

``OtelTelemetry`` is the :class:`~dsh_workflow._telemetry.Telemetry` an engine takes as
``telemetry=``. It follows the GenAI semantic conventions of OpenTelemetry semantic conventions
v1.44.0 (``invoke_workflow`` and ``invoke_agent`` spans, ``gen_ai.*`` attributes and metrics);
what the conventions do not name is spelled ``dsh.*``. It needs ``opentelemetry-api`` (the
``otel`` extra) and records nothing until an SDK is installed (a tracer or meter provider given
here, or the global ones).

Spans: one ``invoke_workflow {meta.name}`` per run, a child ``invoke_agent {name}`` per started
child (opened when its slot is granted, ended with its ``AgentEnded``), a zero-length one per
replayed call, a nested ``invoke_workflow {name}`` per ``workflow()`` call; phases, logs (at most
:data:`MAX_LOG_EVENTS` per span), retries, questions and warnings as span events. Prompts and
answers are recorded only with ``capture_content=True`` or
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .._events import (
    AgentEnded,
    AgentReplayed,
    AgentRetried,
    AgentStarted,
    LogEmitted,
    PhaseStarted,
    QuestionAnswered,
    QuestionAsked,
    WorkflowEvent,
)
from .._result import WorkflowResult
from .._subagent import ProviderInfo, SubagentRequest, SubagentResult, Usage
from .._telemetry import RunStart, is_traceparent

__all__ = ["CONTENT_ENV", "MAX_LOG_EVENTS", "SEMCONV_VERSION", "OtelTelemetry"]

#: The revision of the semantic conventions followed (docs/telemetry.md).
SEMCONV_VERSION = "1.44.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
#: Prompts and answers are recorded when this variable is ``true`` (or ``capture_content``).
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Most log events one span carries; later logs are counted in ``dsh.logs.dropped``.
MAX_LOG_EVENTS = 1000
#: Longest wait before counted agents and cost are added to their counters (seconds).
_COUNT_EVERY_S = 1.0
#: Longest text of one log or question event (characters; longer ones are cut).
_MAX_EVENT_TEXT = 4000

_SCOPE = "dsh_workflow"


def _version() -> str | None:
    """The installed package's version (the instrumentation scope's), when installed."""
    try:
        return importlib.metadata.version("dsh-workflow")
    except importlib.metadata.PackageNotFoundError:
        return None


def _traceparent(span: Span) -> str | None:
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _span_context(traceparent: str) -> SpanContext:
    _, trace_id, span_id, flags = traceparent.split("-")
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                       trace_flags=TraceFlags(int(flags, 16)))


def _usage_attributes(usage: Usage) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
    }
    if usage.cost_usd is not None:
        attributes["gen_ai.usage.cost"] = usage.cost_usd
        attributes["operation.cost"] = usage.cost_usd
    return attributes


def _from_prompt(label: str, prompt: str) -> bool:
    """True when ``label`` may be the one the engine makes from the prompt when a call gives
    none (its first line, cut with an ellipsis): content, recorded only with the opt-in."""
    first = prompt.split("\n", 1)[0]
    return label == first or (label.endswith("…") and first.startswith(label[:-1]))


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_EVENT_TEXT else text[:_MAX_EVENT_TEXT] + "…"


def _messages(role: str, text: str, finish: str | None = None) -> str:
    """One message in the conventions' JSON shape of ``gen_ai.input/output.messages``."""
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish is not None:
        message["finish_reason"] = finish
    return json.dumps([message], ensure_ascii=False)


@dataclass
class _Agent:
    span: Span
    started: float  # perf_counter
    provider: str
    model: str | None = None
    response_model: str | None = None
    named: bool = False  # its request was seen (name, model, output type)
    context: otel_context.Context | None = None  # with its span current (once named)
    traceparent: str | None = None


@dataclass
class _Run:
    span: Span
    name: str
    provider: ProviderInfo
    started: float  # perf_counter
    agents: dict[int, _Agent] = field(default_factory=dict)
    nested: dict[int, Span] = field(default_factory=dict)
    logs: int = 0
    logs_dropped: int = 0
    #: Agents by (outcome, provider, model) and cost by (provider, model), not yet added.
    outcomes: dict[tuple[str, str, str | None], int] = field(default_factory=dict)
    costs: dict[tuple[str, str | None], float] = field(default_factory=dict)
    counted_at: float = 0.0  # perf_counter of the last add
    context: otel_context.Context | None = None  # with the run's span current

    def __post_init__(self) -> None:
        self.context = trace.set_span_in_context(self.span)


class _Current:
    """Makes an agent's span the current span for a block; yields its ``traceparent``."""

    __slots__ = ("_agent", "_token")

    def __init__(self, agent: _Agent) -> None:
        self._agent = agent
        self._token: object = None

    def __enter__(self) -> str | None:
        assert self._agent.context is not None
        self._token = otel_context.attach(self._agent.context)
        return self._agent.traceparent

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]  # attach's token


class OtelTelemetry:
    """Traces and metrics of workflow runs through OpenTelemetry (module docstring).

    ``tracer_provider`` / ``meter_provider``: where spans and metrics go (None: the global
    providers, as installed by the application). ``capture_content``: record prompts, answers,
    questions and log texts' content attributes (also on when
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``). One instance may serve several
    engines; it never raises into a run.
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None,
                 capture_content: bool = False) -> None:
        tracers = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        meters = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        version = _version()
        self._tracer = tracers.get_tracer(_SCOPE, version, schema_url=SCHEMA_URL)
        meter = meters.get_meter(_SCOPE, version, schema_url=SCHEMA_URL)
        self.capture_content = capture_content \
            or os.environ.get(CONTENT_ENV, "").strip().lower() == "true"
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}",
            description="Tokens used by each agent, by token type (input, output) and model")
        self._agent_duration = meter.create_histogram(
            "gen_ai.invoke_agent.duration", unit="s",
            description="How long each started agent ran, from its slot to its end")
        self._workflow_duration = meter.create_histogram(
            "gen_ai.workflow.duration", unit="s",
            description="How long each workflow run took, from start to its result")
        self._cost = meter.create_counter(
            "gen_ai.client.cost", unit="USD",
            description="What the agents cost in US dollars, by model")
        self._outcomes = meter.create_counter(
            "dsh.agents", unit="{agent}",
            description="Agents by outcome (completed, failed, cancelled, timeout, replayed)")
        self._runs: dict[str, _Run] = {}

    # ---- runs ---------------------------------------------------------------------------

    def run_started(self, start: RunStart) -> str | None:
        """Open the run's ``invoke_workflow`` span: under the caller's current span, or for a
        resumed run as the root of a new trace."""
        name = start.meta.name
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.workflow.name": name,
            "gen_ai.conversation.id": start.run_id,
            "gen_ai.provider.name": start.provider.kind,
            "dsh.run.id": start.run_id,
        }
        parent = None
        if start.resumed_from is not None:
            attributes["dsh.run.resumed_from"] = start.resumed_from
            parent = otel_context.Context()  # a resumed run is a new trace, linked later
        span = self._tracer.start_span(f"invoke_workflow {name}", context=parent,
                                       kind=SpanKind.INTERNAL, attributes=attributes)
        now = time.perf_counter()
        self._runs[start.run_id] = _Run(span=span, name=name, provider=start.provider,
                                        started=now, counted_at=now)
        return _traceparent(span)

    def run_linked(self, run_id: str, traceparent: str) -> None:
        """Link a resumed run's span to the original run's workflow span."""
        run = self._runs.get(run_id)
        if run is not None and is_traceparent(traceparent):
            run.span.add_link(_span_context(traceparent), {"dsh.link": "resumed_from"})

    def run_ended(self, run_id: str, result: WorkflowResult | None) -> None:
        """End everything of the run's trace, the workflow span last, and record its
        duration."""
        run = self._runs.pop(run_id, None)
        if run is None:
            return
        for seq in sorted(run.agents):  # the engine ends every child; this is a safety net
            agent = run.agents.pop(seq)
            agent.span.set_attribute("dsh.agent.outcome", "cancelled")
            agent.span.end()
        for span in run.nested.values():
            span.end()
        self._add_counts(run, time.perf_counter())
        span = run.span
        error_type: str | None
        if result is None:
            error_type = "ENGINE_ERROR"
            span.set_attribute("dsh.stop_reason", "error")
        else:
            error_type = None if result.error_code is None or result.stop_reason == "waiting" \
                else str(result.error_code.value)
            span.set_attributes({
                "dsh.stop_reason": result.stop_reason,
                "dsh.agents.started": result.agents_started,
                "dsh.agents.failed": result.agents_failed,
                "dsh.agents.cancelled": result.agents_cancelled,
                "dsh.agents.replayed": result.agents_replayed,
                "dsh.agents.unpriced": result.agents_unpriced,
                **_usage_attributes(result.usage),
            })
            for warning in result.warnings:
                span.add_event("dsh.warning", {"dsh.message": _cut(warning)})
        if run.logs_dropped:
            span.set_attribute("dsh.logs.dropped", run.logs_dropped)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_workflow",
                                      "gen_ai.workflow.name": run.name}
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR))
            span.set_attribute("error.type", error_type)
            attributes["error.type"] = error_type
        span.end()
        self._workflow_duration.record(time.perf_counter() - run.started, attributes)

    def nested_workflow(self, run_id: str, call_id: int, name: str | None) -> None:
        """A ``workflow()`` call's saved workflow began (``name``) or ended (None)."""
        run = self._runs.get(run_id)
        if run is None:
            return
        if name is None:
            span = run.nested.pop(call_id, None)
            if span is not None:
                span.end()
            return
        run.nested[call_id] = self._tracer.start_span(
            f"invoke_workflow {name}", context=run.context,
            kind=SpanKind.INTERNAL,
            attributes={"gen_ai.operation.name": "invoke_workflow",
                        "gen_ai.workflow.name": name, "gen_ai.conversation.id": run_id,
                        "dsh.run.id": run_id, "dsh.nested": True})

    # ---- events -------------------------------------------------------------------------

    def observe(self, event: WorkflowEvent) -> None:
        """Turn one run event into spans, span events and metrics."""
        run = self._runs.get(event.run.id)
        if run is None:
            return
        if isinstance(event, AgentStarted):
            self._agent_started(run, event)
        elif isinstance(event, AgentEnded):
            self._agent_ended(run, event)
        elif isinstance(event, AgentReplayed):
            self._agent_replayed(run, event)
        elif isinstance(event, AgentRetried):
            agent = run.agents.get(event.seq)
            if agent is not None:
                agent.span.add_event("dsh.retry", {
                    "dsh.attempt": event.attempt, "dsh.retry.cause": event.cause,
                    "dsh.retry.delay_s": event.delay_s, "dsh.message": _cut(event.message)})
        elif isinstance(event, PhaseStarted):
            run.span.add_event("dsh.phase", {"dsh.phase": _cut(event.title)})
        elif isinstance(event, LogEmitted):
            if run.logs >= MAX_LOG_EVENTS:
                run.logs_dropped += 1
            else:
                run.logs += 1
                run.span.add_event("dsh.log", {"dsh.message": _cut(event.message)})
        elif isinstance(event, QuestionAsked):
            attributes: dict[str, Any] = {"dsh.question.id": event.qid,
                                          "dsh.question.kind": event.kind, "dsh.seq": event.seq}
            if self.capture_content:
                attributes["dsh.question.text"] = _cut(event.question)
            run.span.add_event("dsh.question.asked", attributes)
        elif isinstance(event, QuestionAnswered):
            run.span.add_event("dsh.question.answered", {
                "dsh.question.id": event.qid, "dsh.question.by": event.by,
                "dsh.seq": event.seq})

    @staticmethod
    def _agent_attributes(run: _Run, run_id: str, seq: int,
                          phase: str | None) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": f"{run_id}:{seq}",
            "gen_ai.provider.name": run.provider.kind,
            "gen_ai.caller.type": "workflow",
            "dsh.seq": seq,
        }
        if phase is not None:
            attributes["dsh.phase"] = phase
        return attributes


    def _agent_started(self, run: _Run, event: AgentStarted) -> None:
        model = event.model if event.model is not None else run.provider.default_model
        attributes = self._agent_attributes(run, event.run.id, event.seq, event.phase)
        if model is not None:
            attributes["gen_ai.request.model"] = model
        # Named once its request shows whether the label is the prompt's (child_call).
        span = self._tracer.start_span("invoke_agent",
                                       context=run.context,
                                       kind=SpanKind.CLIENT, attributes=attributes)
        run.agents[event.seq] = _Agent(span=span, started=time.perf_counter(),
                                       provider=run.provider.kind, model=model)

    def _agent_replayed(self, run: _Run, event: AgentReplayed) -> None:
        attributes = self._agent_attributes(run, event.run.id, event.seq, event.phase)
        attributes["dsh.replayed"] = True
        # A replayed call's request is not at hand: its label may be the prompt's first line.
        name = "invoke_agent" if not self.capture_content else f"invoke_agent {event.label}"
        if self.capture_content:
            attributes["gen_ai.agent.name"] = attributes["dsh.label"] = event.label
        now = time.time_ns()
        span = self._tracer.start_span(name,
                                       context=run.context,
                                       kind=SpanKind.CLIENT, attributes=attributes,
                                       start_time=now)
        span.end(end_time=now)
        self._count(run, "replayed", run.provider.kind, None, None)

    def _agent_ended(self, run: _Run, event: AgentEnded) -> None:
        agent = run.agents.pop(event.seq, None)
        if agent is None:
            return
        span = agent.span
        model = agent.response_model or agent.model
        attributes: dict[str, Any] = {"dsh.agent.outcome": event.outcome}
        if agent.response_model is not None:
            attributes["gen_ai.response.model"] = agent.response_model
        metric: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent",
                                  "gen_ai.provider.name": agent.provider}
        if model is not None:
            metric["gen_ai.request.model"] = agent.model or model
            metric["gen_ai.response.model"] = model
        usage = event.usage
        if usage is not None:
            attributes.update(_usage_attributes(usage))
            for kind, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
                self._tokens.record(count, {**metric, "gen_ai.token.type": kind})
        error = None
        if event.outcome in ("failed", "timeout"):
            error = event.error.kind if event.error is not None else event.outcome
            span.set_status(Status(StatusCode.ERROR))
            attributes["error.type"] = metric["error.type"] = error
        span.set_attributes(attributes)
        span.end()
        self._agent_duration.record(time.perf_counter() - agent.started, metric)
        self._count(run, event.outcome, agent.provider, model,
                    None if usage is None else usage.cost_usd)

    def _count(self, run: _Run, outcome: str, provider: str, model: str | None,
               cost: float | None) -> None:
        """Count an agent's outcome and cost; the counters are added in batches (at the
        run's end, or once :data:`_COUNT_EVERY_S` has passed), one add per attribute set."""
        key = (outcome, provider, model)
        run.outcomes[key] = run.outcomes.get(key, 0) + 1
        if cost is not None:
            run.costs[(provider, model)] = run.costs.get((provider, model), 0.0) + cost
        now = time.perf_counter()
        if now - run.counted_at >= _COUNT_EVERY_S:
            self._add_counts(run, now)

    def _add_counts(self, run: _Run, now: float) -> None:
        run.counted_at = now
        for (outcome, provider, model), count in run.outcomes.items():
            attributes = {"dsh.agent.outcome": outcome, "gen_ai.provider.name": provider}
            if model is not None:
                attributes["gen_ai.request.model"] = model
            self._outcomes.add(count, attributes)
        for (provider, model), cost in run.costs.items():
            attributes = {"gen_ai.provider.name": provider}
            if model is not None:
                attributes["gen_ai.request.model"] = model
            self._cost.add(cost, attributes)
        run.outcomes.clear()
        run.costs.clear()

    # ---- provider calls -----------------------------------------------------------------

    def child_call(self, request: SubagentRequest) -> AbstractContextManager[str | None]:
        """The child's agent span is the current span while its provider runs."""
        run = self._runs.get(request.run_id)
        agent = None if run is None else run.agents.get(request.seq)
        if agent is None:
            return nullcontext(None)
        span = agent.span
        if not agent.named:
            agent.named = True
            attributes: dict[str, Any] = {}
            if self.capture_content or not _from_prompt(request.label, request.prompt):
                attributes["dsh.label"] = request.label
            name = request.agent_type or attributes.get("dsh.label")
            if name is not None:
                span.update_name(f"invoke_agent {name}")
                attributes["gen_ai.agent.name"] = name
            if request.schema_ is not None:
                attributes["gen_ai.output.type"] = "json"
            if request.provider:
                attributes["dsh.route"] = request.provider
            if self.capture_content:
                attributes["gen_ai.input.messages"] = _messages("user", request.prompt)
            span.set_attributes(attributes)
            agent.context = trace.set_span_in_context(span)
            agent.traceparent = _traceparent(span)
        return _Current(agent)

    def child_answered(self, request: SubagentRequest, result: SubagentResult) -> None:
        """Note the answering model (and, with content capture, the answer)."""
        run = self._runs.get(request.run_id)
        agent = None if run is None else run.agents.get(request.seq)
        if agent is None:
            return
        if result.model:
            agent.response_model = result.model
        if self.capture_content and result.stop_reason == "completed":
            if result.structured is not None:
                text = json.dumps(result.structured, ensure_ascii=False, default=str)
            else:
                text = result.text or ""
            agent.span.set_attribute("gen_ai.output.messages",
                                     _messages("assistant", text, "stop"))
