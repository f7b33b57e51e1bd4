"""What tracing costs a run (SPEC §27): ``python -m benchmarks.otel_bench``.

The store-less fan-out (``parallel`` of N zero-latency echo agents, no run store), measured on
one QuickJS engine without telemetry ("off") and on one with :class:`OtelTelemetry` over the
OpenTelemetry SDK ("sdk"): a tracer provider whose batch processor hands every span to an
exporter that drops it, and a meter provider with an in-memory reader. Samples alternate
(off, sdk, off, sdk, ...) so a change in the machine's load falls on both alike; the figure is
the ratio of the medians, ``sdk ÷ off``, and the bar is at most 1.02 (2 % overhead).

    python -m benchmarks.otel_bench                 # N = 1,000, 41 samples of each
    python -m benchmarks.otel_bench --quick         # N = 200, 7 samples of each
    python -m benchmarks.otel_bench --out benchmarks/otel-latest.json

Timings are indicative on a shared machine; they are never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from dsh_workflow import EchoProvider, EngineConfig, QuickJSEngine, WorkflowStartRequest
from dsh_workflow.integrations.otel import OtelTelemetry

from .measure import machine_info, quiesce, stats

META = {"name": "fanout", "description": "store-less fan-out"}
SCRIPT = ("const r = await parallel(Array.from({length: args.n}, "
          "(_, i) => () => agent('p' + i, {label: 'c' + i}))); return r.length;")
#: The overhead SPEC §27 allows: sdk ÷ off at most this.
BAR = 1.02


class _Dropping(SpanExporter):
    """An exporter that takes every span and keeps none (the no-op exporter)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


async def _sample(engine: QuickJSEngine, n: int) -> tuple[float, float]:
    """One run's wall time and the process's CPU time over it (every thread), in ms."""
    quiesce()
    cpu = time.process_time()
    started = time.perf_counter()
    run = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT, args={"n": n}))
    result = await run.result()
    elapsed = (time.perf_counter() - started) * 1000.0
    used = (time.process_time() - cpu) * 1000.0
    await run.dispose()
    if result.value != n:
        raise AssertionError(f"the fan-out returned {result.value!r}: {result.error}")
    return elapsed, used


async def measure(n: int, reps: int, warmup: int) -> dict[str, Any]:
    """Alternate samples of the two engines (open side by side): wall and CPU ms of each."""
    exporter = _Dropping()
    tracers = TracerProvider()
    tracers.add_span_processor(BatchSpanProcessor(exporter))
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    config = EngineConfig(max_concurrent_agents=n, max_total_agents=n, warm_runtimes=2)
    provider = EchoProvider(latency_s=0.0)
    samples: dict[str, list[float]] = {"off_ms": [], "sdk_ms": [], "off_cpu_ms": [],
                                       "sdk_cpu_ms": []}
    async with QuickJSEngine(config, provider=provider) as plain, \
            QuickJSEngine(config, provider=provider,
                          telemetry=OtelTelemetry(tracers, meters)) as traced:
        for index in range(warmup + reps):
            # Which goes first alternates too, so neither always follows the other.
            pair = (plain, traced) if index % 2 == 0 else (traced, plain)
            for engine in pair:
                wall, cpu = await _sample(engine, n)
                if index >= warmup:
                    which = "off" if engine is plain else "sdk"
                    samples[f"{which}_ms"].append(wall)
                    samples[f"{which}_cpu_ms"].append(cpu)
    tracers.shutdown()
    meters.shutdown()
    if exporter.spans < reps * (n + 1):
        raise AssertionError(f"only {exporter.spans} spans reached the exporter")
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.otel_bench",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="N = 200, 7 samples of each")
    parser.add_argument("--n", type=int, help="agents in the fan-out (default 1,000)")
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--out", type=Path, help="write the samples and figures as JSON")
    ns = parser.parse_args(argv)
    n = ns.n or (200 if ns.quick else 1000)
    reps, warmup = (7, 2) if ns.quick else (41, 5)
    samples = anyio.run(measure, n, reps, warmup, backend=ns.backend)
    off, sdk = stats(samples["off_ms"]), stats(samples["sdk_ms"])
    ratio = statistics.median(samples["sdk_ms"]) / statistics.median(samples["off_ms"])
    print(f"store-less fan-out N={n}, {reps} alternating samples each ({ns.backend})")
    for name, figures in (("off", off), ("sdk + no-op exporter", sdk)):
        print(f"  {name:<22} median {figures['median']:8.2f} ms  "
              f"(min {figures['min']:.2f}, max {figures['max']:.2f})")
    verdict = "within" if ratio <= BAR else "OVER"
    print(f"  overhead: ×{ratio:.4f} ({(ratio - 1) * 100:+.2f} %), {verdict} the 2 % bar")
    cpu_ratio = statistics.median(samples["sdk_cpu_ms"]) / statistics.median(samples["off_cpu_ms"])
    print(f"  CPU of the process, median: {statistics.median(samples['off_cpu_ms']):.1f} → "
          f"{statistics.median(samples['sdk_cpu_ms']):.1f} ms (×{cpu_ratio:.3f})")
    if ns.out is not None:
        ns.out.write_text(json.dumps({
            "machine": machine_info(ns.backend), "n": n, "reps": reps, "samples": samples,
            "off": off, "sdk": sdk, "ratio": ratio, "cpu_ratio": cpu_ratio, "bar": BAR},
            indent=1) + "\n",
            encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
