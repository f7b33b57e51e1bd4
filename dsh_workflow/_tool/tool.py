"""The ``workflow`` tool: a thin layer over the engine seam.

The tool validates the model's arguments, starts one run through
:meth:`WorkflowEngine.start`, awaits its result, always disposes it, and turns the outcome into
a :class:`ToolResult` whose text a model can read and correct from. It uses nothing of an
engine but the seam (``start``, ``WorkflowRun.result/cancel/dispose``, and what
:class:`WorkflowEngine` declares: ``config``, ``provider``, ``agents``, ``library``, ``durable``,
``recorded_result``, ``start_soon``), so any engine works.

Durable runs (docs/durable-runs.md): over an engine with a run store (``engine.durable``) the tool
also accepts ``resumeFrom`` (a run id), its description says how to fix a script and resume,
and every text of a run that started ends with its id on its own last line, ``Run id: <id>``.
Without a store the schema, the description and the texts are exactly those of release 1.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal, Self

import anyio
from anyio.abc import TaskGroup
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._errors import WorkflowError
from .._questions import question_data
from .._request import WorkflowStartRequest
from .._result import WorkflowResult
from .._run import WorkflowEngine, WorkflowRun
from . import texts
from .background import KEPT_STATUSES, BackgroundRuns, OnComplete
from .failures import FailureLog, failures_data, failures_line
from .results import PartError, RecentResults, rendered, result_page

__all__ = ["DurableToolArgs", "ToolCallCard", "ToolResult", "WorkflowTool", "WorkflowToolArgs",
           "check_tool_settings"]

#: The name rule shared by the OpenAI and Anthropic tool formats.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The reason a run is cancelled with when the task awaiting ``execute`` is cancelled.
CALLER_CANCELLED_REASON = "tool call cancelled"


class ToolResult(BaseModel):
    """What one tool call returns to the harness.

    ``text`` is what the model reads. ``is_error`` is true for refused arguments, start
    errors, and runs that did not complete. ``data`` is machine-readable:

    * completed: ``{"run_id", "agents_started", "usage", "result"}`` with the whole value
      (never cut); ``usage`` is the children's usage summed: ``{"input_tokens",
      "output_tokens"}``, plus the cache counts when not 0 and ``cost_usd`` (US dollars) once a
      child's cost is known (see :class:`~dsh_workflow.Usage`);
    * run cancelled / failed: ``{"run_id", "agents_started", "usage", "stop_reason", "error",
      "error_code"}``, ``error_code`` the result's :class:`WorkflowErrorCode` value (what to
      branch on, rather than the text's ``CODE:`` prefix);
    * start error: ``{"error_code": <WorkflowErrorCode value>}``;
    * refused arguments: ``{"error_code": "INVALID_ARGS"}``.

    Over an engine with a run store, the data of a run that started also holds
    ``agents_replayed`` (calls answered from the resumed run's journal).

    The data of a run that started also holds ``agents_failed`` (children whose outcome was
    neither ``completed`` nor ``cancelled``) and ``agents_cancelled``. When any child failed,
    it holds ``failures`` too: each failed child's ``{seq, label, phase, outcome, kind,
    message, details}`` (at most 100), and a completed run's text ends with one more line,
    ``Agents failed: <n> of <started> — ...`` (docs/scripts.md, "Truthful outcomes");
    otherwise the text is unchanged.
    """

    model_config = ConfigDict(frozen=True)

    text: str
    is_error: bool = False
    data: dict[str, Any] | None = None


class ToolCallCard(BaseModel):
    """A generic presentation of a pending call: a title and the script as raw input."""

    model_config = ConfigDict(frozen=True)

    card: Literal["generic"] = "generic"
    title: str
    raw_input: str


class WorkflowToolArgs(BaseModel):
    """The tool's arguments as the tool itself checks them (the engine checks ``meta``'s shape)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    meta: dict[str, Any]
    script: str
    args: dict[str, Any] | None = None


class DurableToolArgs(WorkflowToolArgs):
    """The arguments over an engine with a run store: ``resumeFrom`` names the run to resume."""

    resume_from: str | None = Field(None, alias="resumeFrom")


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _problem(field: str, raw: Mapping[str, Any], error: Mapping[str, Any], *,
             durable: bool) -> str:
    """One model-readable sentence for one validation error of ``field``."""
    if error["type"] == "extra_forbidden":
        names = "meta, script, args, resumeFrom" if durable else "meta, script, args"
        return f"`{field}` is not a parameter of this tool (parameters: {names})"
    present = field in raw
    value = raw.get(field)
    if field == "meta":
        if not present:
            return "`meta` is required: a JSON object with at least name and description"
        if isinstance(value, Mapping):
            return "`meta` keys must be strings"
        return f"`meta` must be a JSON object with at least name and description, not {_json_type(value)}"
    if field == "script":
        if not present:
            return "`script` is required: the JavaScript body as a string"
        return f"`script` must be a string (the JavaScript body), not {_json_type(value)}"
    if field == "args":
        if isinstance(value, list | tuple):
            return ("`args` must be a JSON object, not an array: wrap the list in an object, "
                    'e.g. {"items": [...]}, and read it in the script as args.items')
        if isinstance(value, Mapping):
            return "`args` keys must be strings"
        return f"`args` must be a JSON object or omitted, not {_json_type(value)}"
    if field == "resumeFrom":
        return ("`resumeFrom` must be a run id string (from the `Run id:` line of an earlier "
                f"result) or omitted, not {_json_type(value)}")
    return f"`{field}`: {error['msg']}"  # pragma: no cover - every field is handled above


def _load(arguments: object) -> object:
    """Arguments as data; JSON text (an OpenAI tool call's ``arguments``) is parsed first."""
    if isinstance(arguments, str | bytes | bytearray):
        return json.loads(arguments)
    return arguments


def parse_arguments(arguments: object, *,
                    durable: bool = False) -> WorkflowToolArgs | list[str]:
    """Validate tool-call arguments; returns the model, or every problem as a sentence.
    ``durable``: the engine has a run store, so ``resumeFrom`` is a parameter
    (a :class:`DurableToolArgs` is returned)."""
    try:
        raw = _load(arguments)
    except (ValueError, RecursionError) as exc:
        return [f"the arguments are not valid JSON ({exc})"]
    if not isinstance(raw, Mapping):
        return [f'the arguments must be a JSON object {{"meta": {{...}}, "script": "..."}}, '
                f"not {_json_type(raw)}"]
    optional = ("args", "resumeFrom") if durable else ("args",)
    # an explicit null is the same as leaving the parameter out
    raw = {key: value for key, value in raw.items() if not (key in optional and value is None)}
    model = DurableToolArgs if durable else WorkflowToolArgs
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        problems: list[str] = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            text = _problem(field, raw, error, durable=durable)
            if text not in problems:
                problems.append(text)
        return problems


def check_tool_settings(tool_name: object, max_result_chars: object) -> None:
    """Raise ``ValueError`` unless ``tool_name`` matches ``[A-Za-z0-9_-]{1,64}`` and
    ``max_result_chars`` is an int >= 1 (what :class:`WorkflowTool` and the MCP server accept)."""
    if not isinstance(tool_name, str) or not _TOOL_NAME.fullmatch(tool_name):
        raise ValueError(f"tool_name must match [A-Za-z0-9_-]{{1,64}}, got {tool_name!r}")
    if isinstance(max_result_chars, bool) or not isinstance(max_result_chars, int) \
            or max_result_chars < 1:
        raise ValueError(f"max_result_chars must be an int >= 1, got {max_result_chars!r}")


def _invalid(problems: list[str]) -> ToolResult:
    return ToolResult(text=texts.invalid_arguments_text(problems), is_error=True,
                      data={"error_code": "INVALID_ARGS"})


class WorkflowTool:
    """The ``workflow`` tool over one engine.

    ``tool_name`` must match ``[A-Za-z0-9_-]{1,64}`` (the OpenAI and Anthropic rule);
    ``max_result_chars`` (an int >= 1) bounds the rendered return value in the result text.

    ``background=True`` (docs/embedding.md, "The model-facing tool"): ``execute`` starts the run
    and returns at once with its run id; the completion — the :class:`ToolResult` a foreground
    call would have returned — comes through ``completions()`` and ``on_complete`` (a plain or
    async callable), exactly once.
    ``status(run_id)`` and ``cancel(run_id)`` serve the companion tools ``<name>_status`` and
    ``<name>_cancel`` (see :meth:`openai_tools`, :meth:`anthropic_tools`, :meth:`call`). At
    most ``max_background_runs`` run at once; one more is refused with a clear text. Enter the
    tool (``async with tool:``) to have completions delivered as runs end; leaving the block
    cancels and disposes the runs still going. A tool that was not entered has its runs waited
    for in the engine's task group (:meth:`WorkflowEngine.start_soon`), so ``on_complete`` is
    still called for each; over an engine that cannot, ``execute`` refuses with a text saying
    how to enter the tool rather than lose a completion. An ``on_complete`` that raises is
    logged on ``dsh_workflow.tool`` and changes nothing else. The statuses of only the latest
    ``kept_background_statuses`` (an int >= 1) ended runs are kept; ``status`` of an older one
    says it is no longer kept.
    """

    def __init__(self, engine: WorkflowEngine, *, tool_name: str = "workflow",
                 max_result_chars: int = 50_000, background: bool = False,
                 on_complete: OnComplete | None = None, max_background_runs: int = 4,
                 kept_background_statuses: int = KEPT_STATUSES,
                 recent_results: RecentResults | None = None) -> None:
        check_tool_settings(tool_name, max_result_chars)
        self._engine = engine
        self._recent = recent_results if recent_results is not None else RecentResults()
        self._name = tool_name
        self._max_result_chars = max_result_chars
        self._background: BackgroundRuns | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._tg: TaskGroup | None = None
        self._failures = FailureLog()
        self._unsubscribe_failures = engine.events.subscribe(self._failures.on_event)
        if background:
            if isinstance(max_background_runs, bool) or not isinstance(max_background_runs, int) \
                    or max_background_runs < 1:
                raise ValueError("max_background_runs must be an int >= 1, got "
                                 f"{max_background_runs!r}")
            if isinstance(kept_background_statuses, bool) \
                    or not isinstance(kept_background_statuses, int) \
                    or kept_background_statuses < 1:
                raise ValueError("kept_background_statuses must be an int >= 1, got "
                                 f"{kept_background_statuses!r}")
            if on_complete is not None and not callable(on_complete):
                raise TypeError("on_complete must be callable")
            self._background = BackgroundRuns(max_runs=max_background_runs,
                                              describe=self._completion, on_complete=on_complete,
                                              start_soon=engine.start_soon,
                                              kept_statuses=kept_background_statuses)
            self._unsubscribe = engine.events.subscribe(self._background.on_event)

    async def __aenter__(self) -> Self:
        if self._background is not None:
            tg = anyio.create_task_group()
            await tg.__aenter__()
            self._tg = tg
            self._background.attach(tg)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._background is None or self._tg is None:
            return
        try:
            await self._background.close()
        finally:
            self._background.attach(None)
            self._tg.cancel_scope.cancel()
            tg, self._tg = self._tg, None
            await tg.__aexit__(None, None, None)
            if self._unsubscribe is not None:
                self._unsubscribe()

    @property
    def background(self) -> bool:
        """Whether calls return at once and deliver their results later."""
        return self._background is not None
    @property
    def engine(self) -> WorkflowEngine:
        """The engine every call starts its run on."""
        return self._engine

    @property
    def name(self) -> str:
        """The configured tool name."""
        return self._name

    @property
    def max_result_chars(self) -> int:
        """Characters of rendered JSON kept in a success text before the truncation notice."""
        return self._max_result_chars

    @property
    def durable(self) -> bool:
        """Whether the engine records runs (``engine.durable``), so runs can be resumed with
        ``resumeFrom``."""
        return self._engine.durable

    @property
    def description(self) -> str:
        """The authoring contract, written for a model (with how to resume, when durable, and
        how background runs work, when background)."""
        engine = self._engine
        text = texts.tool_description(engine.config, engine.provider, engine.library,
                                      self._max_result_chars, durable=self.durable,
                                      agents=engine.agents)
        if self._background is not None:
            text = text + texts.BACKGROUND_NOTE.format(
                name=self._name, status=self._name + "_status", cancel=self._name + "_cancel")
        return text

    @property
    def input_schema(self) -> dict[str, Any]:
        """The parameters' JSON Schema (a fresh copy on every access); ``resumeFrom`` is a
        parameter only when the engine is durable."""
        return texts.tool_input_schema(durable=self.durable)

    @property
    def system_prompt_section(self) -> str:
        """System-prompt guidance on when to use the tool, naming it by its configured name."""
        return texts.system_prompt_section(self._name)

    def openai_tool(self) -> dict[str, Any]:
        """The tool in OpenAI chat-completions form: ``{"type": "function", "function": ...}``."""
        return {"type": "function", "function": {"name": self._name,
                                                 "description": self.description,
                                                 "parameters": self.input_schema}}

    def anthropic_tool(self) -> dict[str, Any]:
        """The tool in Anthropic Messages form: ``{"name", "description", "input_schema"}``."""
        return {"name": self._name, "description": self.description,
                "input_schema": self.input_schema}

    def _companions(self) -> list[tuple[str, str, dict[str, Any]]]:
        reader = (self._name + "_result", texts.result_description(self._max_result_chars),
                  texts.result_schema(self._max_result_chars))
        # a durable engine's parked runs are answered and continued by <name>_answer
        answerer = [(self._name + "_answer", texts.ANSWER_DESCRIPTION, texts.answer_schema())] \
            if self.durable else []
        if self._background is None:
            return [reader, *answerer]
        return [(self._name + "_status", texts.STATUS_DESCRIPTION, texts.run_id_schema()),
                (self._name + "_cancel", texts.CANCEL_DESCRIPTION, texts.run_id_schema()),
                reader, *answerer]

    def result_tool(self) -> tuple[str, str, dict[str, Any]]:
        """The ``<name>_result`` companion as ``(name, description, input schema)``."""
        return next(c for c in self._companions() if c[0] == self._name + "_result")

    def answer_tool(self) -> tuple[str, str, dict[str, Any]] | None:
        """The ``<name>_answer`` companion as ``(name, description, input schema)``: over a
        durable engine only (None otherwise)."""
        return next((c for c in self._companions() if c[0] == self._name + "_answer"), None)

    def openai_tools(self) -> list[dict[str, Any]]:
        """This tool and its companions in OpenAI form: ``<name>_result`` always, in
        background mode ``<name>_status`` and ``<name>_cancel`` before it, and over a durable
        engine ``<name>_answer`` after it."""
        return [self.openai_tool()] + [
            {"type": "function", "function": {"name": name, "description": description,
                                              "parameters": schema}}
            for name, description, schema in self._companions()]

    def anthropic_tools(self) -> list[dict[str, Any]]:
        """This tool and its companions (as :meth:`openai_tools` lists them), in Anthropic
        form."""
        return [self.anthropic_tool()] + [
            {"name": name, "description": description, "input_schema": schema}
            for name, description, schema in self._companions()]

    async def call(self, name: str, args: object, *, parent: object = None) -> ToolResult:
        """Dispatch a tool call by name: this tool or one of its companions."""
        if name == self._name:
            return await self.execute(args, parent=parent)
        if name == self._name + "_result":
            return await self.read_result(args)
        if name == self._name + "_answer" and self.durable:
            return await self.answer(args, parent=parent)
        run_id = _run_id_argument(args)
        if name == self._name + "_status" and self._background is not None:
            return self.status(run_id) if run_id else _invalid(["runId: a run id is required"])
        if name == self._name + "_cancel" and self._background is not None:
            return self.cancel(run_id) if run_id else _invalid(["runId: a run id is required"])
        raise ValueError(f"{name!r} is not one of this tool's names")

    def status(self, run_id: str) -> ToolResult:
        """The live status of a background run (phase, agents, tokens, elapsed)."""
        background = self._require_background()
        data = background.status(run_id)
        if data is None:
            return ToolResult(text=texts.unknown_run_text(run_id, background.kept_statuses),
                              is_error=True)
        return ToolResult(text=texts.status_text(data), data=data)

    def cancel(self, run_id: str) -> ToolResult:
        """Cancel a background run; its completion then arrives as cancelled."""
        background = self._require_background()
        if background.status(run_id) is None:
            return ToolResult(text=texts.unknown_run_text(run_id, background.kept_statuses),
                              is_error=True)
        cancelled = background.cancel(run_id)
        return ToolResult(text=texts.cancel_text(run_id, cancelled),
                          data={"run_id": run_id, "cancelled": cancelled})

    async def read_result(self, args: object) -> ToolResult:
        """Serve ``<name>_result`` (docs/embedding.md, "Whole results"): ``args`` is
        ``{runId, pointer?, offset?, limit?}`` (a mapping or its JSON text). The value is the
        engine's stored result when it has a store, else one of this tool's last results
        (:class:`RecentResults`). Returns the page (``data``: :meth:`ResultPage.as_data`), or an
        error result for refused arguments, a run with no return value to read, a pointer
        that names nothing or an offset past the end. Never raises for a bad call."""
        parsed = _result_arguments(args, self._max_result_chars)
        if isinstance(parsed, list):
            return _invalid(parsed)
        run_id, pointer, offset, limit = parsed
        found, value, why = await self._return_value(run_id)
        if not found:
            return ToolResult(text=texts.no_result_text(run_id, why), is_error=True,
                              data={"error_code": "NO_RESULT"})
        try:
            page = result_page(run_id, value, pointer=pointer, offset=offset, limit=limit)
        except PartError as exc:
            return ToolResult(text=f"Error: {exc}", is_error=True,
                              data={"error_code": "NO_SUCH_PART"})
        return ToolResult(text=texts.result_page_text(self._name + "_result", page),
                          data=page.as_data())

    async def answer(self, args: object, *, parent: object = None,
                     by: str = "caller") -> ToolResult:
        """Serve ``<name>_answer`` (docs/embedding.md, "Runs that wait"): ``args`` is ``{runId,
        qid, value}`` (a mapping or its JSON text). The answer is recorded in the engine's
        run store (``by`` names the answerer in ``QuestionAnswered.by``), checked as every
        answer is; then a parked run (status ``waiting``) whose questions are all answered
        is continued in this tool's engine (a resume of it, replaying its journal and
        answers) and the call returns that run's text as :meth:`execute` would. A parked run
        with questions still open gets them listed again; a run still running in another
        process picks the answer up itself. Refused (an error result, nothing recorded, the
        question still open): bad arguments, an engine without a run store, an unknown run or
        qid, a question already answered, a value that does not answer it. Never raises for a
        bad call."""
        parsed = _answer_arguments(args)
        if isinstance(parsed, list):
            return _invalid(parsed)
        run_id, qid, value = parsed
        store = getattr(self._engine, "store", None)
        if store is None or not hasattr(store, "answer_question"):
            return ToolResult(text="Error: this engine keeps no run store, so it has no "
                                   "waiting run to answer", is_error=True,
                              data={"error_code": "NO_STORE"})
        record = await store.get_run(run_id)
        if record is None:
            return ToolResult(text=f"Error: no run {run_id!r} in the run store", is_error=True,
                              data={"error_code": "NO_SUCH_RUN"})
        if record.status not in ("waiting", "running"):
            return ToolResult(text=f"Error: run {run_id} is not waiting for an answer (it is "
                                   f"{record.status})", is_error=True,
                              data={"error_code": "NOT_WAITING"})
        try:
            await store.answer_question(run_id, qid, value, by=by)
        except WorkflowError as exc:
            return ToolResult(text=f"Error: {exc.message}", is_error=True,
                              data={"error_code": exc.code.value})
        still_open = await store.questions(run_id)
        name = str(record.meta.get("name") or "workflow")
        if record.status == "running":
            return ToolResult(text=f"Answered {qid}: run {run_id} is running and goes on with "
                                   "the answer.", data={"run_id": run_id, "qid": qid})
        if still_open:
            text = texts.parked_text(name, run_id, still_open, self._name + "_answer",
                                     durable=True)
            return ToolResult(text=f"Answered {qid}. {text}",
                              data={"run_id": run_id, "qid": qid, "stop_reason": "waiting",
                                    "pending": [question_data(q) for q in still_open]})
        meta = {key: v for key, v in record.meta.items() if v is not None}
        call: dict[str, Any] = {"meta": meta, "script": record.script, "resumeFrom": run_id}
        if record.args is not None:
            call["args"] = record.args
        return await self.execute(call, parent=parent)

    def _parked(self, run: WorkflowRun, result: WorkflowResult,
                data: dict[str, Any]) -> ToolResult:
        """What a parked run's call returns: the run id and, for questions, each ``qid`` and
        how to answer it (not an error: the run waits)."""
        pending = list(result.pending or ())
        data = {**data, "waiting_reason": result.waiting_reason,
                "pending": [question_data(q) for q in pending],
                "resume_after": None if result.resume_after is None
                else result.resume_after.isoformat()}
        if result.waiting_reason == "limit":
            text = texts.limit_parked_text(run.meta.name, run.id, result.resume_after,
                                           durable=self.durable)
        else:
            text = texts.parked_text(run.meta.name, run.id, pending, self._name + "_answer",
                                     durable=self.durable)
        return ToolResult(text=text, data=data)

    async def _return_value(self, run_id: str) -> tuple[bool, Any, str]:
        """``(True, value, "")`` for a run whose return value can be read, else ``(False,
        None, why)``."""
        found, value = self._recent.get(run_id)
        if found:
            return True, value, ""
        if not self._engine.durable:
            return False, None, ("no such run among this tool's last results (an engine "
                                 "without a run store keeps only a few)")
        record = await self._engine.recorded_result(run_id)
        if record is None:
            return False, None, "no such run in the run store"
        result = record.result
        if result is None:
            return False, None, f"the run has no result ({record.status})"
        if result.get("stop_reason") != "completed":
            return False, None, f"the run did not complete ({result.get('stop_reason')})"
        return True, result.get("value"), ""

    def completions(self) -> AsyncIterator[ToolResult]:
        """The completions of background runs, as they end (each exactly once)."""
        return self._require_background().completions()

    def _require_background(self) -> BackgroundRuns:
        if self._background is None:
            raise RuntimeError("status(), cancel() and completions() need "
                               "WorkflowTool(engine, background=True)")
        return self._background

    def render_call(self, args: object) -> ToolCallCard | None:
        """A generic card for a pending call, from its arguments alone; never raises.

        Titled ``workflow: <meta.name>`` (``workflow`` when the name is not a non-empty
        string), with the script as raw input. Arguments that are not an object, or lack an
        object ``meta`` or a string ``script``, give ``None``.
        """
        try:
            raw = _load(args)
            if not isinstance(raw, Mapping):
                return None
            meta, script = raw.get("meta"), raw.get("script")
            if not isinstance(meta, Mapping) or not isinstance(script, str):
                return None
            name = meta.get("name")
        except Exception:  # noqa: BLE001 - presentation must survive any logged input
            return None
        title = f"workflow: {name}" if isinstance(name, str) and name else "workflow"
        return ToolCallCard(title=title, raw_input=script)

    async def execute(self, args: object, *, parent: object = None) -> ToolResult:
        """Run one workflow call to its end and describe the outcome.

        ``args`` is the call's arguments (a mapping, or the JSON text of one). Refused
        arguments and a ``WorkflowError`` from ``engine.start()`` give an error result and
        start nothing. Otherwise the run is awaited and then always disposed.

        Cancellation: if the task awaiting ``execute`` is cancelled, the run is cancelled with
        the reason ``"tool call cancelled"``, disposed inside a shielded cancel scope (bounded
        by the engine's dispose grace), and the cancellation propagates.

        Over a durable engine, ``resumeFrom`` is passed as the request's ``resume_from`` (an
        unknown id is the engine's start error), and the text of every run that started ends
        with ``Run id: <id>`` (after any truncation of the value, so it is never cut).
        """
        durable = self.durable
        parsed = parse_arguments(args, durable=durable)
        if isinstance(parsed, list):
            return _invalid(parsed)
        resume_from = parsed.resume_from if isinstance(parsed, DurableToolArgs) else None
        request = WorkflowStartRequest(meta=parsed.meta, script=parsed.script,
                                       args=parsed.args, parent=parent, resume_from=resume_from)
        background = self._background
        if background is not None and background.running >= background.max_runs:
            return ToolResult(text=texts.background_limit_text(background.max_runs),
                              is_error=True, data={"error_code": "BACKGROUND_LIMIT"})
        if background is not None and not self._can_deliver():
            return _not_entered()
        try:
            run = self._engine.start(request)
        except WorkflowError as exc:
            return ToolResult(text=texts.start_error_text(exc.message), is_error=True,
                              data={"error_code": exc.code.value})
        self._failures.watch(run.id)
        if background is not None:
            if not background.add(run):
                run.cancel(texts.NOT_ENTERED_REASON)
                with anyio.CancelScope(shield=True):
                    await run.dispose()
                return _not_entered()
            return ToolResult(text=texts.background_started_text(run.meta.name, run.id),
                              data={"run_id": run.id, "background": True})
        try:
            result = await run.result()
        except BaseException:
            run.cancel(CALLER_CANCELLED_REASON)
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await run.dispose()
        return await self._completion(run, result)

    def _can_deliver(self) -> bool:
        """Whether a background run's ``on_complete`` would be called: the tool was entered,
        or the engine waits for runs in its task group (it overrides ``start_soon``), or
        there is no ``on_complete`` (``completions()`` delivers while iterated)."""
        assert self._background is not None
        if self._background.entered or not self._background.has_on_complete:
            return True
        return type(self._engine).start_soon is not WorkflowEngine.start_soon

    async def _completion(self, run: WorkflowRun, result: WorkflowResult) -> ToolResult:
        """What a finished run's call returns (foreground) or delivers (background)."""
        described = self._with_failures(self._describe(run, result), run, result)
        if not self.durable:
            return described
        data = {**(described.data or {}), "agents_replayed": result.agents_replayed}
        return described.model_copy(update={"text": texts.with_run_id(described.text, run.id),
                                            "data": data})

    def _with_failures(self, described: ToolResult, run: WorkflowRun,
                       result: WorkflowResult) -> ToolResult:
        """``described`` with the run's failed children: ``data`` lists them, and a completed
        run's text gains the ``Agents failed:`` line when any child failed."""
        failures = self._failures.take(run.id)
        if not failures and not result.agents_failed and not result.agents_cancelled:
            return described.model_copy(update={"data": {**(described.data or {}),
                                                         "agents_failed": 0,
                                                         "agents_cancelled": 0}})
        cancelled = sum(1 for failure in failures if failure["outcome"] == "cancelled")
        data = {**(described.data or {}),
                "agents_failed": max(result.agents_failed, len(failures) - cancelled),
                "agents_cancelled": max(result.agents_cancelled, cancelled),
                "failures": failures_data(failures)}
        text = described.text
        line = failures_line(failures, result.agents_started) \
            if result.stop_reason == "completed" else None
        if line is not None:
            text = f"{text}\n{line}"
        return described.model_copy(update={"text": text, "data": data})

    def _describe(self, run: WorkflowRun, result: WorkflowResult) -> ToolResult:
        if result.stop_reason == "completed":
            if not self.durable:
                self._recent.remember(run.id, result.value, len(rendered(result.value)))
            rest = texts.rest_hint(self._name + "_result", run.id, self._max_result_chars)
            text = texts.success_text(run.meta.name, result.agents_started, result.value,
                                      self._max_result_chars, result.warnings, rest)
            data: dict[str, Any] = {"run_id": run.id, "agents_started": result.agents_started,
                                    "usage": result.usage.model_dump(), "result": result.value}
            if result.agents_unpriced:  # usage's cost_usd is a lower bound, or absent
                data["agents_unpriced"] = result.agents_unpriced
            if result.warnings:
                data["warnings"] = list(result.warnings)
            return ToolResult(text=text, data=data)
        data = {"run_id": run.id, "agents_started": result.agents_started,
                "usage": result.usage.model_dump(),
                "stop_reason": result.stop_reason, "error": result.error,
                "error_code": None if result.error_code is None else result.error_code.value}
        if result.stop_reason == "waiting":
            return self._parked(run, result, data)
        if result.stop_reason == "cancelled":
            text = texts.cancelled_text(result.error)
        elif result.stop_reason == "error":
            text = texts.failed_text(result.error, None if result.error_code is None
                                     else result.error_code.value)
        else:
            text = texts.abnormal_text(result.stop_reason)
        return ToolResult(text=text, is_error=True, data=data)


def _answer_arguments(args: object) -> tuple[str, str, Any] | list[str]:
    """``(run_id, qid, value)`` of a ``<name>_answer`` call, or every problem."""
    try:
        raw = _load(args)
    except Exception:  # noqa: BLE001 - a malformed call is a refused call
        raw = None
    if not isinstance(raw, Mapping):
        return ["arguments must be an object {runId, qid, value}"]
    problems = [f"{key}: not a parameter (parameters: runId, qid, value)"
                for key in raw if key not in ("runId", "qid", "value")]
    run_id, qid = raw.get("runId"), raw.get("qid")
    if not isinstance(run_id, str) or not run_id:
        problems.append("runId: a run id is required")
    if not isinstance(qid, str) or not qid:
        problems.append("qid: a question's qid is required (such as \"q1\")")
    if "value" not in raw:
        problems.append("value: the answer is required")
    if problems:
        return problems
    return run_id, qid, raw["value"]  # type: ignore[return-value]  # each checked above


def _not_entered() -> ToolResult:
    return ToolResult(text=texts.background_not_entered_text(), is_error=True,
                      data={"error_code": "BACKGROUND_NOT_ENTERED"})


def _result_arguments(args: object, max_limit: int) -> tuple[str, str, int, int] | list[str]:
    """``(run_id, pointer, offset, limit)`` of a ``<name>_result`` call, or every problem."""
    try:
        raw = _load(args)
    except Exception:  # noqa: BLE001 - a malformed call is a refused call
        raw = None
    if not isinstance(raw, Mapping):
        return ["arguments must be an object {runId, pointer?, offset?, limit?}"]
    problems = [f"{key}: not a parameter (parameters: runId, pointer, offset, limit)"
                for key in raw if key not in ("runId", "pointer", "offset", "limit")]
    run_id, pointer = raw.get("runId"), raw.get("pointer", "")
    offset, limit = raw.get("offset", 0), raw.get("limit", max_limit)
    if not isinstance(run_id, str) or not run_id:
        problems.append("runId: a run id is required")
    if pointer is None:
        pointer = ""
    if not isinstance(pointer, str):
        problems.append("pointer: must be a string (a JSON pointer such as \"/findings/3\")")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        problems.append("offset: must be a whole number >= 0")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= max_limit:
        problems.append(f"limit: must be a whole number from 1 to {max_limit}")
    if problems:
        return problems
    return run_id, pointer, offset, limit  # type: ignore[return-value]  # each checked above


def _run_id_argument(args: object) -> str | None:
    try:
        raw = _load(args)
    except Exception:  # noqa: BLE001 - a malformed call is a refused call
        return None
    if isinstance(raw, Mapping):
        value = raw.get("runId", raw.get("run_id"))
        if isinstance(value, str) and value:
            return value
    return None
