"""``--otel`` on ``run`` and ``resume`` (and ``DSH_WORKFLOW_OTEL=1``): the run's trace and
metrics exported over OTLP/HTTP (docs/telemetry.md).

The OpenTelemetry SDK and its OTLP/HTTP exporters are configured by the standard variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ...); the
service is called ``dsh-workflow`` unless ``OTEL_SERVICE_NAME`` says otherwise. Everything is
flushed before the process exits, also when it exits at once past a spinning script.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from .errors import CliError

__all__ = ["ENV", "add_otel_option", "flush", "otel_session", "wanted"]

#: Set to ``1`` (or ``true``) to export every run's telemetry, as ``--otel`` does.
ENV = "DSH_WORKFLOW_OTEL"
_SERVICE = "dsh-workflow"
#: Longest wait for the metrics' last export at the end (milliseconds).
_FLUSH_TIMEOUT_MS = 10_000

_flushers: list[Callable[[], None]] = []


def add_otel_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--otel`` to a command that runs a workflow."""
    parser.add_argument("--otel", action="store_true",
                        help=f"export the run's trace and metrics over OTLP/HTTP (the standard "
                        f"OTEL_EXPORTER_OTLP_* variables; also {ENV}=1)")


def wanted(ns: argparse.Namespace) -> bool:
    """True when ``--otel`` was given or ``DSH_WORKFLOW_OTEL`` is ``1``/``true``."""
    return bool(getattr(ns, "otel", False)) \
        or os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes")


@contextlib.contextmanager
def otel_session(ns: argparse.Namespace) -> Iterator[Any]:
    """The ``OtelTelemetry`` an engine takes, exporting over OTLP/HTTP, when :func:`wanted`
    (else None); on leaving, every span and metric is flushed and the SDK shut down. Raises
    :class:`CliError` when the SDK or the exporter is not installed."""
    if not wanted(ns):
        yield None
        return
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import OTELResourceDetector, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from dsh_workflow.integrations.otel import OtelTelemetry
    except ImportError as exc:
        raise CliError(f"--otel needs the OpenTelemetry SDK and its OTLP/HTTP exporter ({exc}): "
                       "pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http"
                       ) from None
    # The variables' service name wins; given attributes would override it.
    named = "service.name" in OTELResourceDetector().detect().attributes
    resource = Resource.create({} if named else {"service.name": _SERVICE})
    tracers = TracerProvider(resource=resource)
    tracers.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(),
                                           export_timeout_millis=_FLUSH_TIMEOUT_MS)
    meters = MeterProvider(resource=resource, metric_readers=[reader])
    done = False

    def finish() -> None:
        nonlocal done
        if done:
            return
        done = True
        # Each shutdown exports what is left (bounded by the exporters' timeouts); an
        # unreachable collector is not the run's fault.
        with contextlib.suppress(Exception):
            tracers.shutdown()
        with contextlib.suppress(Exception):
            meters.shutdown(timeout_millis=_FLUSH_TIMEOUT_MS)

    _flushers.append(finish)
    try:
        yield OtelTelemetry(tracers, meters)
    finally:
        finish()
        _flushers.remove(finish)


def flush() -> None:
    """Flush and shut down every open session now (before an immediate exit)."""
    for finish in _flushers:
        finish()
