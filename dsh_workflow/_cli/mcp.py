"""``dsh-workflow mcp``: serve the ``workflow`` tool over MCP (docs/mcp.md).

Contract:

- Serves on stdio by default; ``--http PORT`` serves streamable HTTP at
  ``http://127.0.0.1:PORT/mcp`` instead (a line on stderr names the URL and the token once it
  listens).
- Over HTTP every request must carry ``Authorization: Bearer <token>``; any other gets 401 and
  runs nothing (:func:`dsh_workflow.integrations.mcp.require_bearer`). The token is
  ``--token``, else ``$DSH_WORKFLOW_TOKEN``, else a random one made at this start
  (:mod:`.server_token`). ``--token`` without ``--http`` is an option error (stdio has no
  other clients than the one that started the server).
- Accepts every engine, limit, provider and agent-definition option of ``run`` (one shared
  definition, :mod:`.options`), plus ``--provider sampling``: ``agent()`` calls are answered by
  the MCP client's own model (``sampling/createMessage``), capped at ``--sampling-max-tokens``
  output tokens per reply.
- Option errors are reported before serving (``Error: <message>``, exit 2); so is a port that
  cannot be listened on (nothing about the token is printed then). The server runs
  until its client closes stdin (stdio; it exits 0 then) or until a signal (HTTP).
- Signals end what the server started: on SIGTERM or SIGHUP (stdio), and on SIGINT, SIGTERM
  or SIGHUP (HTTP), every call in flight is cancelled first — its run cancelled, its command
  children killed and its worktrees removed (:class:`~dsh_workflow.integrations.mcp.OpenCalls`)
  — and only then does the process end, as the signal does (SIGINT: exit 130, as every
  interrupted command).
- Needs the ``mcp`` extra (``pip install 'dsh-workflow[mcp]'``); without it the command says
  so and exits 2.
- Runs are recorded only with ``--store PATH`` (a server is long-lived and shared, so recording
  is opted into); the tool then describes and accepts what a durable engine offers.
- Saved workflows: the library the options name (``--workflows``, :mod:`.library`) is the
  server's ``saved_workflows`` source; each of its workflows is offered as an MCP prompt.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .announce import announcing_server
from .commands import Subcommands
from .errors import CliError
from .options import EngineSetup, add_engine_options, count, engine_setup, port_type
from .saved import add_library_option
from .server_token import ServerToken, add_token_option, server_token
from .stores import add_store_option, ensure_folder, store_path

if TYPE_CHECKING:  # loaded where used: declaring the options must stay cheap (start-up time)
    from dsh_workflow import RunStore
    from dsh_workflow.integrations.mcp import OpenCalls

__all__ = ["command_mcp", "register"]

SAMPLING = "sampling"
MISSING_EXTRA = ("dsh-workflow mcp needs the MCP SDK: pip install 'dsh-workflow[mcp]' "
                 "(missing: {name})")


#: How long a stopping server waits for its calls to end (each waits for its command children
#: to exit, SIGKILLed after their kill grace) before it ends anyway.
STOP_GRACE_S = 30.0
_SIGHUP: tuple[signal.Signals, ...] = (signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()

_port = port_type(1)  # a client must know where to connect: no system-picked port


def register(commands: Subcommands) -> None:
    """Register ``mcp`` on the ``dsh-workflow`` subcommand parsers."""
    mcp = commands.add_parser(
        "mcp", help="serve the workflow tool over MCP (stdio, or --http PORT)",
        description="Serve the workflow tool to an MCP client: on stdio by default, or as "
                    "streamable HTTP on 127.0.0.1 with --http PORT. --provider sampling answers "
                    "agent() calls with the client's own model (no API key needed).")
    add_engine_options(mcp, providers=("echo", "openai", "command", SAMPLING))
    add_library_option(mcp)
    add_store_option(mcp, help="record every run in this run store file (SQLite), so runs can "
                               "be listed, shown and resumed (off by default)")
    mcp.add_argument("--http", type=_port, metavar="PORT",
                     help="serve streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio")
    add_token_option(mcp, used_as="with --http, as 'Authorization: Bearer TOKEN'")
    mcp.add_argument("--sampling-max-tokens", type=count, metavar="TOKENS",
                     help="output tokens asked for per sampled reply (sampling; default 4096)")
    mcp.set_defaults(handler=command_mcp)


def command_mcp(ns: argparse.Namespace) -> int:
    """Check the options, then serve until the client goes away; returns the exit code."""
    if ns.sampling_max_tokens is not None and ns.provider != SAMPLING:
        raise CliError("--sampling-max-tokens applies only to --provider sampling")
    if ns.token is not None and ns.http is None:
        raise CliError("--token applies only to --http (a stdio server has one client: the "
                       "process that started it)")
    token = server_token(ns.token) if ns.http is not None else None
    setup = engine_setup(ns)
    try:
        import anyio

        from dsh_workflow.integrations.mcp import create_server  # noqa: F401 - fail early
    except ImportError as exc:
        raise CliError(MISSING_EXTRA.format(name=exc.name)) from None
    listener = _listen(ns.http) if ns.http is not None else None
    try:
        stopped_by = anyio.run(_serve, ns, setup, token, listener, backend="asyncio")
    finally:
        if listener is not None:
            listener.close()
    if stopped_by == signal.SIGINT:  # every call has been ended: Ctrl-C is an interruption
        raise KeyboardInterrupt
    if stopped_by is not None:  # every call has been ended: now end as the signal does
        _end_as_signalled(stopped_by)
    return 0


def _end_as_signalled(signum: int) -> None:
    """End the process as ``signum`` would have (its default action), output flushed."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _listen(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port`` (connections wait in its backlog until the
    server serves them); a port that cannot be had is a start error."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
    except OSError as exc:
        listener.close()
        raise CliError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    return listener


async def _serve(ns: argparse.Namespace, setup: EngineSetup, token: ServerToken | None,
                 listener: socket.socket | None) -> int | None:
    """Open what the server shares across calls, then serve on the chosen transport; returns
    the signal that stopped it (None: its client went away)."""
    from dsh_workflow import RunStoreError, SQLiteRunStore
    from dsh_workflow.integrations.mcp import OpenCalls

    async with contextlib.AsyncExitStack() as stack:
        store: RunStore | None = None
        path = store_path(ns, opt_in=True)
        if path is not None:
            ensure_folder(path)  # the store holds scripts, arguments and every answer
            try:
                store = await stack.enter_async_context(SQLiteRunStore(path))
            except RunStoreError as exc:
                raise CliError(f"cannot open the run store {path!r}: {exc}") from None
        calls = OpenCalls()
        server = _build_server(ns, setup, store, calls)
        handshake_only = ns.provider == SAMPLING
        if listener is not None:
            assert token is not None  # made with --http
            return await _serve_http(server, listener, token, handshake_only, calls)
        # The SDK reads stdin in a worker thread that only the client's end of input ends, so
        # serving cannot be left while the client is there: once every call has ended, the
        # process ends as the signal does (the run store, SQLite, is safe without a close).
        return await _until_signal(lambda: _serve_stdio(server, handshake_only), calls,
                                   (signal.SIGTERM, *_SIGHUP), stop=_end_as_signalled)
    raise AssertionError("unreachable")  # pragma: no cover


async def _until_signal(serve: Callable[[], Awaitable[None]], calls: OpenCalls,
                        signals: tuple[signal.Signals, ...],
                        stop: Callable[[int], None] | None) -> int | None:
    """Run ``serve()`` until it returns or one of ``signals`` arrives. On a signal: every call
    in flight is ended (``calls``: runs cancelled, children killed, worktrees removed), then
    ``stop(signum)`` asks the server to finish (None: serving is cancelled); returns the
    signal."""
    import anyio

    received: int | None = None
    async with anyio.create_task_group() as tg:
        async def watch() -> None:
            nonlocal received
            with anyio.open_signal_receiver(*signals) as receiver:
                async for signum in receiver:
                    received = signum
                    calls.stop()
                    with anyio.move_on_after(STOP_GRACE_S):
                        await calls.wait_closed()
                    if stop is not None:
                        stop(signum)
                    else:
                        tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch)
        await serve()
        tg.cancel_scope.cancel()
    return received


def _build_server(ns: argparse.Namespace, setup: EngineSetup, store: RunStore | None,
                  calls: OpenCalls) -> Any:
    from dsh_workflow.integrations.mcp import (
        CallContext,
        SamplingProvider,
        create_server,
    )
    from dsh_workflow.integrations.mcp.sampling import DEFAULT_MAX_TOKENS

    if ns.provider == SAMPLING:
        max_tokens = ns.sampling_max_tokens or DEFAULT_MAX_TOKENS

        def provider(call: CallContext) -> Any:
            return SamplingProvider(call.session, related_request_id=call.request_id,
                                    max_tokens=max_tokens)
        described: object = SamplingProvider  # its description is a class attribute
    else:
        def provider(call: CallContext) -> Any:
            return setup.provider()
        described = setup.provider()  # listed only: never entered, so it holds nothing open
    return create_server(lambda child_provider: setup.make_engine(child_provider, store), provider,
                         saved_workflows=setup.library, config=setup.config,
                         library=setup.library, durable=store is not None,
                         described_provider=described, calls=calls, agents=setup.agents)


async def _serve_stdio(server: Any, handshake_only: bool) -> None:
    """Serve one client on stdin/stdout until it closes stdin.

    With sampling, only the handshake era of the protocol is served (a client that probes
    with ``server/discover`` falls back to ``initialize``): sampling needs requests from the
    server to the client during a call, which the per-request era does not allow.
    """
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        if not handshake_only:
            await server.run(read_stream, write_stream, server.create_initialization_options())
            return
        async with server.lifespan(server) as state:
            await serve_loop(server, read_stream, write_stream, lifespan_state=state,
                             init_options=server.create_initialization_options())


async def _serve_http(server: Any, listener: socket.socket, token: ServerToken,
                      handshake_only: bool, calls: OpenCalls) -> int | None:
    """Serve streamable HTTP on 127.0.0.1 until SIGINT/SIGTERM/SIGHUP, to clients bearing
    ``token`` only (handshake era only with sampling, see :func:`_serve_stdio`). uvicorn
    handles SIGINT and SIGTERM while it serves, SIGHUP is this function's; either way every call
    in flight is ended before the server stops, and the signal is returned (None: none came)."""
    import uvicorn

    from dsh_workflow.integrations.mcp import require_bearer
    from dsh_workflow.integrations.mcp.server import handshake_only_http

    app = server.streamable_http_app(host="127.0.0.1")
    if handshake_only:
        app = handshake_only_http(app)
    app = require_bearer(app, token.value)  # outermost: nothing runs before the check
    port = listener.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            lifespan="on")
    http = announcing_server(
        config, f"dsh-workflow mcp: serving streamable HTTP at http://127.0.0.1:{port}/mcp\n"
                f"dsh-workflow mcp: clients must send the header "
                f"'Authorization: Bearer {token.value}'\n")
    import asyncio

    uvicorn_exit = http.handle_exit
    loop = asyncio.get_running_loop()
    stopped_by: list[int] = []

    def handle_exit(sig: int, frame: Any) -> None:
        # uvicorn's own handler waits for open connections, so the calls are ended first.
        stopped_by.append(sig)
        loop.call_soon_threadsafe(calls.stop)
        uvicorn_exit(sig, frame)

    http.handle_exit = handle_exit

    def finish(signum: int) -> None:
        http.should_exit = True

    def outside_uvicorn(sig: int, frame: Any) -> None:
        # Before uvicorn's handlers are in place a signal still stops the server; after they
        # are gone uvicorn raises the signal it handled once more, which lands here and not in
        # asyncio's own SIGINT handler (that one cancels the main task, a race with its end
        # that could swallow the interrupt and exit 0).
        stopped_by.append(sig)
        http.should_exit = True

    previous = {sig: signal.signal(sig, outside_uvicorn)
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        hangup = await _until_signal(lambda: http.serve(sockets=[listener]), calls, _SIGHUP,
                                     stop=finish)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return stopped_by[0] if stopped_by else hangup
