"""Runs that ask, for the viewer's and MCP's question tests, as a child process.

``python _question_runs.py waiting STORE`` runs :data:`ASKING` recorded in STORE with nobody to
answer in this process (no ``answers=``, no parking): it prints the run id once the run is in
the store, a line ``answered QID BY EPOCH`` as each answer reaches the run, then its result as
JSON. ``python _question_runs.py parked STORE`` runs it with ``park=True``: it prints the run id,
then the result (``stop_reason: "waiting"``) and exits.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio

# tests/, for the shared helpers when this runs as a script
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _support import await_until

from dsh_workflow import (
    EchoProvider,
    EngineConfig,
    QuestionAnswered,
    QuickJSEngine,
    SQLiteRunStore,
    WorkflowEvent,
    WorkflowStartRequest,
)

ASKING = """
phase("deciding");
const first = await agent("warm up", {label: "warm up"});
const ship = await checkpoint("Ship it?", {details: "to <b>production</b>"});
const colour = await ask("Which colour?", {choices: ["red", "green", "blue"]});
const sizes = await ask("Which sizes?", {choices: ["S", "M", "L"], multiple: true});
const count = await ask("How many?", {schema: {type: "object",
  properties: {n: {type: "integer", minimum: 1}}, required: ["n"]}});
const note = await ask("Any note?");
return {ship, colour, sizes, count, note};
"""
META = {"name": "asking", "description": "asks a person"}


async def _main(mode: str, path: str) -> None:
    def heard(event: WorkflowEvent) -> None:
        if isinstance(event, QuestionAnswered):
            print(f"answered {event.qid} {event.by} {time.time()}", flush=True)

    async with SQLiteRunStore(path) as store, QuickJSEngine(
            EngineConfig(), provider=EchoProvider(), store=store,
            park=mode == "parked") as engine:
        engine.events.subscribe(heard)
        run = engine.start(WorkflowStartRequest(meta=META, script=ASKING))
        await await_until(lambda: store.get_run(run.id), what="the run in the store")
        print(run.id, flush=True)
        result = await run.result()
        print(json.dumps({"stop_reason": result.stop_reason, "value": result.value,
                          "error": result.error}), flush=True)


if __name__ == "__main__":
    anyio.run(_main, sys.argv[1], sys.argv[2])
