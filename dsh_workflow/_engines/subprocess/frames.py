"""The frames on the pipe between the engine and one sandbox process (protocol version 1).

Both directions carry *frames* over the child's stdin (parent → child) and stdout (child →
parent)::

    frame   = length:u32 big-endian | kind:1 ASCII byte | payload
    length  = number of bytes after the length field (kind byte included)
    payload = UTF-8 JSON text ("surrogatepass", so lone surrogates that JavaScript strings can
              carry survive the crossing exactly as they do in-process)

Parent → child (the parent is trusted by the child):

* ``r`` run    ``[body, args_json_text | null, budget_tokens | null, numbers_json_text | null,
  budget_usd | null]`` — run the (already checked) body, once (numbers: replayable clock and
  randomness, for a run with a store; the last three may be left out);
* ``s`` settle — one :data:`~..script.wire.SettleEntry`: ``[id, true, value]`` or
  ``[id, false, code, message]`` (one hook call's answer), or ``["spent", tokens[, dollars]]``
  (the run's spend so far, for the script's ``budget`` global);
* ``x`` stop   ``null`` — stop the script at the next opportunity and exit.

Child → parent (untrusted: everything is validated here, see :func:`parse_child_frame`):

* ``R`` ready  ``[version, cpu_seconds, [protection, ...]]`` — always the first frame;
* ``O`` outbox the runtime's JSON text of one batch of hook messages, passed on unparsed (the
  host parses it once and treats malformed text as a protocol violation);
* ``I`` idle   ``[settles_received, cpu_seconds]`` — the script finished a stretch and waits;
* ``E`` end    ``null`` (stopped) or a :data:`~..script.wire.ScriptOutcome` — always the last
  frame: ``{"ok": true, "value"[, "warnings"]}`` or ``{"ok": false, "code", "error"}``, the
  latter with ``"thrown": true`` and an optional ``"stack"`` string when the script threw it.

A frame longer than the receiver's limit, an unknown kind, undecodable text or a payload of the
wrong shape is a :class:`ProtocolError`; the engine then kills the process and ends the run as
``error``. This module is pure (no I/O, no async), so both sides import it.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from ..script.wire import (
    COMPLETED_KEYS,
    COMPLETED_REQUIRED_KEYS,
    FAILED_KEYS,
    FAILED_REQUIRED_KEYS,
    ScriptOutcome,
)

__all__ = [
    "CHILD_KINDS",
    "END",
    "HEADER",
    "IDLE",
    "OUTBOX",
    "PARENT_KINDS",
    "READY",
    "RUN",
    "SETTLE",
    "STOP",
    "VERSION",
    "ProtocolError",
    "decode_payload",
    "encode",
    "encode_text",
    "frame_length",
    "max_child_frame_bytes",
    "parse_child_frame",
]

#: Protocol version; the child announces it in its ready frame and refuses any other.
VERSION = 1

HEADER = struct.Struct(">I")

RUN, SETTLE, STOP = b"r", b"s", b"x"
READY, OUTBOX, IDLE, END = b"R", b"O", b"I", b"E"
PARENT_KINDS = frozenset((RUN, SETTLE, STOP))
CHILD_KINDS = frozenset((READY, OUTBOX, IDLE, END))

_MIB = 1024 * 1024


class ProtocolError(Exception):
    """A frame that breaks this protocol; the message says how (for the run's error text)."""


def max_child_frame_bytes(memory_limit_bytes: int) -> int:
    """The longest frame the parent accepts from a child running under ``memory_limit_bytes``.

    Every child frame carries text that first existed inside the JavaScript heap (an outbox
    batch, the JSON of the return value) or is small; UTF-8 needs at most twice a string's heap
    bytes, so twice the heap limit plus 1 MiB bounds every honest frame.
    """
    return 2 * memory_limit_bytes + _MIB


def encode_text(kind: bytes, text: str) -> list[bytes]:
    """The frame for ``kind`` with ``text`` (already JSON) as payload, as header and body
    parts (written one after the other, so a large payload is never copied once more)."""
    payload = text.encode("utf-8", "surrogatepass")
    return [HEADER.pack(len(payload) + 1) + kind, payload]


def encode(kind: bytes, value: Any) -> bytes:
    """The whole frame for ``kind`` carrying ``value`` (JSON data) as payload."""
    return b"".join(encode_text(kind, json.dumps(value, ensure_ascii=False, allow_nan=False)))


def frame_length(header: bytes, limit: int) -> int:
    """The length announced by a 4-byte ``header``; raises ProtocolError beyond ``limit``."""
    length = int(HEADER.unpack(header)[0])
    if length < 1:
        raise ProtocolError("an empty frame")
    if length > limit:
        raise ProtocolError(f"a frame of {length} bytes (the limit is {limit})")
    return length


def decode_payload(body: bytes) -> tuple[bytes, str]:
    """Split a frame body into its kind byte and payload text; raises ProtocolError."""
    try:
        return body[:1], body[1:].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise ProtocolError("a frame that is not UTF-8 text") from None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _outcome(value: object) -> ScriptOutcome | None:
    if value is None:
        return None
    if (isinstance(value, dict) and value.get("ok") is True
            and COMPLETED_REQUIRED_KEYS <= set(value) <= COMPLETED_KEYS
            and (isinstance(value.get("warnings", []), list)
                 and all(isinstance(w, str) for w in value.get("warnings", [])))):
        return value  # type: ignore[return-value]  # shape checked above
    if (isinstance(value, dict) and value.get("ok") is False
            and FAILED_REQUIRED_KEYS <= set(value) <= FAILED_KEYS
            and (value["code"] is None or isinstance(value["code"], str))
            and isinstance(value.get("error"), str)
            and value.get("thrown", True) is True
            and isinstance(value.get("stack", ""), str)):
        return value  # type: ignore[return-value]  # shape checked above
    raise ProtocolError("an end frame whose outcome has the wrong shape")


def parse_child_frame(kind: bytes, text: str) -> Any:
    """Validate one child frame; returns what the parent needs of it.

    ``OUTBOX`` → the text itself; ``READY`` → ``(version, cpu, protections)``; ``IDLE`` →
    ``(settles_received, cpu)``; ``END`` → the outcome dict or None. A ready frame with another
    protocol version is an error too.
    """
    if kind == OUTBOX:
        return text
    if kind not in CHILD_KINDS:
        raise ProtocolError(f"an unknown frame kind {kind!r}")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise ProtocolError(f"a {kind.decode()} frame that is not JSON") from None
    if kind == END:
        return _outcome(value)
    if kind == IDLE:
        if (isinstance(value, list) and len(value) == 2 and type(value[0]) is int
                and value[0] >= 0 and _is_number(value[1])):
            return value[0], float(value[1])
        raise ProtocolError("an idle frame with the wrong shape")
    if (isinstance(value, list) and len(value) == 3 and type(value[0]) is int
            and _is_number(value[1]) and isinstance(value[2], list)
            and all(isinstance(item, str) for item in value[2])):
        if value[0] != VERSION:
            raise ProtocolError(f"protocol version {value[0]} (this engine speaks {VERSION})")
        return value[0], float(value[1]), tuple(value[2])
    raise ProtocolError("a ready frame with the wrong shape")
