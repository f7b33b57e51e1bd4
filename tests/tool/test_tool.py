"""The ``workflow`` tool over a fake engine: it uses the seam only, and its texts are exact."""

from __future__ import annotations

import copy
import json
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.lowlevel
import jsonschema
import pydantic
import pytest
from _support import await_until

from dsh_workflow._errors import WorkflowError, WorkflowErrorCode
from dsh_workflow._events import EventHub
from dsh_workflow._meta import WorkflowMeta, parse_meta
from dsh_workflow._request import WorkflowStartRequest
from dsh_workflow._result import WorkflowResult
from dsh_workflow._run import WorkflowEngine, WorkflowRun
from dsh_workflow._tool import ToolCallCard, ToolResult, WorkflowTool, texts

META = {"name": "audit", "description": "d"}
SCRIPT = "return 1"


class FakeRun(WorkflowRun):
    """A run settled by the test (``settle``) or by ``cancel``; records every seam call."""

    def __init__(self, run_id: str, meta: WorkflowMeta, outcome: WorkflowResult | None) -> None:
        self.id = run_id
        self.meta = meta
        self.cancel_reasons: list[str | None] = []
        self.dispose_calls = 0
        self.dispose_completed = 0
        self._settled = anyio.Event()
        self._result: WorkflowResult | None = None
        if outcome is not None:
            self.settle(outcome)

    def settle(self, outcome: WorkflowResult) -> None:
        if self._result is None:
            self._result = outcome
            self._settled.set()

    async def result(self) -> WorkflowResult:
        await self._settled.wait()
        assert self._result is not None
        return self._result

    def cancel(self, reason: str | None = None) -> None:
        self.cancel_reasons.append(reason)
        self.settle(WorkflowResult(stop_reason="cancelled", error=reason or "cancelled"))

    async def dispose(self) -> None:
        self.dispose_calls += 1
        await anyio.lowlevel.checkpoint()  # a checkpoint: only completes when dispose is shielded
        self.dispose_completed += 1


class FakeEngine(WorkflowEngine):
    """Starts :class:`FakeRun` objects; ``outcome=None`` parks runs until cancelled."""

    def __init__(self, outcome: WorkflowResult | None = None,
                 start_error: BaseException | None = None) -> None:
        self.events = EventHub()
        self.outcome = outcome
        self.start_error = start_error
        self.requests: list[WorkflowStartRequest] = []
        self.runs: list[FakeRun] = []
        self.started = anyio.Event()

    def start(self, request: WorkflowStartRequest) -> WorkflowRun:
        self.requests.append(request)
        if self.start_error is not None:
            raise self.start_error
        run = FakeRun(f"run-{len(self.runs) + 1}", parse_meta(request.meta), self.outcome)
        self.runs.append(run)
        self.started.set()
        return run

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None


def completed(value: Any, agents: int = 0) -> WorkflowResult:
    return WorkflowResult(value=value, stop_reason="completed", agents_started=agents)


def call(**overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"meta": dict(META), "script": SCRIPT}
    arguments.update(overrides)
    return arguments


# --- success ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_success_starts_through_the_seam_and_renders_exactly() -> None:
    engine = FakeEngine(completed({"findings": [1, 2]}, agents=7))
    tool = WorkflowTool(engine)
    parent = object()
    result = await tool.execute(call(args={"files": ["a.ts"]}), parent=parent)
    assert result == ToolResult(
        text='workflow "audit" completed (7 agents).\nReturn value:\n'
             '{\n  "findings": [\n    1,\n    2\n  ]\n}',
        is_error=False,
        data={"run_id": "run-1", "agents_started": 7,
              "usage": {"input_tokens": 0, "output_tokens": 0},
              "result": {"findings": [1, 2]}, "agents_failed": 0, "agents_cancelled": 0})
    (request,) = engine.requests
    assert parse_meta(request.meta) == WorkflowMeta.model_validate(META)
    assert request.script == SCRIPT
    assert request.args == {"files": ["a.ts"]}
    assert request.parent is parent
    assert request.provider is None and request.max_total_agents is None
    (run,) = engine.runs
    assert run.cancel_reasons == []
    assert (run.dispose_calls, run.dispose_completed) == (1, 1)


@pytest.mark.anyio
@pytest.mark.parametrize(("agents", "phrase"), [(0, "0 agents"), (1, "1 agent"), (2, "2 agents")])
async def test_agent_count_is_pluralised(agents: int, phrase: str) -> None:
    tool = WorkflowTool(FakeEngine(completed(None, agents=agents)))
    result = await tool.execute(call())
    assert result.text == f'workflow "audit" completed ({phrase}).\nReturn value:\nnull'


@pytest.mark.anyio
async def test_non_ascii_is_kept_and_the_name_comes_from_the_run_meta() -> None:
    tool = WorkflowTool(FakeEngine(completed({"città": "naïve ✓ 🎉"}, agents=1)))
    result = await tool.execute(call(meta={"name": "résumé", "description": "d"}))
    assert result.text == ('workflow "résumé" completed (1 agent).\nReturn value:\n'
                           '{\n  "città": "naïve ✓ 🎉"\n}')


@pytest.mark.anyio
async def test_args_absent_null_or_empty_object() -> None:
    engine = FakeEngine(completed(1))
    tool = WorkflowTool(engine)
    await tool.execute(call())
    await tool.execute(call(args=None))
    await tool.execute(call(args={}))
    assert [r.args for r in engine.requests] == [None, None, {}]


@pytest.mark.anyio
async def test_json_text_arguments_are_accepted() -> None:
    engine = FakeEngine(completed([1], agents=2))
    result = await WorkflowTool(engine).execute(json.dumps(call(args={"k": "v"})))
    assert not result.is_error
    assert engine.requests[0].args == {"k": "v"}


# --- truncation --------------------------------------------------------------------------


def _header(agents: int = 0) -> str:
    return f'workflow "audit" completed ({agents} agents).\nReturn value:\n'


@pytest.mark.anyio
async def test_truncation_boundary_exact_length_has_no_notice() -> None:
    value = {"blob": "x" * 100}
    rendered = json.dumps(value, indent=2)
    tool = WorkflowTool(FakeEngine(completed(value)), max_result_chars=len(rendered))
    result = await tool.execute(call())
    assert result.text == _header() + rendered


#: How a cut text says to read the rest (docs/embedding.md, "Whole results").
REST = ('read them with workflow_result({{"runId": "run-1", "offset": {offset}}}); a pointer '
        'such as "/findings/3" reads one part')


@pytest.mark.anyio
async def test_warnings_follow_the_value_even_when_it_is_cut() -> None:
    value = {"blob": "x" * 100}
    rendered = json.dumps(value, indent=2)
    result_in = WorkflowResult(value=value, stop_reason="completed",
                               warnings=("return value.a: NaN became null", "... and 3 more"))
    tool = WorkflowTool(FakeEngine(result_in), max_result_chars=10)
    result = await tool.execute(call())
    assert result.text == (_header() + rendered[:10]
                           + f"\n… [truncated: {len(rendered) - 10} more characters; "
                           + REST.format(offset=10) + "]"
                           + "\nWarnings:\n- return value.a: NaN became null\n- ... and 3 more")
    assert result.data is not None
    assert result.data["warnings"] == ["return value.a: NaN became null", "... and 3 more"]
    clean = await WorkflowTool(FakeEngine(completed(value))).execute(call())
    assert "Warnings:" not in clean.text
    assert clean.data is not None and "warnings" not in clean.data


@pytest.mark.anyio
async def test_truncation_one_character_over() -> None:
    value = {"blob": "x" * 100}
    rendered = json.dumps(value, indent=2)
    tool = WorkflowTool(FakeEngine(completed(value)), max_result_chars=len(rendered) - 1)
    result = await tool.execute(call())
    assert result.text == (_header() + rendered[:-1] + "\n… [truncated: 1 more characters; "
                           + REST.format(offset=len(rendered) - 1) + "]")
    assert result.data == {"run_id": "run-1", "agents_started": 0,
                           "usage": {"input_tokens": 0, "output_tokens": 0}, "result": value,
                           "agents_failed": 0, "agents_cancelled": 0}


@pytest.mark.anyio
async def test_truncation_counts_characters_not_bytes() -> None:
    value = "ééé🎉"  # rendered '"ééé🎉"': 6 characters, 11 UTF-8 bytes
    exact = WorkflowTool(FakeEngine(completed(value)), max_result_chars=6)
    assert (await exact.execute(call())).text == _header() + '"ééé🎉"'
    cut = WorkflowTool(FakeEngine(completed(value)), max_result_chars=4)
    assert (await cut.execute(call())).text == (_header() + '"éé\u00e9'
                                                + "\n… [truncated: 2 more characters; "
                                                + REST.format(offset=4) + "]")


@pytest.mark.anyio
async def test_large_value_is_cut_but_data_keeps_it_whole() -> None:
    value = {"blob": "x" * 500}
    tool = WorkflowTool(FakeEngine(completed(value, agents=3)), max_result_chars=40)
    result = await tool.execute(call())
    omitted = len(json.dumps(value, indent=2)) - 40
    assert result.text.endswith(f"\n… [truncated: {omitted} more characters; "
                                + REST.format(offset=40) + "]")
    assert len(result.text) < 200 + len(REST)  # the value is cut; the hint is bounded
    assert result.data is not None and result.data["result"] == value


# --- run failures ------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(("outcome", "text"), [
    (WorkflowResult(stop_reason="cancelled", error="user", agents_started=2),
     "Error: workflow run was cancelled (user)"),
    (WorkflowResult(stop_reason="cancelled", error="", agents_started=2),
     "Error: workflow run was cancelled"),
    (WorkflowResult(stop_reason="error", error="script threw: boom", agents_started=2),
     "Error: workflow run failed: SCRIPT_ERROR: script threw: boom"),
    (WorkflowResult(stop_reason="error", error="", agents_started=2),
     "Error: workflow run failed: SCRIPT_ERROR: unknown error"),
    (WorkflowResult(stop_reason="error", error="TIMEOUT: late", agents_started=2),
     "Error: workflow run failed: TIMEOUT: late"),
], ids=["cancelled-reason", "cancelled-bare", "failed", "failed-unknown", "failed-prefixed"])
async def test_run_failures_are_error_results_and_the_run_is_disposed(
        outcome: WorkflowResult, text: str) -> None:
    engine = FakeEngine(outcome)
    result = await WorkflowTool(engine).execute(call())
    assert result == ToolResult(text=text, is_error=True, data={
        "run_id": "run-1", "agents_started": 2, "usage": {"input_tokens": 0, "output_tokens": 0},
        "stop_reason": outcome.stop_reason, "error": outcome.error,
        "error_code": outcome.error_code, "agents_failed": 0, "agents_cancelled": 0})
    (run,) = engine.runs
    assert run.cancel_reasons == []
    assert (run.dispose_calls, run.dispose_completed) == (1, 1)


@pytest.mark.anyio
async def test_start_error_becomes_an_error_result_and_nothing_runs() -> None:
    message = "invalid meta: meta.name must be a non-empty string"
    engine = FakeEngine(start_error=WorkflowError(WorkflowErrorCode.META_INVALID, message))
    result = await WorkflowTool(engine).execute(call(meta={"name": "", "description": "d"}))
    assert result == ToolResult(text=f"Error: {message}", is_error=True,
                                data={"error_code": "META_INVALID"})
    assert len(engine.requests) == 1 and engine.runs == []


@pytest.mark.anyio
async def test_parse_error_text_is_the_engine_message() -> None:
    message = "workflow script does not parse: SyntaxError: unexpected token (line 2, column 3)"
    engine = FakeEngine(start_error=WorkflowError("SCRIPT_PARSE", message))
    result = await WorkflowTool(engine).execute(call(script="x\n  )"))
    assert result.text == f"Error: {message}" and result.is_error


@pytest.mark.anyio
async def test_a_misused_engine_is_a_programming_error_not_a_tool_result() -> None:
    engine = FakeEngine(start_error=RuntimeError("engine is not running"))
    with pytest.raises(RuntimeError, match="engine is not running"):
        await WorkflowTool(engine).execute(call())


# --- bad arguments -----------------------------------------------------------------------

PREFIX = "Error: invalid workflow tool arguments: "
BAD_ARGUMENTS = [
    pytest.param({"meta": META}, "`script` is required: the JavaScript body as a string",
                 id="missing-script"),
    pytest.param({"script": SCRIPT},
                 "`meta` is required: a JSON object with at least name and description",
                 id="missing-meta"),
    pytest.param(call(meta=["audit"]), "`meta` must be a JSON object with at least name and "
                 "description, not an array", id="meta-array"),
    pytest.param(call(meta="audit"), "`meta` must be a JSON object with at least name and "
                 "description, not a string", id="meta-string"),
    pytest.param(call(script=12), "`script` must be a string (the JavaScript body), not a number",
                 id="script-number"),
    pytest.param(call(args=["a", "b"]), "`args` must be a JSON object, not an array: wrap the "
                 'list in an object, e.g. {"items": [...]}, and read it in the script as '
                 "args.items", id="args-list"),
    pytest.param(call(args="a,b"), "`args` must be a JSON object or omitted, not a string",
                 id="args-string"),
    pytest.param(call(args=True), "`args` must be a JSON object or omitted, not a boolean",
                 id="args-bool"),
    pytest.param(call(argz={}), "`argz` is not a parameter of this tool (parameters: meta, "
                 "script, args)", id="unknown-key"),
    pytest.param({}, "`meta` is required: a JSON object with at least name and description; "
                 "`script` is required: the JavaScript body as a string", id="empty"),
    pytest.param(["meta"], 'the arguments must be a JSON object {"meta": {...}, "script": '
                 '"..."}, not an array', id="not-an-object"),
    pytest.param(None, 'the arguments must be a JSON object {"meta": {...}, "script": '
                 '"..."}, not null', id="none"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("arguments", "problems"), BAD_ARGUMENTS)
async def test_bad_arguments_never_reach_the_engine(arguments: Any, problems: str) -> None:
    engine = FakeEngine(completed(1))
    result = await WorkflowTool(engine).execute(arguments)
    assert result == ToolResult(text=PREFIX + problems, is_error=True,
                                data={"error_code": "INVALID_ARGS"})
    assert engine.requests == []


@pytest.mark.anyio
async def test_invalid_json_text_is_an_error_result() -> None:
    engine = FakeEngine(completed(1))
    result = await WorkflowTool(engine).execute('{"meta": ')
    assert result.is_error and result.text.startswith(PREFIX + "the arguments are not valid JSON")
    assert engine.requests == []


@pytest.mark.anyio
async def test_pathologically_nested_json_text_is_an_error_result() -> None:
    engine = FakeEngine(completed(1))
    result = await WorkflowTool(engine).execute("[" * 100_000)
    assert result.is_error and result.text.startswith(PREFIX + "the arguments are not valid JSON")
    assert engine.requests == []


@pytest.mark.anyio
async def test_meta_shape_is_left_to_the_engine() -> None:
    engine = FakeEngine(start_error=WorkflowError("META_INVALID", "invalid meta: x"))
    odd_meta = {"name": 3, "extra": True}
    result = await WorkflowTool(engine).execute(call(meta=odd_meta))
    assert result.text == "Error: invalid meta: x"
    assert engine.requests[0].meta == odd_meta


# --- cancellation ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_caller_cancellation_cancels_disposes_and_propagates() -> None:
    engine = FakeEngine(outcome=None)  # parks until cancelled
    tool = WorkflowTool(engine)
    seen: list[str] = []

    async def caller() -> None:
        try:
            await tool.execute(call())
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise
        seen.append("returned")  # pragma: no cover - a failure path

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(caller)
            await engine.started.wait()
            await anyio.sleep(0.01)
            scope.cancel()
    assert seen == ["cancelled"]
    (run,) = engine.runs
    assert run.cancel_reasons == ["tool call cancelled"]
    assert (run.dispose_calls, run.dispose_completed) == (1, 1)


@pytest.mark.anyio
async def test_cancellation_while_the_run_settles_still_disposes_once() -> None:
    engine = FakeEngine(outcome=completed(5))
    tool = WorkflowTool(engine)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await tool.execute(call())
    assert scope.cancelled_caught
    (run,) = engine.runs
    assert run.cancel_reasons == ["tool call cancelled"]
    assert (run.dispose_calls, run.dispose_completed) == (1, 1)


@pytest.mark.anyio
async def test_concurrent_calls_get_their_own_runs() -> None:
    engine = FakeEngine(outcome=None)
    tool = WorkflowTool(engine)
    results: dict[str, ToolResult] = {}

    async def one(name: str) -> None:
        results[name] = await tool.execute(call(meta={"name": name, "description": "d"}))

    async with anyio.create_task_group() as group:
        group.start_soon(one, "first")
        group.start_soon(one, "second")
        await await_until(lambda: len(engine.runs) >= 2, what="both runs to start")
        by_name = {run.meta.name: run for run in engine.runs}
        by_name["first"].settle(completed("a", agents=1))
        by_name["second"].settle(WorkflowResult(stop_reason="error", error="boom"))
    assert results["first"].text.startswith('workflow "first" completed (1 agent).')
    assert results["second"].text == "Error: workflow run failed: SCRIPT_ERROR: boom"
    assert [run.dispose_calls for run in engine.runs] == [1, 1]


# --- wire shapes and texts -----------------------------------------------------------------


def test_openai_tool_shape() -> None:
    tool = WorkflowTool(FakeEngine(), tool_name="orchestrate")
    spec = tool.openai_tool()
    assert set(spec) == {"type", "function"} and spec["type"] == "function"
    assert set(spec["function"]) == {"name", "description", "parameters"}
    assert spec["function"]["name"] == "orchestrate"
    assert spec["function"]["description"] == tool.description
    jsonschema.Draft202012Validator.check_schema(spec["function"]["parameters"])
    jsonschema.Draft7Validator.check_schema(spec["function"]["parameters"])


def test_anthropic_tool_shape() -> None:
    tool = WorkflowTool(FakeEngine())
    spec = tool.anthropic_tool()
    assert set(spec) == {"name", "description", "input_schema"}
    assert spec["name"] == "workflow"
    jsonschema.Draft202012Validator.check_schema(spec["input_schema"])
    assert spec["input_schema"] == tool.input_schema


def test_input_schema_contract() -> None:
    schema = WorkflowTool(FakeEngine()).input_schema
    assert schema["type"] == "object"
    assert set(schema["required"]) == {"meta", "script"}
    assert schema["properties"]["meta"]["type"] == "object"
    assert set(schema["properties"]["meta"]["required"]) == {"name", "description"}
    assert schema["properties"]["script"]["type"] == "string"
    assert schema["properties"]["args"]["type"] == "object"
    phase = schema["properties"]["meta"]["properties"]["phases"]["items"]
    assert set(phase["properties"]) == {"title", "detail", "provider", "model"}
    assert phase["required"] == ["title"]

    def every_property(node: dict[str, Any]) -> list[dict[str, Any]]:
        found = list(node.get("properties", {}).values())
        for child in list(found):
            found += every_property(child)
            if "items" in child:
                found += every_property(child["items"])
        return found

    assert all(p.get("description") for p in every_property(schema))
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid(call(args={"items": [1]}))
    assert not validator.is_valid(call(args=[1]))
    assert not validator.is_valid({"meta": META})


def test_input_schema_is_a_fresh_copy() -> None:
    tool = WorkflowTool(FakeEngine())
    tool.input_schema["properties"].clear()
    tool.openai_tool()["function"]["parameters"]["required"].clear()
    assert set(tool.input_schema["properties"]) == {"meta", "script", "args"}
    assert tool.input_schema["required"] == ["meta", "script"]


def test_system_prompt_section_names_the_configured_tool() -> None:
    section = WorkflowTool(FakeEngine(), tool_name="orchestrate").system_prompt_section
    assert "The orchestrate tool" in section and "Use orchestrate only when" in section
    assert "workflow tool" not in section
    assert "one or two delegations" in section and "subagent" in section


#: The description's length after the third release's answers, and the bound it keeps after
#: the fourth release's (SPEC §26:
#: fatal or null, AgentFailure's details, the pipeline rule, catching in a thunk, SCRIPT_ERROR,
#: the exact language level, Date/RegExp/performance, string phases, script paths, xhigh).
DESCRIPTION_CHARS_RELEASE3 = 5346
DESCRIPTION_CHARS_MAX = 5850


#: What the failure-aware combinators' paragraph (SPEC §26) may cost, on top of the rest.
COMBINATORS_CHARS_MAX = 800
#: What the ask()/checkpoint() lines (SPEC §25) may cost, on top of the rest.
QUESTIONS_CHARS_MAX = 260


def test_description_stays_tight() -> None:
    description = WorkflowTool(FakeEngine()).description
    assert description == texts.DESCRIPTION  # an engine without a config adds nothing
    assert texts.COMBINATORS in description
    assert len(texts.COMBINATORS) <= COMBINATORS_CHARS_MAX
    assert texts.QUESTIONS in description
    assert len(texts.QUESTIONS) <= QUESTIONS_CHARS_MAX
    rest = len(description) - len(texts.COMBINATORS) - len(texts.QUESTIONS) - 1
    assert 2500 <= rest <= DESCRIPTION_CHARS_MAX
    assert rest - DESCRIPTION_CHARS_RELEASE3 <= 480  # what the new answers cost


@pytest.mark.parametrize(("question", "answers"), [
    pytest.param("error shape and codes", [
        '{name: "WorkflowError", code, fatal: true, message}', 'e.code === "BUDGET_EXCEEDED"',
        "INVALID_ARGUMENT", "UNSUPPORTED_OPTION", "UNSUPPORTED_SCHEMA", "AGENT_CAP", "ITEM_CAP",
        "BUDGET_EXCEEDED", "AGENT_FAILED", "RESULT_UNSERIALIZABLE", "CANCELLED"], id="errors"),
    pytest.param("what fatal means", [
        "Fatal means parallel and pipeline never turn it into null",
        "The script may still catch it and return what it has"], id="fatal"),
    pytest.param("what a child can do", [
        "a fresh child that sees only its prompt", "see its line below"], id="children"),
    pytest.param("what opts.phase does", [
        "phase (progress group, display only; default: the current phase(title))"], id="phase"),
    pytest.param("is an invalid structured answer re-asked", [
        "The host does not re-ask a child whose answer is invalid",
        "a provider may repair once"], id="repair"),
    pytest.param("why agent() returned null", [
        "resolves null when the child fails, its structured value is missing or invalid, or it "
        "times out"], id="null"),
    pytest.param("how a saved workflow's failure arrives, in parallel, its args", [
        'throw fatal AGENT_FAILED (workflow("name") failed: ...)',
        "calls may run inside parallel", "with `args` as its own args"], id="saved-workflows"),
    pytest.param("label rules", [
        "label (display name, any string, need not be unique; default: the prompt's first "
        "line, up to 48 characters)"], id="labels"),
    pytest.param('failure: "throw"', [
        'failure ("null", the default, or "throw")', 'With failure: "throw" it rejects',
        '{name: "AgentFailure", kind: "provider"|"invalid"|"missing"|"timeout"|"cancelled", '
        "message, details}"], id="failure-throw"),
    pytest.param("{concurrency}", [
        "parallel(thunks, {concurrency: N}), pipeline(items, ...stages, {concurrency: N}): at "
        "most N items in flight"], id="concurrency"),
    pytest.param("return value conversion", [
        "made JSON as JSON.stringify does", "listed under Warnings",
        "BigInt and cycles are errors"], id="return-value"),
    pytest.param("are provider faults fatal or null", [
        'A provider reporting a failed child gives that null (kind "provider"); only a provider '
        "that breaks (raises) is fatal AGENT_FAILED"], id="fatal-or-null"),
    pytest.param("what an AgentFailure holds", [
        'details: up to 5 validator messages with their JSON paths for "invalid", else []'],
        id="agent-failure"),
    pytest.param("what a stage gets after a null", [
        "A stage that returns null passes null on (the next stage runs: check prev)"],
        id="pipeline-null"),
    pytest.param("does a try/catch inside a thunk catch a fatal error", [
        "a try/catch inside a thunk catches it too"], id="catch-in-thunk"),
    pytest.param("the script's own error", ["as any uncaught error does (SCRIPT_ERROR)"],
                 id="script-error"),
    pytest.param("the language level, Date and RegExp", [
        "QuickJS-ng, ES2023 and later built-ins", "Date (the constructor too), Date.now() and "
        "RegExp (named groups, lookbehind, flags dgimsuvy) work", "performance"],
        id="language"),
    pytest.param("meta as Claude Code writes it, script paths, effort", [
        'phases?: [{title, detail?} or "title"]', '"xhigh"',
        "a path from the project root, else from the calling script's folder"], id="compat"),
])
def test_description_answers_each_question(question: str, answers: list[str]) -> None:
    description = WorkflowTool(FakeEngine()).description
    for answer in answers:
        assert answer in description, f"{question}: {answer!r} missing"


def test_description_carries_the_authoring_contract() -> None:
    description = WorkflowTool(FakeEngine()).description
    for fact in ["export const meta", "not TypeScript", "top-level await", "return <value>",
                 "subagent", "label", "phase", "schema", "model", "provider", "effort",
                 "isolation", "agentType", "null", ".filter(Boolean)", "parallel(thunks)",
                 "barrier", "pipeline(items, ...stages)", "stage(prev, item, index)",
                 "phase(title)", "log(message)", "console.log", "args", "WorkflowError",
                 "code", "message", "2020-12", '"object"', "$defs/$ref", "pattern", "format",
                 "minimum", "timers", "filesystem", "network", "modules", "host objects",
                 "undefined", "JSON.stringify", "Date", "Map", "class instances", "functions",
                 "NaN", "cap", '{"items": [...]}']:
        assert fact in description, fact


# --- presentation --------------------------------------------------------------------------


def test_render_call_is_a_pure_generic_card() -> None:
    engine = FakeEngine()
    tool = WorkflowTool(engine)
    arguments = call(args={"x": 1})
    before = copy.deepcopy(arguments)
    card = tool.render_call(arguments)
    assert card == ToolCallCard(card="generic", title="workflow: audit", raw_input=SCRIPT)
    assert card.model_dump() == {"card": "generic", "title": "workflow: audit",
                                 "raw_input": SCRIPT}
    assert tool.render_call(arguments) == card
    assert arguments == before and engine.requests == []
    assert tool.render_call(json.dumps(arguments)) == card


def test_render_call_without_a_name_is_titled_workflow() -> None:
    card = WorkflowTool(FakeEngine()).render_call({"meta": {"name": 7}, "script": "x"})
    assert card is not None and card.title == "workflow"


@pytest.mark.parametrize("arguments", [
    None, [], 3, "not json", '["json", "array"]', "[" * 100_000, b"\xff",
    {"not": "the schema"}, {"script": SCRIPT},
    {"meta": [], "script": SCRIPT}, {"meta": META}, {"meta": META, "script": 5},
])
def test_render_call_on_malformed_arguments_is_none(arguments: Any) -> None:
    assert WorkflowTool(FakeEngine()).render_call(arguments) is None


# --- construction ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "é", 3])
def test_bad_tool_names_are_refused(name: Any) -> None:
    with pytest.raises(ValueError, match="tool_name"):
        WorkflowTool(FakeEngine(), tool_name=name)


@pytest.mark.parametrize("limit", [0, -1, True, 2.5, "10"])
def test_bad_result_limits_are_refused(limit: Any) -> None:
    with pytest.raises(ValueError, match="max_result_chars"):
        WorkflowTool(FakeEngine(), max_result_chars=limit)


def test_accessors_and_frozen_results() -> None:
    engine = FakeEngine()
    tool = WorkflowTool(engine, tool_name="wf_2", max_result_chars=9)
    assert (tool.engine, tool.name, tool.max_result_chars) == (engine, "wf_2", 9)
    result = ToolResult(text="t")
    assert (result.is_error, result.data) == (False, None)
    with pytest.raises(pydantic.ValidationError):
        result.text = "changed"  # type: ignore[misc]  # deliberately writing a frozen result


def test_description_lists_exactly_the_failure_kinds_and_the_catchable_codes() -> None:
    from typing import get_args

    from dsh_workflow._failure import FailureKind

    kinds = "|".join(f'"{kind}"' for kind in get_args(FailureKind))
    assert f"kind: {kinds}" in texts.DESCRIPTION
    for code in ("INVALID_ARGUMENT", "UNSUPPORTED_OPTION", "UNSUPPORTED_SCHEMA", "AGENT_CAP",
                 "ITEM_CAP", "BUDGET_EXCEEDED", "AGENT_FAILED", "CANCELLED"):
        assert code in WorkflowErrorCode.__members__, code
        assert code in texts.DESCRIPTION, code


def test_the_engine_section_answers_agent_types_time_limits_prices_and_the_cut() -> None:
    """SPEC §26: the agent types (as Claude Code's Agent tool lists them), the per-child time
    limit (or none), each route's model and price per million tokens from the price data, and
    what happens past the cut."""
    from dsh_workflow import (
        AgentDefinition,
        AgentRegistry,
        EchoProvider,
        EngineConfig,
        OpenAIProvider,
        RoutingProvider,
    )

    agents = AgentRegistry.from_definitions([AgentDefinition(
        name="reviewer", description="Reviews code for bugs.", tools=("Read", "Grep"))])
    routes = RoutingProvider({
        "cheap": OpenAIProvider(model="gpt-4o-mini", base_url="http://127.0.0.1:9", api_key="k"),
        "offline": EchoProvider()}, default="cheap")
    section = texts.engine_section(EngineConfig(), routes, None, 50_000, agents=agents)
    assert "the result text is cut at 50000 characters (the cut says how to read the rest)" \
        in section
    assert "no time limit per agent" in section
    lines = section.splitlines()
    cheap = next(line for line in lines if line.startswith("- cheap: "))
    assert cheap.endswith("; gpt-4o-mini: $0.15/$0.6 per million input/output tokens")
    assert "re-asked once" in cheap  # whether the route repairs an invalid answer
    assert "$" not in next(line for line in lines if line.startswith("- offline: "))
    start = lines.index("Agent types for opts.agentType and the tools they have access to:")
    assert lines[start + 1:start + 3] == [
        "- general-purpose: General-purpose agent for researching complex questions and "
        "executing multi-step tasks (built in; no system prompt of its own). (Tools: *)",
        "- reviewer: Reviews code for bugs. (Tools: Read, Grep)"]
    timed = texts.engine_section(EngineConfig(agent_timeout_s=90), EchoProvider(), None)
    assert "an agent that takes over 90 s gives null" in timed and "no time limit" not in timed


def test_a_routes_price_is_the_one_the_engine_prices_it_at() -> None:
    from dsh_workflow import EngineConfig, OpenAIProvider, RoutingProvider

    routes = RoutingProvider({
        "own": OpenAIProvider(model="my-model", base_url="http://127.0.0.1:9", api_key="k"),
        "cheap": OpenAIProvider(model="gpt-4o-mini", base_url="http://127.0.0.1:9",
                                api_key="k")}, default="own")
    unknown = texts.engine_section(EngineConfig(), routes, None)
    assert "my-model:" not in unknown  # the price data does not know it
    priced = texts.engine_section(
        EngineConfig(model_prices={"my-model": (0.5, 1.5), "gpt-4o-mini": (1.0, 2.0)}),
        routes, None)
    lines = priced.splitlines()
    assert next(line for line in lines if line.startswith("- own: ")).endswith(
        "; my-model: $0.5/$1.5 per million input/output tokens")
    assert next(line for line in lines if line.startswith("- cheap: ")).endswith(
        "; gpt-4o-mini: $1/$2 per million input/output tokens")  # model_prices win


def test_the_tool_lists_its_engines_agent_types() -> None:
    from dsh_workflow import AgentRegistry, EchoProvider, QuickJSEngine

    tool = WorkflowTool(QuickJSEngine(provider=EchoProvider(), agents=AgentRegistry()))
    assert "- general-purpose: General-purpose agent" in tool.description


def test_the_engine_section_names_both_budgets_and_the_description_the_dollar_hooks() -> None:
    from dsh_workflow import EchoProvider, EngineConfig
    from dsh_workflow._tool import texts

    section = texts.engine_section(EngineConfig(budget_tokens=500, budget_usd=2.5),
                                   EchoProvider(), None)
    assert "a budget of 500 tokens per run" in section
    assert "a budget of $2.5 per run" in section
    assert "$" not in texts.engine_section(EngineConfig(), EchoProvider(), None)
    assert "budget.totalUsd" in texts.DESCRIPTION and "budget.spentUsd()" in texts.DESCRIPTION
