"""Every text the ``workflow`` tool shows a model, character-exact.

The description is the authoring contract of docs/scripts.md written for a model; it is sent with every
request, so it is kept tight. Result and error texts are built only here, so the wording a model
learns to correct from never drifts between code paths.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from .._option_table import AGENT_OPTIONS
from .._prices import million_token_prices
from .._subagent import provider_description, provider_info

__all__ = [
    "COMBINATORS",
    "DESCRIPTION",
    "RESUME_NOTE",
    "abnormal_text",
    "cancelled_text",
    "durable_description",
    "durable_input_schema",
    "failed_text",
    "input_schema",
    "invalid_arguments_text",
    "render_value",
    "start_error_text",
    "success_text",
    "system_prompt_section",
    "tool_description",
    "tool_input_schema",
    "with_run_id",
]

#: The failure-aware combinators (SPEC §26), a paragraph of the description of its own.
COMBINATORS = """\
Combinators that keep failures (fatal errors reject them, as they reject parallel):
- settle(thunks, {concurrency?}) -> per thunk {ok: true, value} or {ok: false, error: {kind, \
message, code?}} (a failed child's own kind and reason; a throw is kind "thrown"): use it, not \
.filter(Boolean).
- vote(n, i => ..., {pass: v => bool, quorum?, failed?: "abstain"|"against"|"for"}) -> {passed, \
for, against, abstained, votes}; quorum defaults to a majority (4 voters need 3).
- first(thunks, {until?, failure?}) -> the first value that completes (and passes until), the \
others cancelled; null when all fail (failure: "throw": their last error).
- gate((feedback, attempt) => ..., v => ({ok, feedback}), {attempts}) -> {ok, value, attempts, \
feedback}."""

_CONTRACT = """\
Run a JavaScript script that orchestrates many subagents (reviewing many files, migrations, \
research from several angles, adversarial checking).

Parameters:
- meta: JSON data, never code: {name: short kebab-case, description: one line, whenToUse?, \
phases?: [{title, detail?} or "title"]}. Never write `export const meta` in the script.
- script: plain JavaScript (not TypeScript), run as the body of an async \
function: top-level await works; end with `return <value>`. The value is the tool result, made \
JSON as JSON.stringify does (no return gives null); each lossy step (undefined in an \
array becoming null, an un-awaited Promise becoming {}) is listed under Warnings. BigInt and \
cycles are errors.
- args: optional JSON object, the script's global `args`. Wrap a list: {"items": [...]}.

Globals:
- agent(prompt, opts?) (alias subagent): runs one subagent, a fresh child that sees only its \
prompt (give it everything it needs), and resolves to its final text. opts: \
""" + ", ".join(option.description() for option in AGENT_OPTIONS) + """; any other key is a \
fatal error. With schema the child is given the \
schema and asked to answer in it; agent() resolves to the validated object. The schema: JSON Schema 2020-12, root \
type "object", self-contained (local $defs/$ref only); every keyword is enforced (pattern, \
format, minimum, enum...). The host does not re-ask a child whose answer is invalid (a \
provider may repair once: see its line below). agent() resolves null when the child fails, its \
structured value is missing or invalid, or it times out: use .filter(Boolean), retry once, or \
fall back. With failure: "throw" it rejects instead with a non-fatal {name: "AgentFailure", \
kind: "provider"|"invalid"|"missing"|"timeout"|"cancelled", message, details} (details: up to \
5 validator messages with their JSON paths for "invalid", else []). A provider reporting a \
failed child gives that null (kind "provider"); only a provider that breaks (raises) is fatal \
AGENT_FAILED.
- parallel(thunks): runs zero-argument functions concurrently and waits for all \
(a barrier); a thunk that throws gives null in its slot.
- pipeline(items, ...stages): each item runs its own chain, \
stage(prev, item, index), where prev is the previous stage's result (the item itself for the \
first stage). No barrier between stages, so prefer it for multi-stage work. A stage that \
returns null passes null on (the next stage runs: check prev); one that throws makes its item \
null and skips the item's remaining stages.
- parallel(thunks, {concurrency: N}), pipeline(items, ...stages, {concurrency: N}): at most N \
items in flight (a whole number >= 1; the engine's cap still applies).
- phase(title) marks progress; log(message) and console.log/info/warn/error narrate.
- workflow(name, args?) or workflow({scriptPath}, args?) (a path from the project root, else \
from the calling script's folder): runs a saved workflow inline with `args` as its own args \
(its agents share this run's caps and budget) and resolves to its return value; calls may run \
inside parallel; one level only. A saved workflow that throws makes workflow() throw fatal \
AGENT_FAILED (workflow("name") failed: ...); its fatal errors keep their code.
- budget: tokens (input + output): budget.total (null: unlimited), budget.spent(), \
budget.remaining() (Infinity when unlimited: never return it raw); dollars: budget.totalUsd \
(null: unset), budget.spentUsd(). Once spent reaches a total, every later agent() call throws \
fatal BUDGET_EXCEEDED; running children finish."""

_RULES = """\
Errors: hook misuse (bad arguments, unknown options, an invalid schema), a tripped cap, the \
budget and cancellation throw {name: "WorkflowError", code, fatal: true, message}; test \
e.code === "BUDGET_EXCEEDED" etc. Codes: INVALID_ARGUMENT, \
UNSUPPORTED_OPTION, UNSUPPORTED_SCHEMA, AGENT_CAP, ITEM_CAP, BUDGET_EXCEEDED, AGENT_FAILED \
(a provider fault, a failed saved workflow), RESULT_UNSERIALIZABLE, CANCELLED. Fatal means \
parallel and pipeline never turn it into null: it rejects the whole call. The script may still \
catch it and return what it has (a try/catch inside a thunk catches it too); uncaught, it \
fails the run, as any uncaught error does (SCRIPT_ERROR). Caps: agents running at once \
(extra calls queue), total agents per run, items per parallel/pipeline call; the error names \
the cap and its value.

JavaScript: QuickJS-ng, ES2023 and later built-ins (Promise.allSettled, \
Array.prototype.at/findLast/toSorted, Object.groupBy, Set methods, iterator helpers, \
replaceAll, Math.random()...). Date (the constructor too), Date.now() and \
RegExp (named groups, lookbehind, flags dgimsuvy) work. Sandbox: no timers (setTimeout), \
performance, structuredClone, Intl, TextEncoder, URL, fetch, filesystem, network, modules/import/require or \
host objects. Awaiting a promise that nothing will ever settle ends the run with an error at \
once.

Options and workflow() args must be JSON data: undefined properties are dropped, as \
JSON.stringify does; functions, Date, Map, Set, class instances, NaN/Infinity, BigInt and \
cycles are errors there.

Example (args {"files": ["a.py", "b.py"]}):
phase("review");
const found = await pipeline(args.files,
  (_, f) => agent(`Find bugs in ${f}.`, {label: f, schema: {type: "object",
    properties: {bugs: {type: "array", items: {type: "string"}}}, required: ["bugs"]}}),
  (r, f) => r && r.bugs.length ? agent(`Verify in ${f}: ${JSON.stringify(r.bugs)}`) : null,
  {concurrency: 4});
return {files: args.files.length, confirmed: found.filter(Boolean)};"""

#: The globals that ask a person (SPEC §25), the last of the globals' list.
QUESTIONS = """\
- ask(question, {choices?, multiple?, schema?, details?, default?, timeout?}) asks the user, \
resolving to the answer; checkpoint(title, {details?}) to true (approved) or false. Unanswered, \
the run parks; its result lists each qid to answer."""

#: The authoring contract: the globals, the combinators' paragraph (when there is one), then
#: errors, the language and the example.
DESCRIPTION = "\n\n".join(part for part in (f"{_CONTRACT}\n{QUESTIONS}", COMBINATORS, _RULES)
                          if part)

_SYSTEM_PROMPT = (
    "The {name} tool runs a JavaScript script you write that orchestrates many subagents "
    "(fan-out, phases, structured results); its description gives the script format. Use "
    "{name} only when the user asks for a workflow or for large-scale multi-agent "
    "orchestration. For one or two delegations, call a subagent directly instead."
)

_PHASE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "Phase title, as passed to phase(title)."},
        "detail": {"type": "string", "description": "Optional: what happens in this phase."},
        "provider": {"type": "string", "description": "Optional, informational: provider used."},
        "model": {"type": "string", "description": "Optional, informational: model used."},
    },
    "required": ["title"],
    "additionalProperties": True,
}

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "meta": {
            "type": "object",
            "description": "The workflow's identity as JSON data (never code; not repeated in "
                           "the script).",
            "properties": {
                "name": {"type": "string",
                         "description": "A short kebab-case identifier, e.g. \"audit-endpoints\"."},
                "description": {"type": "string",
                                "description": "One line: what the workflow does."},
                "whenToUse": {"type": "string",
                              "description": "Optional: when this workflow applies."},
                "phases": {"type": "array",
                           "description": "Optional: the phases the script announces with "
                                          "phase(title), for progress display only.",
                           "items": _PHASE_SCHEMA},
            },
            "required": ["name", "description"],
            "additionalProperties": True,
        },
        "script": {
            "type": "string",
            "description": "JavaScript (never TypeScript) run as the body of an async "
                           "function: await at top level, finish with `return <JSON value>`. "
                           "No meta statement: meta is its own parameter.",
        },
        "args": {
            "type": "object",
            "description": "Optional JSON object exposed to the script as the global `args` "
                           "(wrap a list in an object, e.g. {\"items\": [...]}).",
            "additionalProperties": True,
        },
    },
    "required": ["meta", "script"],
    "additionalProperties": False,
}


def input_schema() -> dict[str, Any]:
    """The tool's parameter JSON Schema (a fresh copy the caller may change)."""
    return copy.deepcopy(_INPUT_SCHEMA)


#: What the description adds for an engine that records runs (docs/durable-runs.md).
RESUME_NOTE = (
    "Resume: every result ends with `Run id: <id>`. If a run failed or returned a wrong result, "
    "fix the script and call again with the fixed script and resumeFrom: \"<id>\": completed "
    "agent() calls whose prompt and options did not change are replayed from that run, not rerun."
)

_RESUME_FROM_SCHEMA: dict[str, Any] = {
    "type": "string",
    "description": "Optional: the run id (from a previous result's `Run id:` line) to resume. "
                   "Send the same or a fixed script; unchanged completed agent() calls are "
                   "replayed, not rerun.",
}


def durable_description() -> str:
    """The description for an engine with a run store: :data:`DESCRIPTION` and the resume
    note."""
    return f"{DESCRIPTION}\n\n{RESUME_NOTE}"


def durable_input_schema() -> dict[str, Any]:
    """The parameter schema for an engine with a run store: :func:`input_schema` plus an
    optional ``resumeFrom`` string (a fresh copy)."""
    schema = input_schema()
    schema["properties"]["resumeFrom"] = copy.deepcopy(_RESUME_FROM_SCHEMA)
    return schema


def tool_description(config: Any, provider: Any, library: Any, max_result_chars: int, *,
                     durable: bool, agents: Any = None) -> str:
    """The tool's description (without the background note) for an engine with ``config``,
    ``provider``, ``library`` and agent registry ``agents``: :data:`DESCRIPTION`, the
    :func:`engine_section` when there is one, and the resume note when the engine has a run
    store (``durable``)."""
    text = DESCRIPTION
    section = engine_section(config, provider, library, max_result_chars, agents=agents)
    if section:
        text = f"{text}\n\n{section}"
    if durable:
        text = f"{text}\n\n{RESUME_NOTE}"
    return text


def tool_input_schema(*, durable: bool) -> dict[str, Any]:
    """The parameter schema (a fresh copy): :func:`durable_input_schema` for an engine with a
    run store, else :func:`input_schema`."""
    return durable_input_schema() if durable else input_schema()


def system_prompt_section(tool_name: str) -> str:
    """Guidance for the system prompt, naming the tool by its configured name."""
    return _SYSTEM_PROMPT.format(name=tool_name)


def render_value(value: Any, max_chars: int, rest: str | None = None) -> str:
    """``value`` as 2-space-indented JSON, non-ASCII kept, cut after ``max_chars`` characters.

    A cut text is followed by a new line ``… [truncated: <omitted> more characters]``, or,
    given ``rest`` (how to read them: :func:`rest_hint`), ``… [truncated: <omitted> more
    characters; <rest>]``.
    """
    text = json.dumps(value, indent=2, ensure_ascii=False)
    if len(text) <= max_chars:
        return text
    more = f"{len(text) - max_chars} more characters"
    return f"{text[:max_chars]}\n… [truncated: {more}{'' if rest is None else '; ' + rest}]"


def rest_hint(result_tool: str, run_id: str, offset: int) -> str:
    """How a cut result's rest is read: the ``<name>_result`` call that returns the next page."""
    call = json.dumps({"runId": run_id, "offset": offset}, ensure_ascii=False)
    return f"read them with {result_tool}({call}); a pointer such as \"/findings/3\" reads one part"


def success_text(name: str, agents_started: int, value: Any, max_chars: int,
                 warnings: Sequence[str] = (), rest: str | None = None) -> str:
    """``workflow "<name>" completed (<n> agent|agents).``, ``Return value:``, the value (cut
    as :func:`render_value` cuts it, ``rest`` saying how to read the rest); then, when
    converting the value to JSON lost something, ``Warnings:`` and one ``- <warning>`` line
    each (already bounded by the engine)."""
    noun = "agent" if agents_started == 1 else "agents"
    text = (f'workflow "{name}" completed ({agents_started} {noun}).\n'
            f"Return value:\n{render_value(value, max_chars, rest)}")
    if warnings:
        text += "\nWarnings:\n" + "\n".join(f"- {warning}" for warning in warnings)
    return text


def with_run_id(text: str, run_id: str) -> str:
    """``text`` followed by the run id on its own last line: ``Run id: <id>``."""
    return f"{text}\nRun id: {run_id}"


def cancelled_text(error: str | None) -> str:
    """The text of a cancelled run, with its reason when there is one."""
    return "Error: workflow run was cancelled" + (f" ({error})" if error else "")


def failed_text(error: str | None, code: str | None = None) -> str:
    """The text of a run that ended in error: its error, which always names its code — a text
    that starts with no ``CODE:`` (the script's own error, ``SCRIPT_ERROR``; the engine
    failing) gets ``code`` in front."""
    text = error or "unknown error"
    if code is not None and not text.startswith(f"{code}:"):
        text = f"{code}: {text}"
    return f"Error: workflow run failed: {text}"


def abnormal_text(stop_reason: object) -> str:
    """The text of a run whose stop reason the tool does not know (an engine off the seam)."""
    return f"Error: workflow run ended abnormally ({stop_reason})"


def _answer_hint(question: Any) -> str:
    """What answers ``question`` (a :class:`~dsh_workflow.Question`), in a few words."""
    if question.kind == "checkpoint":
        return "checkpoint: true approves, false rejects"
    if question.choices is not None:
        listed = json.dumps(list(question.choices), ensure_ascii=False)
        return f"a list of distinct ones of {listed}" if question.multiple else f"one of {listed}"
    if question.schema in (None, {"type": "string"}):
        return "text"
    return "JSON matching " + json.dumps(question.schema, ensure_ascii=False)


def question_lines(pending: Any) -> list[str]:
    """One line per open question: ``- qid: <qid> (<what answers it>): <question>``."""
    return [f"- qid: {q.qid} ({_answer_hint(q)}): {q.question}" for q in pending]


def parked_text(name: str, run_id: str, pending: Any, answer_tool: str, *,
                durable: bool) -> str:
    """The text of a run that parked on questions nobody here could answer: the run id, each
    question's ``qid: <qid>``, and how to answer them — the ``answer_tool`` companion with a
    run store (``durable``); without one the run cannot be continued."""
    lines = [f'workflow "{name}" is waiting for answers (run {run_id}); nobody here could '
             "answer its questions:", *question_lines(pending)]
    if durable:
        lines.append(f'Ask the user, then answer each with {answer_tool}({{"runId": '
                     f'"{run_id}", "qid": "<qid>", "value": <answer>}}): the run continues '
                     "once all are answered, and that call returns its result.")
    else:
        lines.append("This engine keeps no run store, so the parked run cannot be continued: "
                     "run the workflow where someone can answer, or without the questions.")
    return "\n".join(lines)


def limit_parked_text(name: str, run_id: str, resume_after: Any, *, durable: bool) -> str:
    """The text of a run parked on a provider's usage limit."""
    when = f" until {resume_after.isoformat()}" if resume_after is not None else ""
    text = (f'workflow "{name}" is waiting (run {run_id}): a provider\'s usage limit was '
            f"reached{when}; nothing completed is lost.")
    if durable:
        text += (f' After the reset, call again with the same script and resumeFrom: '
                 f'"{run_id}".')
    return text


ANSWER_DESCRIPTION = (
    "Answer a question of a workflow run that is waiting for answers (the workflow result "
    "listed each `qid`): `value` is the answer (true/false for a checkpoint; one of the "
    "choices, or a list when several may be picked; JSON matching the question's schema; "
    "else text). An invalid value is refused with the reason and the question stays open. "
    "Once a parked run has all its answers it continues, and this call returns its result.")


def answer_schema() -> dict[str, Any]:
    """The input schema of the ``<name>_answer`` companion tool."""
    return {"type": "object",
            "properties": {
                "runId": {"type": "string", "description": "The waiting run's id."},
                "qid": {"type": "string", "description": "The question's qid, e.g. \"q1\"."},
                "value": {"description": "The answer."}},
            "required": ["runId", "qid", "value"], "additionalProperties": False}


def start_error_text(message: str) -> str:
    """The text of a ``WorkflowError`` raised by ``engine.start()``."""
    return f"Error: {message}"


def invalid_arguments_text(problems: list[str]) -> str:
    """The text of a call whose arguments the tool refused; every problem is listed."""
    return "Error: invalid workflow tool arguments: " + "; ".join(problems)


# ---- background runs (docs/embedding.md, "The model-facing tool") ----------------------

BACKGROUND_NOTE = """

This tool runs workflows in the background: a call returns at once with the run id, and the \
result arrives later as a separate message. Check on a run with {status}({{runId}}) (phase, \
agents, tokens, elapsed) and stop one with {cancel}({{runId}}). Do not call {name} again for \
the same work while its run is going."""

STATUS_DESCRIPTION = ("The status of a background workflow run: its phase, agents running / "
                      "done / failed, tokens spent and elapsed time.")
CANCEL_DESCRIPTION = ("Cancel a background workflow run; its result then arrives as cancelled.")


def background_description(name: str) -> str:
    """The description of a background tool: the contract plus how background runs work."""
    return DESCRIPTION + BACKGROUND_NOTE.format(name=name, status=name + "_status",
                                                cancel=name + "_cancel")


# ---- whole results (docs/embedding.md, "Whole results") --------------------------------

RESULT_DESCRIPTION = (
    "Read a finished workflow run's return value when the workflow result was cut: the part at "
    "`pointer` (a JSON pointer such as \"/findings/3\"; default: the whole value), as JSON "
    "indented by 2, from character `offset` (default 0) for `limit` characters (default and "
    "most: {limit}). The reply says where the next page starts.")


def result_description(max_result_chars: int) -> str:
    return RESULT_DESCRIPTION.format(limit=max_result_chars)


def result_schema(max_result_chars: int) -> dict[str, Any]:
    """The input schema of the ``<name>_result`` companion tool."""
    return {"type": "object",
            "properties": {
                "runId": {"type": "string", "description": "The run id of the cut result."},
                "pointer": {"type": "string",
                            "description": "Optional JSON pointer (RFC 6901) to one part, e.g. "
                                           "\"/findings/3\"; \"\" or absent: the whole value."},
                "offset": {"type": "integer", "minimum": 0,
                           "description": "Optional: the first character to return."},
                "limit": {"type": "integer", "minimum": 1, "maximum": max_result_chars,
                          "description": "Optional: how many characters to return."}},
            "required": ["runId"], "additionalProperties": False}


def result_page_text(result_tool: str, page: Any) -> str:
    """A page of a result's part, then one line saying which characters it holds and how to
    read the next page (or that it is the last)."""
    where = f"at {page.pointer!r}" if page.pointer else "of the return value"
    line = f"[characters {page.offset}-{page.end} of {page.total} {where}"
    following = page.next_offset
    if following is None:
        return f"{page.text}\n{line}; the end]"
    call = {"runId": page.run_id, **({"pointer": page.pointer} if page.pointer else {}),
            "offset": following, "limit": page.limit}
    return f"{page.text}\n{line}; next: {result_tool}({json.dumps(call, ensure_ascii=False)})]"


def no_result_text(run_id: str, why: str) -> str:
    return f"Error: no return value to read for run {run_id!r}: {why}"


def run_id_schema() -> dict[str, Any]:
    """The input schema of the companion tools."""
    return {"type": "object",
            "properties": {"runId": {"type": "string",
                                     "description": "The run id the workflow call returned."}},
            "required": ["runId"], "additionalProperties": False}


def background_started_text(name: str, run_id: str) -> str:
    return (f'workflow "{name}" started in the background.\nRun id: {run_id}\n'
            "Its result will arrive as a separate message when it ends.")


def background_limit_text(limit: int) -> str:
    return (f"Error: {limit} background workflow runs are already going "
            f"(max_background_runs={limit}); wait for one to finish or cancel one, then try "
            "again")


#: The reason a run is cancelled with when nothing could deliver its completion.
NOT_ENTERED_REASON = "the background workflow tool was not entered"


def background_not_entered_text() -> str:
    """The refusal of a background call whose ``on_complete`` nothing would call: the tool
    was not entered and its engine cannot wait for the run in its own task group."""
    return ("Error: this background workflow tool cannot deliver results: the harness must "
            "enter it first (`async with WorkflowTool(engine, background=True, "
            "on_complete=...) as tool:`) or iterate `tool.completions()`; nothing was run")


def unknown_run_text(run_id: str, kept: int) -> str:
    return (f"Error: no background workflow run {run_id!r} is known: this tool never started it, "
            f"or it ended and its status is no longer kept (only the latest {kept} ended runs' "
            "statuses are kept)")


def status_text(status: dict[str, Any]) -> str:
    """One line: state, phase, agents, tokens, the cost once some was spent (``unpriced`` for
    spend of unknown cost, never ``$0.0000``) and the elapsed time."""
    from .._prices import cost_text

    phase = status["phase"] or "-"
    cost = cost_text(status.get("cost_usd"), status.get("agents_unpriced") or 0)
    return (f'workflow "{status["name"]}" (run {status["run_id"]}): {status["state"]}; phase: '
            f'{phase}; agents: {status["agents_running"]} running, {status["agents_done"]} done, '
            f'{status["agents_failed"]} failed'
            + (f', {status["agents_cancelled"]} cancelled' if status.get("agents_cancelled")
               else "")
            + (f', {status["agents_replayed"]} replayed' if status["agents_replayed"] else "")
            + f'; tokens: {status["tokens"]}' + (f"; cost: {cost}" if cost else "")
            + f'; elapsed: {status["elapsed_s"]:.1f}s')


def cancel_text(run_id: str, cancelled: bool) -> str:
    if cancelled:
        return f"Cancelling run {run_id}; its result will arrive as cancelled."
    return f"Run {run_id} has already ended; nothing to cancel."


def engine_section(config: Any, provider: Any, library: Any,
                   max_result_chars: int | None = None, *, agents: Any = None) -> str:
    """What this engine allows, for the description: its caps and size limits (the per-child
    time limit, or that there is none), what each provider route's children can do (each
    provider's one-line ``description``, its model's price per million tokens when the price
    data knows it), the agent types ``agents`` has for ``agentType`` (with their descriptions and
    tools, as Claude Code's Agent tool lists them) and the saved workflows ``workflow(name)``
    can run, with their ``whenToUse``."""
    if config is None:
        return ""
    mib = config.memory_limit_bytes / (1024 * 1024)
    parts = [f"up to {config.max_concurrent_agents} agents run at once (more queue in order)",
             f"{config.max_total_agents} agent() calls per run",
             f"{config.max_items_per_call} items per parallel()/pipeline() call",
             f"prompts up to {config.max_prompt_chars} characters",
             f"values nested up to {config.max_value_depth} levels",
             f"{config.slice_cpu_limit_s:g} s of CPU per synchronous stretch of script",
             f"{mib:g} MiB of script memory"]
    if max_result_chars is not None:
        parts.append(f"the result text is cut at {max_result_chars} characters (the cut says "
                     "how to read the rest)")
    if config.run_timeout_s is not None:
        parts.append(f"a {config.run_timeout_s:g} s limit on the whole run")
    if config.agent_timeout_s is not None:
        parts.append(f"an agent that takes over {config.agent_timeout_s:g} s gives null")
    else:
        parts.append("no time limit per agent")
    if config.budget_tokens is not None:
        parts.append(f"a budget of {config.budget_tokens} tokens per run")
    if config.budget_usd is not None:
        parts.append(f"a budget of ${config.budget_usd:g} per run")
    lines = ["This engine: " + "; ".join(parts) + "."]
    lines.extend(_provider_lines(provider, config.model_prices))
    lines.extend(_agent_type_lines(agents))
    lines.extend(_library_lines(library))
    return "\n".join(lines)


def _provider_lines(provider: Any, prices: Any = None) -> list[str]:
    """What the children of each provider route can do, one line each (read from the
    provider's declared ``info``: a routing provider's record lists its routes, default and
    their descriptions), each model priced as the engine prices it (``prices``: its
    ``model_prices``)."""
    if provider is None:
        return []
    record = provider_info(provider).record
    routes, default = record.get("routes"), record.get("default")
    if isinstance(routes, dict) and routes:
        descriptions = record.get("descriptions")
        descriptions = descriptions if isinstance(descriptions, dict) else {}
        models = record.get("models")
        models = models if isinstance(models, dict) else {}
        lines = ["Provider routes for opts.provider: " + ", ".join(sorted(routes))
                 + (f" (default {default})" if isinstance(default, str) and default else "")
                 + ":"]
        for name in sorted(routes):
            described = descriptions.get(name)
            model = models.get(name)
            lines.append(f"- {name}: " + (described if isinstance(described, str) and described
                                           else "a provider that does not describe itself")
                         + _price_note(model if isinstance(model, str) else None, prices))
        return lines
    described = provider_description(provider)
    note = _price_note(provider_info(provider).default_model, prices)
    return [] if described is None else [f"Children: {described}{note}."]


def _price_note(model: str | None, prices: Any = None) -> str:
    """``; <model>: $I/$O per million input/output tokens`` for a model ``prices`` (the
    engine's ``model_prices``) or the price data knows (a provider's or route's default
    model), else ``""``."""
    quoted = million_token_prices(model, prices or None)
    if quoted is None:
        return ""
    read, written = quoted
    return f"; {model}: ${read:.4g}/${written:.4g} per million input/output tokens"


#: Agent types the description lists, and the longest line it gives one.
_MAX_LISTED_AGENT_TYPES = 20
_MAX_AGENT_TYPE_LINE = 200


def _agent_type_lines(agents: Any) -> list[str]:
    """The agent types for opts.agentType, one line each as Claude Code's Agent tool lists
    them: name, description and the tools each may use (``*``: not restricted)."""
    definitions = list(agents)[:_MAX_LISTED_AGENT_TYPES] if agents is not None else []
    if not definitions:
        return []
    total = len(agents)
    lines = ["Agent types for opts.agentType and the tools they have access to"
             + (f" ({_MAX_LISTED_AGENT_TYPES} of {total})" if total > len(definitions) else "")
             + ":"]
    for definition in definitions:
        tools = "*" if definition.tools is None else ", ".join(definition.tools) or "none"
        about = definition.description or "no description"
        line = " ".join(f"- {definition.name}: {about} (Tools: {tools})".split())
        if len(line) > _MAX_AGENT_TYPE_LINE:
            line = line[:_MAX_AGENT_TYPE_LINE - 1] + "…"
        lines.append(line)
    return lines


#: Saved workflows the description lists, and the longest line it gives one.
_MAX_LISTED_WORKFLOWS = 20
_MAX_WORKFLOW_LINE = 200


def _library_lines(library: Any) -> list[str]:
    """The saved workflows for workflow(name): name, description and whenToUse, one line each."""
    workflows = library.workflows() if library is not None else []
    if not workflows:
        return []
    lines = ["Saved workflows for workflow(name): "
             + ", ".join(w.name for w in workflows[:_MAX_LISTED_WORKFLOWS])
             + (f", … ({len(workflows)} in all)" if len(workflows) > _MAX_LISTED_WORKFLOWS
                else "") + ":"]
    for saved in workflows[:_MAX_LISTED_WORKFLOWS]:
        line = f"- {saved.name}: {saved.description}"
        when = saved.meta.when_to_use
        if when:
            line += f" Use when: {when}"
        line = " ".join(line.split())
        if len(line) > _MAX_WORKFLOW_LINE:
            line = line[:_MAX_WORKFLOW_LINE - 1] + "…"
        lines.append(line)
    return lines
