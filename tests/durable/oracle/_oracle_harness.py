"""The crash-and-replay oracle (docs/durable-runs.md, "How we prove it"; SPEC §25).

For one generated program (``_oracle_gen.py``) and a list of crash points ``k1, k2, ...``:

1. the *reference*: the program runs uninterrupted in a child process (its own store and
   ledger), giving the value every other run must return, the prompts it pays for, and how
   many journal commits a run makes;
2. the *crashed chain*: a child process runs it and SIGKILLs itself right after its k1-th
   journal commit; the next child resumes that run (the Python resume the CLI uses,
   ``resume_from``) and kills itself after its own k2-th commit; and so on, then a last child
   resumes without a crash. Every child has a fresh seed for its provider's pauses, so
   completions interleave differently in every process.

:func:`check_chain` then asserts: the last run's value equals the reference's; no call whose
answer was journaled is paid again, nor a question whose answer was journaled asked again (per
prompt or question: what a process paid, plus the most answers of it any earlier run of the
chain journaled, is at most how many times the reference asked it — for a ``first()`` thunk's
prompt, once); every run of the chain is in the store with exactly one final state (the killed
ones ``interrupted`` with no result, the last ``completed`` with its result); its events, read
back from the store and in the last process, keep the event contract
(:func:`dsh_workflow.testing.check_run_events`).

Nothing here is pytest-specific: the benchmark (``benchmarks/oracle.py``) runs it too.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from dsh_workflow import SQLiteRunStore, WorkflowResult
from dsh_workflow.testing import check_run_events, events_from_records

sys.path.insert(0, str(Path(__file__).parent))
from _oracle_child import META
from _oracle_gen import Program, generate, saved_file
from _oracle_provider import QUESTION, answer_for, read_ledger

__all__ = ["Attempt", "Chain", "OracleFailure", "Reference", "check_chain", "crash_chain",
           "kill_points", "prepare", "reference", "run_case"]

CHILD = str(Path(__file__).with_name("_oracle_child.py"))
#: The longest one child process may take (a hang is a failure, not a wait).
CHILD_TIMEOUT_S = 120.0


class OracleFailure(AssertionError):
    """A promise of durable runs broken; the message names the seed and crash points."""


@dataclass(frozen=True)
class Attempt:
    """One child process: what it printed, and whether it killed itself."""

    attempt: int
    crash_at: int
    returncode: int
    lines: tuple[str, ...]

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    def field(self, name: str) -> str | None:
        prefix = name + " "
        return next((line[len(prefix):] for line in self.lines if line.startswith(prefix)),
                    None)

    @property
    def run_id(self) -> str | None:
        return self.field("run")

    @property
    def commits(self) -> int:
        return sum(line.startswith("commit ") for line in self.lines)


@dataclass(frozen=True)
class Reference:
    value: Any
    commits: int
    asked: Counter[str]  # prompt -> how many times an uninterrupted run asks it


@dataclass
class Chain:
    """The crashed chain of one case."""

    seed: int
    kills: tuple[int, ...]
    name: str  # its store and ledger: <name>.sqlite3, <name>.ledger
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def crashes(self) -> list[tuple[int, int]]:
        """``(attempt, k)`` of every process that really died at its k-th commit."""
        return [(a.attempt, a.crash_at) for a in self.attempts if a.killed]


#: The schema a structured call's answer is looked up with (any schema answers alike).
_EMPTY_SCHEMA: dict[str, Any] = {}


def prepare(seed: int, folder: Path, *, calls: int = 24) -> Program:
    """The program of ``seed``, its saved workflows written under ``folder / "library"``."""
    program = generate(seed, calls=calls)
    library = folder / "library"
    library.mkdir(parents=True, exist_ok=True)
    for name, body in program.library.items():
        (library / f"{name}.js").write_text(saved_file(name, body), encoding="utf-8")
    return program


def _spawn(program: Program, folder: Path, *, store: str, ledger: str, attempt: int,
           seed: int, crash_at: int, resume_from: str | None, engine: str,
           backend: str) -> Attempt:
    spec = {"engine": engine, "backend": backend, "store": store, "ledger": ledger,
            "library": str(folder / "library"), "script": program.script,
            "args": {"salt": f"salt{program.seed}"}, "seed": seed, "attempt": attempt,
            "resume_from": resume_from, "crash_at": crash_at}
    proc = subprocess.run([sys.executable, CHILD, json.dumps(spec)], capture_output=True,
                          timeout=CHILD_TIMEOUT_S, check=False, cwd=folder)
    lines = tuple(proc.stdout.decode("utf-8", "surrogatepass").split("\n")[:-1])
    done = Attempt(attempt, crash_at, proc.returncode, lines)
    if not done.killed and proc.returncode != 0:
        raise OracleFailure(f"seed {program.seed}: attempt {attempt} (crash_at {crash_at}) "
                            f"exited {proc.returncode}:\n"
                            f"{proc.stderr.decode(errors='replace')[-3000:]}")
    return done


def reference(program: Program, folder: Path, *, engine: str = "quickjs",
              backend: str = "trio") -> Reference:
    """The program run once without a crash (its own store and ledger under ``folder``)."""
    ledger = str(folder / "reference.ledger")
    done = _spawn(program, folder, store=str(folder / "reference.sqlite3"), ledger=ledger,
                  attempt=0, seed=program.seed, crash_at=0, resume_from=None, engine=engine,
                  backend=backend)
    if done.field("end") != "completed":
        raise OracleFailure(f"seed {program.seed}: the uninterrupted run did not complete: "
                            f"{done.field('value')}\n{program.script}")
    value = json.loads(done.field("value") or "null")
    return Reference(value=value, commits=done.commits, asked=read_ledger(ledger).get(0, Counter()))


def crash_chain(program: Program, folder: Path, kills: tuple[int, ...], *, name: str = "chain",
                engine: str = "quickjs", backend: str = "trio") -> Chain:
    """Run ``program`` killed at each of ``kills`` in turn (each counted within its own
    process), then resumed until a process ends the run (at most ``len(kills) + 3``); its
    store and ledger are ``folder / name`` + ``.sqlite3``, ``.ledger``."""
    chain = Chain(program.seed, kills, name)
    rng = random.Random(f"pauses {program.seed} {kills} {name}")
    store, ledger = str(folder / f"{name}.sqlite3"), str(folder / f"{name}.ledger")
    previous: str | None = None
    for attempt in range(1, len(kills) + 4):
        crash_at = kills[attempt - 1] if attempt <= len(kills) else 0
        done = _spawn(program, folder, store=store, ledger=ledger, attempt=attempt,
                      seed=rng.randrange(2**32), crash_at=crash_at, resume_from=previous,
                      engine=engine, backend=backend)
        chain.attempts.append(done)
        if done.run_id is None:
            raise OracleFailure(f"seed {program.seed}: attempt {attempt} printed no run id")
        previous = done.run_id
        if not done.killed:
            break
    return chain


def _why(program: Program, chain: Chain, text: str) -> str:
    return (f"seed {program.seed}, kills {chain.kills} (died at {chain.crashes}): {text}\n"
            f"--- script ---\n{program.script}" +
            "".join(f"--- {name} ---\n{body}" for name, body in program.library.items()))


async def check_chain(program: Program, folder: Path, ref: Reference, chain: Chain) -> None:
    """Every promise of the module docstring, for one crashed chain; raises
    :class:`OracleFailure`."""
    last = chain.attempts[-1]
    if last.killed:
        raise OracleFailure(_why(program, chain, "no process ended the run"))
    if last.field("end") != "completed":
        raise OracleFailure(_why(program, chain, f"the run ended {last.field('end')}: "
                                                 f"{last.field('value')}"))
    value = json.loads(last.field("value") or "null")
    if value != ref.value:
        raise OracleFailure(_why(program, chain, f"value {value!r} != uninterrupted "
                                                 f"{ref.value!r}"))
    if last.field("events") != "ok":
        raise OracleFailure(_why(program, chain, f"events: {last.field('events')}"))
    paid = read_ledger(str(folder / f"{chain.name}.ledger"))
    prompts = set(ref.asked).union(*paid.values())
    by_answer = {_answer_key(*answer_for(prompt, schema)): prompt
                 for prompt in prompts for schema in (None, _EMPTY_SCHEMA)}
    async with SQLiteRunStore(folder / f"{chain.name}.sqlite3") as store:
        runs = await store.list_runs()
        ids = [attempt.run_id or "" for attempt in chain.attempts]
        if sorted(run.id for run in runs) != sorted(ids):
            raise OracleFailure(_why(program, chain, f"store runs {[r.id for r in runs]} "
                                                     f"!= the chain's {ids}"))
        journaled: Counter[str] = Counter()  # prompt -> most answers any earlier run journaled
        for index, attempt in enumerate(chain.attempts):
            run_id = attempt.run_id
            assert run_id is not None
            record = await store.get_run(run_id)
            assert record is not None
            expected = ids[index - 1] if index else None
            if record.resumed_from != expected:
                raise OracleFailure(_why(program, chain, f"{run_id} resumed_from "
                                                         f"{record.resumed_from} != {expected}"))
            final = attempt is last
            if final and (record.status != "completed" or record.result is None):
                raise OracleFailure(_why(program, chain, f"the last run reads {record.status}"))
            if not final and (record.status != "interrupted" or record.result is not None):
                raise OracleFailure(_why(program, chain, f"killed run {run_id} reads "
                                                         f"{record.status}, result "
                                                         f"{record.result is not None}"))
            if not final:
                ended = [e.seq for e in await store.events(run_id)
                         if e.data.get("event") == "WorkflowEnded"]
                if ended:
                    raise OracleFailure(_why(program, chain, f"killed run {run_id} has a "
                                                             f"WorkflowEnded event"))
            mine = paid.get(attempt.attempt, Counter())
            twice = {prompt: (count, journaled[prompt], _asked(ref, prompt))
                     for prompt, count in mine.items()
                     if count + journaled[prompt] > _asked(ref, prompt)}
            if twice:
                raise OracleFailure(_why(program, chain, f"attempt {attempt.attempt} paid "
                                                         f"journaled calls again (paid, "
                                                         f"journaled before, asked): {twice}"))
            entries = await store.journal(run_id, kind="agent")
            counts: Counter[str] = Counter()
            for entry in entries:
                prompt = by_answer.get(_answer_key(entry.text, entry.structured))
                if prompt is None:
                    raise OracleFailure(_why(program, chain, f"journal of {run_id} holds an "
                                                             f"answer no prompt has: {entry}"))
                counts[prompt] += 1
            for question in await store.question_records(run_id):
                if question.answered:  # a question's answer is journaled as an answer is
                    counts[QUESTION + question.question.question] += 1
            for prompt, count in counts.items():
                journaled[prompt] = max(journaled[prompt], count)
        assert last.run_id is not None
        stored = await store.events(last.run_id)
        record = await store.get_run(last.run_id)
        assert record is not None and record.result is not None
        run_info = {"id": last.run_id, "meta": META}
        events = events_from_records([{**event.data, "run": run_info} for event in stored])
        try:
            check_run_events(events, last.run_id, WorkflowResult.model_validate(record.result))
        except AssertionError as exc:
            raise OracleFailure(_why(program, chain, f"stored events: {exc}")) from None


def _asked(ref: Reference, prompt: str) -> int:
    """How many times a run may ask ``prompt``: as often as the uninterrupted run did, and a
    ``first()`` thunk's prompt once (whether a loser is asked depends on timing)."""
    return max(ref.asked[prompt], 1) if " race " in prompt else ref.asked[prompt]


def _answer_key(text: str | None, structured: Any) -> str:
    return json.dumps([text, structured], sort_keys=True)


def kill_points(rng: random.Random, commits: int, count: int) -> tuple[int, ...]:
    """``count`` crash points for a run of about ``commits`` journal commits: the first kill
    anywhere in the run, each later one (a kill during a resume) early in its resume, where
    its replayed answers are being journaled again."""
    first = rng.randint(1, max(commits, 1))
    return (first, *(rng.randint(1, 3) for _ in range(count - 1)))


def run_case(program: Program, folder: Path, ref: Reference, kills: tuple[int, ...], *,
             name: str = "chain", engine: str = "quickjs", backend: str = "trio") -> Chain:
    """One crashed chain of ``program``, checked (raises :class:`OracleFailure`)."""
    chain = crash_chain(program, folder, kills, name=name, engine=engine, backend=backend)
    anyio.run(check_chain, program, folder, ref, chain, backend=backend)
    return chain
