"""``dsh-workflow worker``: a process that runs children for :class:`TemporalProvider`
(docs/temporal.md).

Contract:

- ``worker --temporal HOST:PORT --task-queue Q [--provider echo|openai|command ...]`` connects
  to the Temporal service (namespace ``--namespace``, default ``default``) and runs the child
  activity on queue ``Q`` with the local provider, built exactly as ``run`` builds it (same
  options, same checks). At most ``--max-concurrent N`` children run at once.
- Progress on stderr, one line each: ready (queue, provider, concurrency), every child started
  and finished (label, run, sequence number, attempt, outcome, duration, how many still run),
  shutting down, stopped. stdout stays empty.
- SIGTERM or SIGINT: stop taking new children; children already running get
  ``--shutdown-grace`` seconds to finish; those still running then are cancelled (a command
  child is killed) and handed back to the server, which retries them on another worker. The
  process then exits ``0``. The signals are handled from before the connection to Temporal is
  made: one that arrives while connecting stops the worker (exit ``0``) before it takes work.
- Once stopped, the process ends with ``os._exit`` after flushing its output, without
  finalizing the interpreter: the Temporal SDK's core keeps Rust threads that call back into
  Python (to resolve its calls' futures) and cannot be stopped from Python, and one that does
  so while the interpreter finalizes makes CPython abort the process (SIGABRT, exit -6) — a
  worker that aborts on SIGTERM strands its children. Everything of the worker's own is closed
  by then (children finished or handed back, provider closed).
- A service that cannot be reached within ``--connect-timeout`` seconds, or a worker that stops
  for any other reason than a signal: one ``Error: ...`` line on stderr, exit ``1``. Usage
  errors (including the Temporal extra not being installed): exit ``2``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import time
from datetime import timedelta
from typing import Any, NoReturn

from .commands import Subcommands
from .errors import CliError
from .options import count, positive_seconds, provider_factory, seconds

__all__ = ["command_worker", "register"]

EXIT_OK = 0
EXIT_ERROR = 1


def register(commands: Subcommands) -> None:
    """Register the ``worker`` subcommand (its handler: :func:`command_worker`); it reads
    numbers with ``run``'s argument types."""
    worker = commands.add_parser(
        "worker", help="run children for a TemporalProvider on a Temporal task queue",
        description="Run agent() children dispatched through Temporal with a local provider. "
                    "SIGTERM finishes (or hands back) running children and exits 0.")
    worker.add_argument("--temporal", required=True, metavar="HOST:PORT",
                        help="address of the Temporal frontend, e.g. 127.0.0.1:7233")
    worker.add_argument("--namespace", default="default", help="Temporal namespace (default: "
                        "default)")
    worker.add_argument("--task-queue", required=True, metavar="QUEUE",
                        help="the task queue the TemporalProvider dispatches to")
    worker.add_argument("--provider", choices=("echo", "openai", "command"), default="echo",
                        help="who answers the children (default: echo, offline)")
    worker.add_argument("--model", help="model name (openai)")
    worker.add_argument("--base-url", metavar="URL", help="OpenAI-compatible base URL (openai)")
    worker.add_argument("--command", dest="command_line", metavar="ARGV",
                        help="command run per child, prompt on stdin (command)")
    worker.add_argument("--echo-latency", type=seconds, metavar="SECONDS",
                        help="simulated latency of each echo child (echo)")
    worker.add_argument("--max-concurrent", type=count, default=16, metavar="N",
                        help="children this worker runs at once (default 16)")
    worker.add_argument("--shutdown-grace", type=seconds, default=10.0, metavar="SECONDS",
                        help="on SIGTERM, how long running children may finish before they are "
                             "handed back (default 10)")
    worker.add_argument("--connect-timeout", type=positive_seconds, default=10.0,
                        metavar="SECONDS", help="give up reaching Temporal after this long "
                        "(default 10)")
    worker.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    worker.set_defaults(handler=command_worker)


class _WorkerLog:
    """The worker's timestamped status lines on stderr (none with ``--quiet``)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.monotonic()

    def __call__(self, line: str) -> None:
        if self.quiet:
            return
        sys.stderr.write(f"[worker {time.monotonic() - self.started:8.2f}s] {line}\n")
        sys.stderr.flush()


def command_worker(ns: argparse.Namespace) -> int:
    """Run the worker until a signal or a failure; return the exit code."""
    import asyncio  # here, not at the top: `dsh-workflow --help` must not load it

    from dsh_workflow import EngineConfig

    try:
        from temporalio.client import Client  # noqa: F401 - fail early without the SDK
    except ImportError:
        raise CliError("the worker needs the Temporal SDK: pip install "
                       "'dsh-workflow[temporal]'") from None
    if not ns.task_queue.strip():
        raise CliError("--task-queue must not be empty")
    make_provider = provider_factory(ns, EngineConfig(max_concurrent_agents=ns.max_concurrent))
    assert make_provider is not None  # the worker offers only the base providers
    progress = _WorkerLog(ns.quiet)
    # every child's outcome is on a progress line already; the SDK would add a traceback
    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    try:
        code = asyncio.run(_serve(ns, make_provider, progress))
    except _WorkerFailed as exc:
        sys.stderr.write(f"Error: {exc}\n")
        code = EXIT_ERROR
    _exit_now(code)


def _exit_now(code: int) -> NoReturn:
    """End the process with ``code`` without finalizing the interpreter (see the module
    docstring): the SDK's Rust threads may still call into Python, which aborts a finalizing
    interpreter."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


class _WorkerFailed(Exception):
    pass


async def _connect(ns: argparse.Namespace) -> Any:
    import asyncio

    from temporalio.client import Client

    try:
        return await asyncio.wait_for(Client.connect(ns.temporal, namespace=ns.namespace),
                                      ns.connect_timeout)
    except TimeoutError:
        raise _WorkerFailed(f"cannot reach Temporal at {ns.temporal}: no answer within "
                            f"{ns.connect_timeout:g}s") from None
    except Exception as exc:  # noqa: BLE001 - the SDK raises plain RuntimeError on failing connects
        raise _WorkerFailed(f"cannot reach Temporal at {ns.temporal}: {exc}") from None


async def _serve(ns: argparse.Namespace, make_provider: Any, progress: _WorkerLog) -> int:
    import asyncio

    from temporalio.worker import Worker

    from dsh_workflow.integrations.temporal import ChildActivity, TraceContext

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        connecting = asyncio.create_task(_connect(ns))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not connecting.done():
            connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError, _WorkerFailed):
                await connecting
            progress("stopped before taking any work")
            return EXIT_OK
        client = connecting.result()
        async with contextlib.AsyncExitStack() as stack:
            provider = make_provider()
            if isinstance(provider, contextlib.AbstractAsyncContextManager):
                provider = await stack.enter_async_context(provider)
            child = ChildActivity(provider, report=progress)
            worker = Worker(client, task_queue=ns.task_queue, activities=[child.activity],
                            interceptors=[TraceContext()],  # the child's trace context
                            max_concurrent_activities=ns.max_concurrent,
                            graceful_shutdown_timeout=timedelta(seconds=ns.shutdown_grace),
                            # heartbeats reach the server at least every second, so a
                            # cancellation requested by the run arrives within about a second
                            max_heartbeat_throttle_interval=timedelta(seconds=1),
                            default_heartbeat_throttle_interval=timedelta(seconds=1))
            running = asyncio.create_task(worker.run())
            progress(f"ready: queue {ns.task_queue!r} on {ns.temporal} (namespace "
                     f"{ns.namespace!r}), provider {ns.provider}, up to {ns.max_concurrent} "
                     "at once")
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if running.done():
                error = running.exception()
                raise _WorkerFailed(f"the worker stopped: {error or 'for no reason given'}")
            progress(f"shutting down: {len(child.running)} running, up to "
                     f"{ns.shutdown_grace:g}s to finish before they are handed back")
            await worker.shutdown()
            with contextlib.suppress(asyncio.CancelledError):
                await running
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    progress("stopped")
    return EXIT_OK
