"""Runs recorded in a store for the viewer's control tests (first paint, detail, cancel).

``make_runs(path)`` records finished runs and returns their ids by name:

- ``mixed``: phases without agents around two phases with agents, a call with its own model and
  calls on the provider's default model, a failed structured call, a 20,000-character prompt;
- ``reasons``: a run whose stored ``AgentEnded`` events carry failure reasons as
  ``{kind, message, details}`` (written through the store as an engine would).

Run as a script, ``python _control_runs.py slow STORE SECONDS`` records a run of two agents
that each take SECONDS, prints its id once it is in the store, then its result as JSON;
``python _control_runs.py manual STORE`` records a running run whose events it reads from
stdin (one JSON array of events per line), prints ``ok`` after each committed line, and
finishes the run at end of input.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import anyio.to_thread

# tests/, for the shared helpers when this runs as a script
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _support import await_until, run_beside_playwright

from dsh_workflow import (
    EchoProvider,
    EngineConfig,
    ProviderInfo,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowStartRequest,
)

MIXED = """
phase("warm up");
phase("gather");
const a = await agent("first question", {label: "own model", model: "special-model"});
const b = await agent("second question " + "y".repeat(20000), {label: "long prompt"});
phase("nothing here");
phase("check");
const c = await agent("typed", {label: "bad answer",
  schema: {type: "object", properties: {s: {type: "string", minLength: 3, maxLength: 2}},
           required: ["s"]}});
phase("the end");
log("done");
return [a, b.length, c];
"""
SLOW = """
phase("slow");
return await parallel([1, 2].map(i => () => agent("slow " + i, {label: "slow " + i})));
"""


class ModelEcho(EchoProvider):
    """The echo provider with a default model and a price, as a real provider has."""

    @property
    def info(self) -> ProviderInfo:
        return super().info.model_copy(update={"identity": "echo house-model",
                                               "default_model": "house-model"})

    async def run(self, request: SubagentRequest) -> SubagentResult:
        result = await super().run(request)
        usage = (result.usage or Usage()).model_copy(update={"cost_usd": 0.0021})
        return result.model_copy(update={"usage": usage})


def _meta(name: str) -> dict[str, str]:
    return {"name": name, "description": f"viewer control test run {name}"}


async def _make_runs(path: str) -> dict[str, str]:
    ids: dict[str, str] = {}
    async with SQLiteRunStore(path) as store:
        async with QuickJSEngine(EngineConfig(), provider=ModelEcho(), store=store) as engine:
            run = engine.start(WorkflowStartRequest(meta=_meta("mixed"), script=MIXED))
            result = await run.result()
            assert result.stop_reason == "completed", result
            ids["mixed"] = run.id
        run_id = ids["reasons"] = "reasons-run-0001"
        await store.create_run(run_id, meta=_meta("reasons"), script="// by hand")
        at = time.time()
        error = {"kind": "invalid", "message": "/number: 'INV-12' does not match '^INV-\\\\d{4}$'",
                 "details": ["/number: 'INV-12' does not match '^INV-\\\\d{4}$'"]}
        await store.append_events(run_id, [
            {"event": "WorkflowStarted"},
            {"event": "AgentStarted", "seq": 1, "label": "invoice 1", "phase": "extract"},
            {"event": "AgentStarted", "seq": 2, "label": "invoice 2", "phase": "extract"},
            {"event": "AgentEnded", "seq": 1, "label": "invoice 1", "phase": "extract",
             "outcome": "completed", "usage": {"input_tokens": 1, "output_tokens": 1},
             "error": None},
            {"event": "AgentEnded", "seq": 2, "label": "invoice 2", "phase": "extract",
             "outcome": "failed", "usage": None, "error": error},
            {"event": "WorkflowEnded", "stop_reason": "completed", "agents_started": 2}])
        await store.finish_run(run_id, status="completed", result={
            "value": 1, "stop_reason": "completed", "error": None, "agents_started": 2},
            agents=2, ended_at=at + 1)
    return ids


def make_runs(path: str) -> dict[str, str]:
    """Record the finished runs in the store ``path``; their ids by name."""
    return run_beside_playwright(_make_runs, path)


async def _slow(path: str, seconds: float) -> None:
    async with SQLiteRunStore(path) as store, QuickJSEngine(
            EngineConfig(), provider=EchoProvider(latency_s=seconds), store=store) as engine:
        run = engine.start(WorkflowStartRequest(meta=_meta("slow"), script=SLOW))
        await await_until(lambda: store.events(run.id),  # recorded, with its first events
                          what="the run's first events in the store")
        print(run.id, flush=True)
        result = await run.result()
        print(json.dumps({"stop_reason": result.stop_reason, "error": result.error}), flush=True)


async def _manual(path: str) -> None:
    async with SQLiteRunStore(path) as store:
        run_id = "manual-" + str(time.time_ns())
        await store.create_run(run_id, meta=_meta("manual"), script="// by hand")
        store.post_provider(run_id, {"kind": "openai", "model": "live-default"})
        await store.flush()
        print(run_id, flush=True)
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            await store.append_events(run_id, json.loads(line))
            print("ok", flush=True)
        await store.finish_run(run_id, status="completed", result={
            "value": None, "stop_reason": "completed", "error": None, "agents_started": 0})


if __name__ == "__main__":
    if sys.argv[1:2] == ["manual"] and len(sys.argv) == 3:
        anyio.run(_manual, sys.argv[2], backend="trio")
    elif sys.argv[1:2] == ["slow"] and len(sys.argv) == 4:
        anyio.run(_slow, sys.argv[2], float(sys.argv[3]), backend="trio")
    else:
        raise SystemExit("usage: _control_runs.py slow STORE SECONDS | manual STORE")
