"""``show RUN_ID --agent SEQ``: one agent() call as it was asked and answered.

Contract: prints the call's label, phase, outcome (``replayed`` when answered from a journal),
the model it ran on, its options (agent type, effort, isolation, route, output-token limit),
times, usage, failure reason, and then its long texts — prompt, the agent definition's system
prompt, schema, answer text and structured answer — each folded after :data:`FOLD_CHARS`
characters or :data:`FOLD_LINES` lines with a note saying how much more there is (``--full``
prints everything). ``--json`` prints the :class:`~dsh_workflow.CallRecord` whole.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from dsh_workflow import CallRecord, SQLiteRunStore

from .errors import EXIT_OK, CliError
from .history import format_time
from .output import write_stdout
from .records import read_store, run_record, unknown_run

__all__ = ["FOLD_CHARS", "FOLD_LINES", "call_document", "call_text", "fold", "show_call"]

FOLD_CHARS = 2000
FOLD_LINES = 40


def fold(text: str, *, full: bool) -> str:
    """``text``, cut after :data:`FOLD_CHARS` characters or :data:`FOLD_LINES` lines unless
    ``full``, with a note naming what was left out."""
    if full:
        return text
    cut = len(text) if len(text) <= FOLD_CHARS else FOLD_CHARS
    lines = text[:cut].split("\n")
    if len(lines) > FOLD_LINES:
        cut = len("\n".join(lines[:FOLD_LINES]))
    if cut >= len(text):
        return text
    rest = text[cut:]
    more_lines = rest.count("\n")
    lines_note = f", {more_lines} more line{'s' if more_lines != 1 else ''}" if more_lines else ""
    return (text[:cut] + f"\n… [folded: {len(rest):,} more characters{lines_note}; "
            "--full shows everything]")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.split("\n"))


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def call_document(run_id: str, call: CallRecord) -> dict[str, Any]:
    """``show --agent SEQ --json``: the whole call, plus the model it ran on."""
    document = call.model_dump(mode="json")
    document["model_used"] = call.model
    document["run_id"] = run_id
    return document


def call_text(call: CallRecord, *, full: bool = False, run_running: bool = True) -> str:
    """The call for people (see the module docstring); ``run_running``: its run is still
    going (else a call without an end reads ``interrupted``)."""
    options = call.options
    outcome = call.outcome or ("interrupted" if not run_running
                               else "running" if call.started_at is not None else "queued")
    lines = [f"run:         {call.run_id}",
             f"agent:       {call.seq}  {call.label}",
             f"phase:       {call.phase or '-'}",
             f"outcome:     {outcome}" + (" (replayed from the journal)" if call.replayed else "")]
    asked = options.get("model")
    model = call.model
    if model is None:
        lines.append("model:       the provider's default")
    elif asked:
        lines.append(f"model:       {model}")
    else:
        lines.append(f"model:       {model} (the provider's default)")
    for key, name in (("agent_type", "agent type"), ("effort", "effort"),
                      ("isolation", "isolation"), ("route", "provider"),
                      ("max_output_tokens", "max output")):
        if options.get(key) is not None:
            lines.append(f"{name + ':':<13}{options[key]}")
    elapsed = ""
    if call.started_at is not None and call.ended_at is not None:
        elapsed = f" ({max(0.0, call.ended_at - call.started_at):.2f} s)"
    lines.append(f"started:     {format_time(call.started_at)}")
    lines.append(f"ended:       {format_time(call.ended_at)}{elapsed}")
    if call.usage is not None:
        cost = call.usage.cost_usd
        lines.append(f"usage:       {call.usage.input_tokens:,} input + "
                     f"{call.usage.output_tokens:,} output tokens"
                     + ("" if cost is None else f", ${cost:.4f}"))
    failure = call.failure
    if failure:
        kind = failure.get("kind")
        message = str(failure.get("message") or "")
        lines.append("failure:     " + (f"{kind}: " if kind else "") + fold(message, full=full))
        details = failure.get("details")
        if details:
            lines.extend("             - " + str(detail)
                         for detail in (details if isinstance(details, list) else [details]))
    sections: list[tuple[str, str]] = [("prompt", call.prompt)]
    if call.system_prompt:
        sections.append(("system prompt (agent type)", call.system_prompt))
    if options.get("schema") is not None:
        sections.append(("schema", _json(options["schema"])))
    if call.text is not None:
        sections.append(("answer", call.text))
    if call.structured is not None:
        sections.append(("structured answer", _json(call.structured)))
    for title, text in sections:
        lines.append("")
        lines.append(f"{title}:")
        lines.append(_indent(fold(text, full=full)))
    if call.outcome is None:
        lines.append("")
        lines.append("no answer yet" if run_running else "no answer: the run ended without it")
    return "\n".join(lines)


def show_call(ns: argparse.Namespace) -> int:
    """``show RUN_ID --agent SEQ``. An unknown run or call is a :class:`CliError` (exit 2)."""
    async def reader(store: SQLiteRunStore) -> tuple[str, CallRecord | None, int, bool]:
        run = await run_record(store, ns, ns.run_id)
        found = await store.call(run.id, ns.agent)
        known = len(await store.call_briefs(run.id)) if found is None else 0
        return run.id, found, known, run.status == "running"

    got = read_store(ns, reader, None)
    if got is None:
        raise unknown_run(ns, ns.run_id)
    run_id, call, known, running = got
    if call is None:
        which = f"it has calls 1-{known}" if known else "no agent() call of it is recorded"
        raise CliError(f"run {run_id} has no agent() call {ns.agent} ({which})")
    if ns.json:
        write_stdout(json.dumps(call_document(run_id, call), indent=2, ensure_ascii=False)
                     + "\n")
    else:
        write_stdout(call_text(call, full=ns.full, run_running=running) + "\n")
    return EXIT_OK
