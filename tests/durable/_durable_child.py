"""A child process that runs one durable workflow, for tests/durable/test_durable_crash.py (a script).

argv: ``ENGINE BACKEND PATH SHAPE N SEED [SELF_KILL_AT]``. ``ENGINE`` is ``quickjs`` or
``subprocess``; ``BACKEND`` the anyio backend; ``PATH`` the store file; ``SHAPE`` one of
:data:`SCRIPTS` (``sequential``: N ``agent()`` calls one after another; ``parallel``: a
``parallel`` fan-out of N thunks, so many commits are in flight at once); both log
``got <value>`` for every value the script received. ``SEED`` seeds the provider's pauses (the
test derives it from its own seed, so a failing test replays them).

Stdout, one line each, written unbuffered with ``os.write`` (so what is printed is what the test
reads, even when the process is killed mid-line): ``run <id>`` once the run is started, then one
line per ``LogEmitted`` message (printed from an event listener, on the loop thread, as the
event arrives), then ``end <stop_reason>`` once the result is in. Meant to be killed with
SIGKILL at any moment. Once the run has ended the process waits to be killed (so a kill may
land after the last commit too). With ``SELF_KILL_AT`` = k it sends itself SIGKILL right after
printing the k-th message: the moment a value has just reached the script, which a kill from
outside cannot hit as closely.
"""

from __future__ import annotations

import os
import random
import signal
import sys

import anyio

from dsh_workflow import (
    EngineConfig,
    LogEmitted,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    SubprocessEngine,
    WorkflowStartRequest,
)

META = {"name": "durable-crash", "description": "a long run killed at random moments"}

SCRIPTS = {
    "sequential": (
        "let last = null;\n"
        "for (let i = 0; i < args.n; i++) {\n"
        "  last = await agent('step ' + i);\n"
        "  log('got ' + last);\n"
        "}\n"
        "return last;"),
    "parallel": (
        "const r = await parallel(Array.from({length: args.n}, (_, i) => async () => {\n"
        "  const v = await agent('item ' + i);\n"
        "  log('got ' + v);\n"
        "  return v;\n"
        "}));\n"
        "return r.length;"),
}


def config(n: int) -> EngineConfig:
    """The engine settings the child and the test's resume share."""
    return EngineConfig(max_concurrent_agents=32, max_total_agents=max(n, 1000),
                        max_items_per_call=max(n, 4096))


class JitterProvider:
    """Answers ``answer <prompt>`` after a random pause of 0–2 ms (or none), so children end at
    scattered moments and commits interleave with the script's turns."""

    identity = "jitter"

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    async def run(self, request: SubagentRequest) -> SubagentResult:
        pause = self._rng.choice((0.0, 0.0, 0.0005, 0.002))
        if pause:
            await anyio.sleep(pause)
        else:
            await anyio.lowlevel.checkpoint()
        return SubagentResult(stop_reason="completed", text="answer " + request.prompt)


def emit(line: str) -> None:
    os.write(1, (line + "\n").encode())


def engine_for(kind: str, cfg: EngineConfig, provider: object,
               store: SQLiteRunStore) -> QuickJSEngine | SubprocessEngine:
    if kind == "quickjs":
        return QuickJSEngine(cfg, provider=provider, store=store)  # type: ignore[arg-type]  # typed object above, a provider here
    return SubprocessEngine(cfg, provider=provider, store=store,  # type: ignore[arg-type]  # typed object above, a provider here
                            pool_size=1)


async def main(kind: str, path: str, shape: str, n: int, seed: int, self_kill_at: int) -> None:
    printed = 0

    def on_event(event: object) -> None:
        nonlocal printed
        if isinstance(event, LogEmitted):
            emit(event.message)
            printed += 1
            if printed == self_kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    async with engine_for(kind, config(n), JitterProvider(seed),
                          SQLiteRunStore(path)) as engine:
        engine.events.subscribe(on_event)
        run = engine.start(WorkflowStartRequest(meta=META, script=SCRIPTS[shape],
                                                args={"n": n}))
        emit(f"run {run.id}")
        result = await run.result()
        emit(f"end {result.stop_reason}")
        await run.dispose()
        await anyio.sleep_forever()  # the test kills it


if __name__ == "__main__":
    engine_kind, backend, store_path, script_shape, count, jitter_seed, *kill_at = sys.argv[1:]
    anyio.run(main, engine_kind, store_path, script_shape, int(count), int(jitter_seed),
              int(kill_at[0]) if kill_at else 0, backend=backend)
