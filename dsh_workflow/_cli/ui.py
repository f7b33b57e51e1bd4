"""``dsh-workflow ui``: serve the run viewer of a store on 127.0.0.1 (docs/viewer.md).

Contract:

- ``ui [--store PATH] [--port N] [--token TOKEN]`` serves the viewer of the store file
  (``--store``, else ``$DSH_WORKFLOW_STORE``, else ``.dsh-workflow/runs.sqlite3`` under the
  current directory) on ``127.0.0.1`` only, port ``N`` (default 8765; ``0`` picks a free one),
  to holders of its token (``--token``, else ``$DSH_WORKFLOW_TOKEN``, else a random one made at
  this start: :mod:`.server_token`; the checks: :mod:`dsh_workflow._ui.auth`). It prints
  ``viewer: http://127.0.0.1:PORT/?token=TOKEN`` on stderr once it listens (opening that
  address sets the viewer's cookie), and serves until Ctrl-C or
  SIGTERM (then it closes its connections within 2 s and exits 0). A missing store file, a
  file that is not a run store, a port in use, or the ``ui`` extra not installed is a start
  error (exit 2).
- While it serves, the store's beacon (:mod:`dsh_workflow._ui.beacon`, owner-only, holding the
  token) names it, so ``run`` prints ``viewer: <url of the run>?token=...`` on stderr for a run
  recorded in that store (:func:`.announce.announce_viewer`).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
from urllib.parse import quote

from .announce import announcing_server
from .commands import Subcommands
from .errors import CliError
from .options import port_type
from .server_token import add_token_option, server_token
from .stores import add_store_option, store_path

__all__ = ["DEFAULT_PORT", "command_ui", "register"]

DEFAULT_PORT = 8765
_MISSING_EXTRA = ("the viewer needs the 'ui' extra: pip install 'dsh-workflow[ui]' "
                  "(missing: {name})")


_port = port_type(0)  # 0: the system picks a free port (the viewer prints its address)


def register(commands: Subcommands) -> None:
    """Register the ``ui`` subcommand on the ``dsh-workflow`` parser (its handler:
    :func:`command_ui`)."""
    ui = commands.add_parser("ui", help="serve the run viewer on 127.0.0.1",
                             description="Serve a local web page of the runs in a store: the "
                             "run list, and per run its live tree of agents, timeline, log, "
                             "script, args and result.")
    add_store_option(ui)
    ui.add_argument("--port", type=_port, default=DEFAULT_PORT,
                    help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0 picks a free one)")
    add_token_option(ui, used_as="in the printed address, ?token=TOKEN")
    ui.set_defaults(handler=command_ui)


def command_ui(ns: argparse.Namespace) -> int:
    """Serve until stopped; a start error raises :class:`CliError`."""
    path = store_path(ns)
    assert path is not None  # the viewer has no --no-store
    token = server_token(ns.token)
    if not os.path.isfile(path):
        raise CliError(f"no run store at {path} (run a workflow first, or pass --store)")
    try:
        import uvicorn

        from dsh_workflow._ui.app import create_app
    except ImportError as exc:
        raise CliError(_MISSING_EXTRA.format(name=exc.name)) from None
    from dsh_workflow._ui.beacon import remove_beacon, write_beacon

    _check_store(path)

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", ns.port))
        listener.listen(128)  # from here connections wait in the backlog until uvicorn serves
    except OSError as exc:
        listener.close()
        raise CliError(f"cannot listen on 127.0.0.1:{ns.port}: {exc.strerror or exc}") from None
    port = listener.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    app = create_app(path, token=token.value, port=port)
    address = f"viewer: {url}/?token={quote(token.value, safe='')}  (store {path}; Ctrl-C stops it)"
    server = announcing_server(uvicorn.Config(app, log_level="warning", access_log=False,
                                              lifespan="on", timeout_graceful_shutdown=2),
                               address)
    # uvicorn shuts down gracefully on SIGINT / SIGTERM and then re-raises the signal to the
    # handler it found: these turn it into a clean return, so the beacon is always removed.
    previous = signal.signal(signal.SIGTERM, _stopped)
    write_beacon(path, url, token=token.value)
    try:
        server.run(sockets=[listener])
    except (KeyboardInterrupt, _Stopped):
        pass
    finally:
        remove_beacon(path)
        listener.close()
        signal.signal(signal.SIGTERM, previous)
    return 0


def _check_store(path: str) -> None:
    """Open the store once, so a file that is not a run store is a start error (exit 2)
    rather than a failure of the server's startup."""
    import anyio

    from dsh_workflow import RunStoreError, SQLiteRunStore

    async def open_once() -> None:
        async with SQLiteRunStore(path):
            pass

    try:
        anyio.run(open_once)
    except RunStoreError as exc:
        raise CliError(str(exc)) from None


class _Stopped(Exception):
    """SIGTERM arrived: stop serving."""


def _stopped(signum: int, frame: object) -> None:
    raise _Stopped
