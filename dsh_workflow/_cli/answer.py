"""``answer``: answer a run's open question, and continue the run when it parked
(docs/durable-runs.md, "Runs that wait").

Contract:

- ``answer RUN_ID [QID] (--json VALUE | --approve | --reject) [--no-continue] [run options]``
  records the answer in the run store (``by="command"``), checked as every answer is
  (``_questions.check_answer``): an invalid value, an unknown qid or one already answered is a
  usage error (exit 2) that records nothing. QID may be left out when exactly one question is
  open. ``--approve``/``--reject`` answer a checkpoint (``true``/``false``); ``--json`` takes
  JSON text (``@FILE`` reads a file, ``@-`` stdin).
- A run that is still running (its process waits for the answer) gets it within half a
  second from that process; ``answer`` only records it (exit 0).
- A parked run (status ``waiting``) is then continued in this process, as ``resume`` would
  continue it (a new run, ``resumed_from`` the parked one, replaying its journal and answers),
  with progress as ``run`` shows it and its exit codes (75 when it parks again). While other
  questions of the parked run are still open it is not continued yet: they are listed with
  their commands (exit 75). ``--no-continue`` only records the answer (exit 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .commands import Subcommands
from .errors import EXIT_OK, EXIT_WAITING, CliError
from .library import add_library_option
from .options import add_engine_options
from .stores import add_store_option, store_path

__all__ = ["command_answer", "register"]


def register(commands: Subcommands) -> None:
    """Add ``answer`` to the ``dsh-workflow`` subparsers."""
    answer = commands.add_parser(
        "answer", help="answer a run's question and continue the run",
        description="Answer an open question of a run (ask() or checkpoint()). A parked run "
                    "is then continued in this process, replaying its journal; a run whose "
                    "process is still waiting gets the answer within half a second.")
    answer.add_argument("run_id", metavar="RUN_ID")
    answer.add_argument("qid", metavar="QID", nargs="?",
                        help="the question (q1, q2, ...; see `show`); optional when only one "
                             "is open")
    value = answer.add_mutually_exclusive_group(required=True)
    value.add_argument("--json", dest="value_json", metavar="VALUE|@FILE",
                       help="the answer as JSON text (a string answer is quoted: '\"yes\"')")
    value.add_argument("--approve", action="store_true", help="approve a checkpoint")
    value.add_argument("--reject", action="store_true", help="reject a checkpoint")
    answer.add_argument("--no-continue", action="store_true",
                        help="only record the answer; do not continue the run")
    # the options of `resume` (here --json is the answer; the result prints as `run` prints it)
    add_engine_options(answer)
    add_library_option(answer)
    answer.add_argument("--events", metavar="FILE.jsonl", help="append every event of the "
                        "continued run as a JSON line")
    answer.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_store_option(answer)
    # What `resume` reads from its options; answer continues with the recorded ones.
    answer.set_defaults(handler=command_answer, provider=None, script=None, args=None,
                        meta=None, rerun=frozenset(), json=False)


def _value(ns: argparse.Namespace) -> Any:
    if ns.approve:
        return True
    if ns.reject:
        return False
    text: str = ns.value_json
    if text.startswith("@"):
        name = text[1:]
        try:
            text = sys.stdin.read() if name == "-" else open(name, encoding="utf-8").read()  # noqa: SIM115 - read whole at once
        except OSError as exc:
            raise CliError(f"cannot read --json {text!r}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"--json must be JSON text (a string is quoted, like '\"yes\"'): "
                       f"{exc}") from None


def command_answer(ns: argparse.Namespace) -> int:
    import anyio

    from dsh_workflow import RunStoreError, SQLiteRunStore, WorkflowError

    from .runs import command_resume, find_run
    from .waiting import question_lines

    path = store_path(ns)
    assert path is not None
    value = _value(ns)

    async def record() -> tuple[str, str, list[Any]]:
        async with SQLiteRunStore(path) as store:
            run = await find_run(store, ns.run_id, where=path)
            if run.status not in ("waiting", "running"):
                raise CliError(f"run {run.id} is not waiting for an answer (it is {run.status})")
            open_questions = await store.questions(run.id)
            qid = ns.qid
            if qid is None:
                if len(open_questions) != 1:
                    listed = ", ".join(q.qid for q in open_questions) or "none"
                    raise CliError(f"run {run.id} has {len(open_questions)} open questions "
                                   f"({listed}): name the one to answer")
                qid = open_questions[0].qid
            try:
                await store.answer_question(run.id, qid, value, by="command")
            except WorkflowError as exc:
                raise CliError(exc.message) from None
            return run.id, run.status, await store.questions(run.id)

    try:
        run_id, status, still_open = anyio.run(record, backend="trio")
    except RunStoreError as exc:
        raise CliError(str(exc)) from None
    sys.stderr.write(f"answered: run {run_id}\n")
    sys.stderr.flush()
    if ns.no_continue or status == "running":
        return EXIT_OK
    if still_open:
        for line in question_lines(run_id, still_open, path):
            sys.stderr.write(line + "\n")
        sys.stderr.write("the run continues once these are answered too\n")
        return EXIT_WAITING
    ns.run_id = run_id
    return command_resume(ns)
