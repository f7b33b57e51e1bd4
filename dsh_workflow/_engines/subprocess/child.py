"""Entry point of a sandbox process: confine itself, then run exactly one script.

Started by :func:`sandbox.command` with the spec in argv (never through the environment, which
is empty). In order, before any script is read:

1. resource limits (``confine.confine_resources``);
2. imports of the runtime (QuickJS binding, ``runtime_js``) — nothing of the library beyond it,
   so no pydantic, no provider, no event loop exists here;
3. identity (``confine.confine_identity``: drop root, no-new-privs, parent-death signal);
4. the :class:`~dsh_workflow._engines.script.thread.ThreadRuntime` is launched (it prepares its
   QuickJS context at once), then ``confine.confine_final`` closes the door on new descriptors,
   processes and threads and installs the seccomp filter, and the ``ready`` frame (listing
   every protection applied) goes out. If any step fails the process exits with status 3
   before reading anything.

Then the main thread reads frames from stdin: one ``run`` (body and args → the runtime thread),
any number of ``settle`` and at most one ``stop``; end of input means the parent is gone and
stops the script too. The runtime thread writes ``outbox`` and ``idle`` frames to stdout as the
script produces them and exactly one ``end`` frame, after which the process exits at once
(``os._exit``: nothing else is left to clean up). The provider never exists here: every
``agent()`` call leaves as an outbox message and comes back as a settle frame.

A malformed frame from the parent stops the script (the parent then sees an end frame without
a result). Nothing here writes to any file; stderr receives only a fatal error's text.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, NoReturn

from ..script.wire import ReportKind
from . import confine, frames

__all__ = ["main"]

_STDIN, _STDOUT = 0, 1
#: The parent is trusted; this bound only keeps a corrupted length from reserving memory.
_MAX_INBOUND = 1 << 31


class _Channel:
    """Frames to the parent, written whole by one thread at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Settle frames received; raised *before* the settlement is queued, so an idle frame
        #: never claims fewer settlements than the runtime has consumed.
        self.received = 0

    def send_text(self, kind: bytes, text: str) -> None:
        parts = frames.encode_text(kind, text)
        with self._lock:
            for part in parts:
                view = memoryview(part)
                while view:
                    view = view[os.write(_STDOUT, view):]

    def send(self, kind: bytes, value: Any) -> None:
        self.send_text(kind, json.dumps(value, ensure_ascii=False, allow_nan=False))

    def idle(self) -> None:
        self.send(frames.IDLE, [self.received, time.process_time()])


def _read_exactly(count: int) -> bytes | None:
    """``count`` bytes from stdin, or None at end of input."""
    chunks = []
    while count:
        chunk = os.read(_STDIN, min(count, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _read_frame() -> tuple[bytes, Any] | None:
    """The next frame from the parent as (kind, value), or None at end of input."""
    header = _read_exactly(frames.HEADER.size)
    if header is None:
        return None
    body = _read_exactly(frames.frame_length(header, _MAX_INBOUND))
    if body is None:
        return None
    kind, text = frames.decode_payload(body)
    if kind not in frames.PARENT_KINDS:
        raise frames.ProtocolError(f"an unknown frame kind {kind!r}")
    return kind, json.loads(text)


def _exit(code: int) -> NoReturn:
    os._exit(code)


def _fail(message: str) -> NoReturn:
    try:
        os.write(2, f"dsh-workflow sandbox: {message}\n".encode("utf-8", "replace"))
    finally:
        _exit(3)


def main(spec: dict[str, Any], parent_pid: int) -> NoReturn:
    """Run the sandbox process described by ``spec`` (see ``sandbox.child_spec``); never returns."""
    try:
        if spec.get("version") != frames.VERSION:
            _fail(f"protocol version {spec.get('version')!r} (this child speaks "
                  f"{frames.VERSION})")
        applied = confine.confine_resources(spec["limits"])

        from ..script import prelude
        from ..script.limits import RuntimeLimits
        from ..script.thread import ThreadRuntime

        prelude.source()  # reads runtime_js now, while files are still readable
        applied += confine.confine_identity(spec["limits"], parent_pid)
        channel = _Channel()
        runtime = ThreadRuntime(RuntimeLimits.from_json(spec["config"]),
                                name="dsh-workflow-sandbox", on_wait=channel.idle)
        runtime.launch()
        applied += confine.confine_final()
        channel.send(frames.READY, [frames.VERSION, time.process_time(), applied])
    except Exception as exc:  # noqa: BLE001 - nothing may run unconfined
        _fail(f"could not confine the process: {type(exc).__name__}: {exc}")
    _serve(channel, runtime)


def _report(channel: _Channel) -> Any:
    def report(kind: str, payload: Any) -> None:
        try:
            if kind == ReportKind.OUTBOX:
                channel.send_text(frames.OUTBOX, payload)
            elif kind == ReportKind.END:
                channel.send(frames.END, payload)
                _exit(0)
        except OSError:  # the parent is gone
            _exit(1)
    return report


def _serve(channel: _Channel, runtime: Any) -> NoReturn:
    started = False
    try:
        while True:
            frame = _read_frame()
            if frame is None or frame[0] == frames.STOP:
                if not started:
                    _exit(0)
                runtime.stop()
                if frame is None:
                    break
                continue
            kind, value = frame
            if kind == frames.RUN and not started:
                # [body, args] from protocol version 1, then the optional budget, numbers and
                # dollar budget.
                body, args_text, *optional = value
                budget_tokens, numbers_text, budget_usd = [*optional, None, None, None][:3]
                runtime.assign(body, args_text, _report(channel), name="dsh-workflow-sandbox",
                               budget_tokens=budget_tokens, budget_usd=budget_usd,
                               numbers=None if numbers_text is None
                               else lambda text=numbers_text: text)
                started = True
                runtime.start()
            elif kind == frames.SETTLE and started:
                channel.received += 1
                runtime.settle(value)
            else:
                raise frames.ProtocolError(f"an unexpected {kind!r} frame")
    except (frames.ProtocolError, ValueError, TypeError) as exc:
        os.write(2, f"dsh-workflow sandbox: bad frame from the engine: {exc}\n".encode())
        if not started:
            _exit(3)
        runtime.stop()
    runtime.join()  # its end report exits the process
    _exit(1)


if __name__ == "__main__":  # pragma: no cover - started through sandbox.command()
    sys.exit("start the sandbox through dsh_workflow._engines.subprocess.sandbox.command()")
