"""``--otel`` (docs/telemetry.md, SPEC §27): a real ``dsh-workflow`` process exports its run's
trace and metrics over OTLP/HTTP to a real receiver on 127.0.0.1, which decodes the protobuf
export requests as a collector would."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """export const meta = { name: 'otel-cli', description: 'a traced CLI run' };
phase('Fan out');
log('starting');
const answers = await parallel([1, 2, 3].map((i) => () => agent('p' + i, { label: 'c' + i })));
return answers.length;
"""


class Receiver:
    """An OTLP/HTTP receiver: ``/v1/traces`` and ``/v1/metrics`` protobuf requests, decoded."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[Any] = []  # (resource attributes, span)
        self.metrics: list[Any] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                assert self.headers["Content-Type"] == "application/x-protobuf"
                receiver.take(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.05})

    def take(self, path: str, body: bytes) -> None:
        with self.lock:
            self.paths.append(path)
            if path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    resource = {a.key: a.value.string_value
                                for a in resource_spans.resource.attributes}
                    for scope in resource_spans.scope_spans:
                        self.spans.extend((resource, span) for span in scope.spans)
            elif path == "/v1/metrics":
                metrics = ExportMetricsServiceRequest.FromString(body)
                for resource_metrics in metrics.resource_metrics:
                    for scope_metrics in resource_metrics.scope_metrics:
                        self.metrics.extend(scope_metrics.metrics)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    made.thread.start()
    try:
        yield made
    finally:
        made.httpd.shutdown()
        made.httpd.server_close()
        made.thread.join()


def _env(receiver: Receiver, tmp_path: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DSH_WORKFLOW_", "OTEL_", "HTTP_PROXY", "http_proxy"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["DSH_WORKFLOW_STORE"] = str(tmp_path / "runs.sqlite3")
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    env["NO_PROXY"] = "127.0.0.1"
    env.update(more)
    return env


def _run(tmp_path: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "traced.js"
    script.write_text(SCRIPT, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "dsh_workflow", "run", str(script), "-q",
                           *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


def _attrs(span: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for attribute in span.attributes:
        value = attribute.value
        found[attribute.key] = getattr(value, value.WhichOneof("value"))
    return found


def test_otel_exports_the_runs_trace_and_metrics_before_the_process_exits(
        receiver: Receiver, tmp_path: Path) -> None:
    done = _run(tmp_path, _env(receiver, tmp_path), "--otel")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3"
    names = sorted(span.name for _, span in receiver.spans)
    assert names == ["invoke_agent c1", "invoke_agent c2", "invoke_agent c3",
                     "invoke_workflow otel-cli"]
    [(resource, workflow)] = [(r, s) for r, s in receiver.spans if s.name.startswith("invoke_w")]
    assert resource["service.name"] == "dsh-workflow"
    assert _attrs(workflow)["gen_ai.workflow.name"] == "otel-cli"
    for _, span in receiver.spans:
        assert span.trace_id == workflow.trace_id
    metric_names = {metric.name for metric in receiver.metrics}
    assert {"gen_ai.workflow.duration", "gen_ai.invoke_agent.duration",
            "dsh.agents"} <= metric_names


def test_the_environment_variable_does_what_the_flag_does(receiver: Receiver,
                                                          tmp_path: Path) -> None:
    env = _env(receiver, tmp_path, DSH_WORKFLOW_OTEL="1", OTEL_SERVICE_NAME="my-harness")
    done = _run(tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert len(receiver.spans) == 4
    assert {resource["service.name"] for resource, _ in receiver.spans} == {"my-harness"}


def test_without_otel_nothing_is_exported(receiver: Receiver, tmp_path: Path) -> None:
    done = _run(tmp_path, _env(receiver, tmp_path))
    assert done.returncode == 0, done.stderr
    assert receiver.paths == []


def test_a_resumed_run_exports_a_new_trace_linked_to_the_original(receiver: Receiver,
                                                                   tmp_path: Path) -> None:
    env = _env(receiver, tmp_path)
    first = _run(tmp_path, env, "--otel")
    assert first.returncode == 0, first.stderr
    run_id = next(line.split()[-1] for line in first.stderr.splitlines()
                  if line.startswith("run id:"))
    [original] = [span for _, span in receiver.spans if span.name.startswith("invoke_workflow")]
    receiver.spans.clear()
    again = subprocess.run([sys.executable, "-m", "dsh_workflow", "resume", run_id, "-q",
                            "--otel"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    [resumed] = [span for _, span in receiver.spans if span.name.startswith("invoke_workflow")]
    assert resumed.trace_id != original.trace_id and not resumed.parent_span_id
    [link] = resumed.links
    assert (link.trace_id, link.span_id) == (original.trace_id, original.span_id)
    assert _attrs(resumed)["dsh.run.resumed_from"] == run_id
    replayed = [span for _, span in receiver.spans if span.name.startswith("invoke_agent")]
    assert len(replayed) == 3 and all(_attrs(span)["dsh.replayed"] for span in replayed)
