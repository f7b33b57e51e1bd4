"""The ``workflow`` tool as an MCP server, on the official ``mcp`` SDK's low-level server.

Contract of :func:`create_server`:

- **One tool.** ``tools/list`` offers one tool whose name, description and input schema are
  the tool layer's texts (:func:`~dsh_workflow._tool.texts.tool_description`,
  :func:`~dsh_workflow._tool.texts.tool_input_schema`) for the engine ``make_engine`` builds —
  its ``config``, ``library``, ``agents`` and, with ``durable``, a run store: pass what
  ``make_engine`` uses (the defaults match ``QuickJSEngine(provider=...)``). No engine is built for the
  listing. The children are described by ``described_provider`` (anything with the providers'
  ``description``, and ``routes`` for a routing one; the real provider is made per call, so
  pass one like it), by default the offline :class:`~dsh_workflow.EchoProvider`.
  ``tools/call`` runs it through
  :meth:`WorkflowTool.execute` and returns its ``text`` as one text block, ``isError`` as the
  tool decided, and the tool's ``data`` as ``structuredContent``. An unknown tool name is an
  error result naming the tools that exist.
- **Whole results.** Beside it, ``<name>_result`` (:meth:`WorkflowTool.read_result`) reads a
  part of a run's return value after the tool's text was cut: from the run store when
  ``durable``, else from the server's last results (:class:`~dsh_workflow._tool.results.
  RecentResults`, shared by every call of the server, bounded).
- **Questions** (``ask()``, ``checkpoint()``; docs/mcp.md, "Questions"). Each call's engine
  parks a run that waits on nothing but questions nobody answers; when the client declared
  the elicitation capability, its user is asked first, one ``elicitation/create`` per question
  (:mod:`.elicitation`; an engine factory that set its own ``answers`` keeps them). A parked
  run's text names the run id and each question's ``qid``; with ``durable``, the
  ``<name>_answer`` tool (:meth:`WorkflowTool.answer`, recorded ``by="mcp"``) answers them and,
  once all are answered, continues the parked run in that call's engine, returning its text.
- **One engine per call.** Each call gets its own provider (``provider(call)``, entered when it
  is an async context manager) and its own engine (``make_engine(provider)``), both closed
  when the call ends — so a call's events are its own, and nothing of a call outlives it.
  Limits such as ``max_concurrent_agents`` therefore hold per call.
- **Progress.** When the request carries a progress token, the run's phase and agent counts
  are sent as ``notifications/progress`` (see :mod:`.notifications`); the final state is always sent
  before the result.
- **Cancellation.** A ``notifications/cancelled`` for the call cancels the handler (the SDK does
  that); :meth:`WorkflowTool.execute` then cancels and disposes the run, and leaving the
  engine's block ends everything the run started before the handler returns.
- **Stopping.** With ``calls`` (an :class:`OpenCalls`), every call in flight is registered
  there; :meth:`OpenCalls.stop` cancels them all (each run cancelled, its children killed and
  worktrees removed as the engine's block is left; the call answers an error result saying the
  server is stopping, and calls that arrive after it are refused the same way), and
  :meth:`OpenCalls.wait_closed` returns once none is left — a server process does both before
  it exits on a signal.
- **Saved workflows.** With ``saved_workflows`` (anything with ``workflows()`` returning the
  library's :class:`~dsh_workflow.SavedWorkflow` values, such as a
  :class:`~dsh_workflow.WorkflowLibrary`), each is offered as an MCP prompt whose message asks
  the model to call the tool with that workflow's meta (as JSON, ``None`` fields left out) and
  body (leading blank space stripped), and the prompt's ``args`` argument, JSON text, as the
  workflow's args.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession

from ..._agents import AgentRegistry
from ..._config import EngineConfig
from ..._library import SavedWorkflow, WorkflowLibrary
from ..._providers.echo import EchoProvider
from ..._run import WorkflowEngine
from ..._subagent import SubagentProvider
from ..._tool import ToolResult, WorkflowTool, texts
from ..._tool.results import RecentResults
from ..._tool.tool import check_tool_settings
from .elicitation import ElicitingAnswers, client_can_elicit
from .notifications import DEFAULT_INTERVAL_S, ProgressNotifier

__all__ = ["STOPPING", "CallContext", "OpenCalls", "SavedWorkflows", "create_server"]

logger = logging.getLogger(__name__)

SERVER_NAME = "dsh-workflow"


@dataclass(frozen=True)
class CallContext:
    """The MCP request a provider is built for: the client's session and the request's id."""

    session: ServerSession
    request_id: types.RequestId | None


class SavedWorkflows(Protocol):
    """Where saved workflows come from: a :class:`~dsh_workflow.WorkflowLibrary` fits."""

    def workflows(self) -> Sequence[SavedWorkflow]: ...


ProviderFactory = Callable[[CallContext], SubagentProvider]
EngineFactory = Callable[[SubagentProvider], WorkflowEngine]


def _progress_token(ctx: ServerRequestContext[Any, Any]) -> object:
    meta = ctx.meta or {}
    return meta.get("progress_token", meta.get("progressToken"))


def _call_result(result: ToolResult) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=result.text)],
                                is_error=result.is_error, structured_content=result.data)


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


STOPPING = "Error: the MCP server is stopping; the workflow run was cancelled"


class OpenCalls:
    """The tool calls a server has in flight, so that a stopping server ends them first.

    Use from the server's event loop only. :meth:`stop` is idempotent and never waits;
    :meth:`wait_closed` returns once every call registered has left its engine's block.
    """

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self._idle = anyio.Event()
        self._idle.set()
        self.stopping = False

    @contextlib.contextmanager
    def track(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one call, cancelled by :meth:`stop` (at once when stopping)."""
        scope = anyio.CancelScope()
        if self.stopping:
            scope.cancel()
        self._scopes.add(scope)
        if self._idle.is_set():
            self._idle = anyio.Event()
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)
            if not self._scopes:
                self._idle.set()

    def stop(self) -> None:
        """Cancel every call in flight, and every call that comes after."""
        self.stopping = True
        for scope in self._scopes:
            scope.cancel()

    async def wait_closed(self) -> None:
        """Return once no call is in flight (every engine block left)."""
        await self._idle.wait()


def create_server(make_engine: EngineFactory, provider: ProviderFactory, *,
                  tool_name: str = "workflow", max_result_chars: int = 50_000,
                  saved_workflows: SavedWorkflows | None = None,
                  progress_interval_s: float = DEFAULT_INTERVAL_S,
                  config: EngineConfig | None = None, library: WorkflowLibrary | None = None,
                  durable: bool = False, described_provider: object = None,
                  calls: OpenCalls | None = None,
                  agents: AgentRegistry | None = None) -> Server[Any]:
    """An MCP server offering the ``workflow`` tool (see the module docstring)."""
    check_tool_settings(tool_name, max_result_chars)
    engine_config = config if config is not None else EngineConfig()
    children = described_provider if described_provider is not None else EchoProvider()
    open_calls = calls if calls is not None else OpenCalls()
    recent = RecentResults()
    result_tool = tool_name + "_result"
    answer_tool = tool_name + "_answer"
    names = (tool_name, result_tool, answer_tool) if durable else (tool_name, result_tool)

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        description = texts.tool_description(engine_config, children, library, max_result_chars,
                                             durable=durable, agents=agents)
        tools = [
            types.Tool(name=tool_name, description=description,
                       input_schema=texts.tool_input_schema(durable=durable)),
            types.Tool(name=result_tool, description=texts.result_description(max_result_chars),
                       input_schema=texts.result_schema(max_result_chars))]
        if durable:
            tools.append(types.Tool(name=answer_tool, description=texts.ANSWER_DESCRIPTION,
                                    input_schema=texts.answer_schema()))
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in names:
            return _error_result(f"Error: unknown tool {params.name!r}; this server offers "
                                 + ", ".join(repr(n) for n in names))
        with open_calls.track():
            return await run_call(ctx, params)
        return _error_result(STOPPING)  # the scope was cancelled: the server is stopping

    async def run_call(ctx: ServerRequestContext[Any, Any],
                       params: types.CallToolRequestParams) -> types.CallToolResult:
        call = CallContext(session=ctx.session, request_id=ctx.request_id)
        token = _progress_token(ctx)
        async with contextlib.AsyncExitStack() as stack:
            child_provider = provider(call)
            if isinstance(child_provider, contextlib.AbstractAsyncContextManager):
                child_provider = await stack.enter_async_context(child_provider)
            engine = await stack.enter_async_context(make_engine(child_provider))
            tool = WorkflowTool(engine, tool_name=tool_name, max_result_chars=max_result_chars,
                                recent_results=recent)
            if params.name == result_tool:
                return _call_result(await tool.read_result(params.arguments or {}))
            _who_answers(engine, call)
            arguments = params.arguments or {}

            async def work() -> ToolResult:
                if params.name == answer_tool:
                    return await tool.answer(arguments, by="mcp")
                return await tool.execute(arguments)

            if token is None:
                return _call_result(await work())
            notifier = ProgressNotifier(_sender(ctx.session), interval=progress_interval_s)
            engine.events.subscribe(notifier)
            async with anyio.create_task_group() as tg:
                tg.start_soon(notifier.pump)
                result = await work()
                tg.cancel_scope.cancel()
            await notifier.flush()
            return _call_result(result)
        raise AssertionError("unreachable")  # pragma: no cover

    handlers: dict[str, Any] = {}
    if saved_workflows is not None:
        handlers = _prompt_handlers(saved_workflows, tool_name)
    server: Server[Any] = Server(SERVER_NAME, version=_package_version(), on_list_tools=list_tools,
                                 on_call_tool=call_tool, **handlers)
    return server


def _who_answers(engine: WorkflowEngine, call: CallContext) -> None:
    """Set who answers the questions of ``engine``'s runs for this call: the client's user
    (elicitation) when it can be asked and the engine has no answerer of its own; and the run
    parks when nobody answers (engines without these settings are left as they are)."""
    if hasattr(engine, "park"):
        engine.park = True
    if getattr(engine, "answers", False) is None and client_can_elicit(call.session):
        engine.answers = ElicitingAnswers(call.session, related_request_id=call.request_id)  # type: ignore[attr-defined]  # checked just above


def _sender(session: ServerSession) -> Callable[[float, float | None, str], Any]:
    async def send(progress: float, total: float | None, message: str) -> None:
        try:
            await session.report_progress(progress, total, message)
        except Exception:
            logger.debug("could not send a progress notification", exc_info=True)
    return send


def _prompt_handlers(saved: SavedWorkflows, tool_name: str) -> dict[str, Any]:
    argument = types.PromptArgument(name="args", required=False,
                                    description="the workflow's args as a JSON object")

    async def list_prompts(ctx: ServerRequestContext[Any, Any],
                           params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[
            types.Prompt(name=entry.name, description=entry.description, arguments=[argument])
            for entry in saved.workflows()])

    async def get_prompt(ctx: ServerRequestContext[Any, Any],
                         params: types.GetPromptRequestParams) -> types.GetPromptResult:
        entry = next((e for e in saved.workflows() if e.name == params.name), None)
        if entry is None:
            names = ", ".join(e.name for e in saved.workflows()) or "none"
            raise ValueError(f"no saved workflow named {params.name!r} (available: {names})")
        call: dict[str, Any] = {"meta": entry.meta.model_dump(mode="json", exclude_none=True),
                                "script": entry.body.lstrip()}
        raw_args = (params.arguments or {}).get("args")
        if raw_args:
            call["args"] = json.loads(raw_args)
        text = (f"Run the saved workflow {entry.name!r} ({entry.description}) by calling the "
                f"`{tool_name}` tool with exactly these arguments:\n\n"
                + json.dumps(call, indent=2, ensure_ascii=False))
        return types.GetPromptResult(description=entry.description, messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))])

    return {"on_list_prompts": list_prompts, "on_get_prompt": get_prompt}


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dsh-workflow")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


HANDSHAKE_ONLY_MESSAGE = ("this server answers agent() calls through MCP sampling, which needs "
                          "requests from the server during a call: connect with the initialize "
                          "handshake (protocol {versions})")


def handshake_only_http(app: Any) -> Any:
    """Wrap a streamable-HTTP ASGI ``app`` so it serves only the handshake protocol era.

    A request that declares a per-request-era protocol version (the ``MCP-Protocol-Version``
    header) gets the JSON-RPC error ``-32022`` naming the handshake versions; a client that
    probed with ``server/discover`` then falls back to ``initialize``. Used with sampling,
    which needs requests from the server to the client during a call.
    """
    from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    header = b"mcp-protocol-version"

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            version = next((v.decode("latin-1") for k, v in scope["headers"] if k == header), None)
            if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
                request = Request(scope, receive)
                try:
                    message = json.loads(await request.body())
                    request_id = message.get("id") if isinstance(message, dict) else None
                except ValueError:
                    request_id = None
                supported = list(HANDSHAKE_PROTOCOL_VERSIONS)
                error = {"code": UNSUPPORTED_PROTOCOL_VERSION,
                         "message": HANDSHAKE_ONLY_MESSAGE.format(versions=", ".join(supported)),
                         "data": {"supported": supported, "requested": version}}
                response = JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error},
                                        status_code=400)
                await response(scope, receive, send)
                return
        await app(scope, receive, send)

    return asgi
