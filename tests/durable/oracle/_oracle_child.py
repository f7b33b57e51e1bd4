"""One process of the crash-and-replay oracle (a script): it runs, or resumes, one generated
workflow on a real engine over a real ``SQLiteRunStore`` file, its questions answered by the
oracle's answerer, and with ``crash_at`` = k it sends itself SIGKILL right after the run's k-th
journal commit has returned (an ``agent()`` batch, or a question's answer).

argv: one JSON object (see :class:`Spec` in ``_oracle_harness.py``): ``engine``, ``backend``,
``store``, ``ledger``, ``library`` (the saved workflows' folder), ``script``, ``args``,
``seed`` (the provider's pauses), ``attempt``, ``resume_from`` (None: a fresh run) and
``crash_at`` (0: never).

Stdout, one line each, written with ``os.write`` so a kill cuts no line: ``run <id>`` once the
run has started; ``commit <n>`` after each journal commit; then, when the run ends, ``end
<stop_reason>``, ``value <JSON>``, ``replayed <n>``, ``started <n>`` and ``events ok`` (or
``events bad <why>``: the run's events broke the contract).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import anyio

from dsh_workflow import (
    EngineConfig,
    JournalEntry,
    Question,
    QuickJSEngine,
    SQLiteRunStore,
    SubprocessEngine,
    WorkflowLibrary,
    WorkflowStartRequest,
)
from dsh_workflow.testing import AutoAnswer, EventContractError, check_run_events

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _oracle_provider import Answerer, ShuffledProvider

META = {"name": "oracle", "description": "a generated workflow, crashed and resumed"}


def emit(line: str) -> None:
    os.write(1, (line + "\n").encode("utf-8", "surrogatepass"))


class CrashingStore(SQLiteRunStore):
    """The run store, counting the journal commits of this process; the ``crash_at``-th one
    returns only to SIGKILL the process (the answers it made durable never reach the script)."""

    def __init__(self, path: str, crash_at: int) -> None:
        super().__init__(path)
        self.commits = 0
        self.crash_at = crash_at

    async def commit_journal(self, entries: Sequence[JournalEntry]) -> None:
        await super().commit_journal(entries)
        self._committed()

    async def answer_question(self, run_id: str, qid: str, value: Any, *, by: str) -> Question:
        question = await super().answer_question(run_id, qid, value, by=by)
        self._committed()  # a question's answer is journaled too
        return question

    def _committed(self) -> None:
        self.commits += 1
        emit(f"commit {self.commits}")
        if self.commits == self.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)


def config() -> EngineConfig:
    """The settings every process of the oracle shares (the children interleave: a cap wide
    enough for every slot of a fan-out)."""
    return EngineConfig(max_concurrent_agents=8, max_total_agents=10_000)


async def main(spec: dict[str, Any]) -> None:
    store = CrashingStore(spec["store"], spec["crash_at"])
    provider = ShuffledProvider(spec["seed"], spec["ledger"], spec["attempt"])
    library = WorkflowLibrary([spec["library"]])
    answers = AutoAnswer(Answerer(spec["ledger"], spec["attempt"]))
    engine: Any
    if spec["engine"] == "quickjs":
        engine = QuickJSEngine(config(), provider=provider, store=store, library=library,
                               answers=answers)
    else:
        engine = SubprocessEngine(config(), provider=provider, store=store, library=library,
                                  answers=answers, pool_size=1)
    events: list[Any] = []
    async with engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script=spec["script"],
                                                args=spec["args"],
                                                resume_from=spec["resume_from"]))
        emit(f"run {run.id}")
        result = await run.result()
        await run.dispose()
    provider.close()
    emit(f"end {result.stop_reason}")
    emit(f"value {json.dumps(result.value if result.error is None else result.error)}")
    emit(f"replayed {result.agents_replayed}")
    emit(f"started {result.agents_started}")
    try:
        check_run_events(events, run, result)
    except EventContractError as exc:
        emit(f"events bad {str(exc)[:2000]!r}")
    else:
        emit("events ok")


if __name__ == "__main__":
    given = json.loads(sys.argv[1])
    anyio.run(main, given, backend=given["backend"])
