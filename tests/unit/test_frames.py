"""The sandbox pipe's frames (``_engines/subprocess/frames.py``), as pure functions.

A frame is ``length:u32 | kind | UTF-8 JSON``; everything the child sends is untrusted. Checked:
any JSON value (lone surrogates included) crosses unchanged; the announced length is bounded;
every child frame kind is parsed to what the parent needs, and every other shape, kind, text or
length is a ``ProtocolError`` and nothing else.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow._engines.subprocess import frames as protocol
from dsh_workflow._engines.subprocess.frames import (
    END,
    HEADER,
    IDLE,
    OUTBOX,
    READY,
    ProtocolError,
    decode_payload,
    encode,
    encode_text,
    frame_length,
    max_child_frame_bytes,
    parse_child_frame,
)

MIB = 1024 * 1024
#: Text as JavaScript strings can hold it: any code point, lone surrogates included (drawn
#: on their own too: hypothesis rarely picks them among all code points).
_js_text = st.text(st.characters(categories=["Cs"]) | st.characters(exclude_categories=()),
                   max_size=24)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False,
                                                                      allow_infinity=False)
    | _js_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_js_text, inner, max_size=4),
    max_leaves=20)


def _split(frame: bytes, limit: int = 10 * MIB) -> tuple[bytes, str]:
    """Read ``frame`` as the parent does: header, length check, body."""
    length = frame_length(frame[:HEADER.size], limit)
    body = frame[HEADER.size:]
    assert len(body) == length
    return decode_payload(body)


def _rejected(kind: bytes, payload: Any = None, *, text: str | None = None) -> str:
    """The ProtocolError's message for a ``kind`` frame of ``payload`` (or of raw ``text``)."""
    if text is None:
        text = json.dumps(payload)
    with pytest.raises(ProtocolError) as caught:
        parse_child_frame(kind, text)
    return str(caught.value)


# ---- framing ----------------------------------------------------------------------------


def test_the_kinds_are_single_distinct_bytes() -> None:
    kinds = protocol.PARENT_KINDS | protocol.CHILD_KINDS
    assert len(kinds) == 7 and all(len(kind) == 1 for kind in kinds)
    assert not protocol.PARENT_KINDS & protocol.CHILD_KINDS
    assert HEADER.size == 4


def test_a_frame_is_its_length_then_its_kind_then_utf8_json() -> None:
    frame = encode(protocol.SETTLE, [3, True, "é"])
    payload = '[3, true, "é"]'.encode()
    assert frame == (len(payload) + 1).to_bytes(4, "big") + b"s" + payload


@given(st.sampled_from(sorted(protocol.PARENT_KINDS | protocol.CHILD_KINDS)), _json)
def test_any_json_value_crosses_unchanged(kind: bytes, value: Any) -> None:
    got_kind, text = _split(encode(kind, value))
    assert got_kind == kind
    assert json.loads(text) == value


@given(_js_text)
def test_lone_surrogates_cross_exactly(text: str) -> None:
    _, decoded = _split(encode(OUTBOX, text))
    assert json.loads(decoded) == text
    header, payload = encode_text(OUTBOX, text)
    assert payload.decode("utf-8", "surrogatepass") == text
    assert frame_length(header[:HEADER.size], 10 * MIB) == len(payload) + 1


def test_a_lone_surrogate_is_three_bytes_not_an_escape() -> None:
    _, payload = encode_text(OUTBOX, '"\ud800"')
    assert payload == b'"\xed\xa0\x80"'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1j}, object()])
def test_what_is_not_json_data_cannot_be_encoded(value: object) -> None:
    # ProcessRuntime.settle relies on these errors to send a refusal instead.
    with pytest.raises((ValueError, TypeError)):
        encode(protocol.SETTLE, [1, True, value])


def test_the_stop_and_run_frames_carry_their_documented_payloads() -> None:
    assert _split(encode(protocol.STOP, None)) == (b"x", "null")
    kind, text = _split(encode(protocol.RUN, ["return 1", None, None, None]))
    assert kind == b"r" and json.loads(text) == ["return 1", None, None, None]


@pytest.mark.parametrize(("length", "limit"), [(1, 1), (5, 5), (5, 6), (2**32 - 1, 2**32 - 1)])
def test_a_length_up_to_the_limit_is_accepted(length: int, limit: int) -> None:
    assert frame_length(HEADER.pack(length), limit) == length


def test_an_empty_frame_is_refused() -> None:
    with pytest.raises(ProtocolError, match=r"^an empty frame$"):
        frame_length(HEADER.pack(0), 100)


def test_a_frame_over_the_limit_is_refused_with_both_numbers() -> None:
    with pytest.raises(ProtocolError, match=r"^a frame of 101 bytes \(the limit is 100\)$"):
        frame_length(HEADER.pack(101), 100)
    with pytest.raises(ProtocolError):
        frame_length(b"\xff\xff\xff\xff", 2**31)


def test_a_body_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(ProtocolError, match="not UTF-8"):
        decode_payload(b"O\xff\xfe")
    with pytest.raises(ProtocolError):
        decode_payload(b"O\xc3")  # cut in the middle of a character


def test_the_kind_byte_is_split_off_even_when_unknown() -> None:
    assert decode_payload(b"Zabc") == (b"Z", "abc")
    assert decode_payload(b"E") == (b"E", "")


# ---- the longest child frame ------------------------------------------------------------


def test_the_child_frame_limit_is_twice_the_heap_plus_one_mib() -> None:
    assert max_child_frame_bytes(64 * MIB) == 129 * MIB
    assert max_child_frame_bytes(MIB) == 3 * MIB


@pytest.mark.parametrize("char", ["\xff", "\u20ac", "\ud800", "\U0001f600"])
def test_a_string_that_fills_the_heap_fits_in_one_frame(char: str) -> None:
    # A one-byte (Latin-1) heap string grows at most twice in UTF-8, a two-byte one 1.5 times.
    heap = MIB
    per_unit = 1 if char <= "\xff" else 2
    units = len(char.encode("utf-16-le", "surrogatepass")) // 2
    text = char * (heap // (per_unit * units))
    frame = encode(OUTBOX, text)
    assert frame_length(frame[:HEADER.size], max_child_frame_bytes(heap)) == len(frame) - 4
    assert json.loads(decode_payload(frame[HEADER.size:])[1]) == text


# ---- child frames -----------------------------------------------------------------------


@pytest.mark.parametrize("text", ['[["log", "x"]]', "not json at all", "", '{"\ud800": 1}'])
def test_an_outbox_text_is_passed_on_unparsed(text: str) -> None:
    assert parse_child_frame(OUTBOX, text) is text


@pytest.mark.parametrize("kind", [b"Z", b"r", b"s", b"x", b"o", b"", b"RR"])
def test_an_unknown_kind_is_refused(kind: bytes) -> None:
    assert _rejected(kind, None) == f"an unknown frame kind {kind!r}"


@pytest.mark.parametrize("kind", [READY, IDLE, END])
@pytest.mark.parametrize("text", ["", "{", "nul", "[1,]", "NaN-ish", "[" * 100_000])
def test_a_frame_that_is_not_json_is_refused(kind: bytes, text: str) -> None:
    assert _rejected(kind, text=text) == f"a {kind.decode()} frame that is not JSON"


def test_a_ready_frame_gives_version_cpu_and_protections() -> None:
    assert parse_child_frame(READY, '[1, 0.25, ["seccomp", "rlimits"]]') == (
        1, 0.25, ("seccomp", "rlimits"))
    _, cpu, protections = parse_child_frame(READY, "[1, 2, []]")
    assert isinstance(cpu, float) and cpu == 2.0 and protections == ()


def test_a_ready_frame_of_another_version_is_refused() -> None:
    assert _rejected(READY, [2, 0, []]) == "protocol version 2 (this engine speaks 1)"
    assert _rejected(READY, [0, 0, []]) == "protocol version 0 (this engine speaks 1)"


@pytest.mark.parametrize("payload", [
    None, {}, "R", [], [1], [1, 0], [1, 0, [], 0],
    [True, 0, []], [1.0, 0, []], ["1", 0, []],
    [1, -0.5, []], [1, True, []], [1, "0", []], [1, None, []],
    [1, 0, "seccomp"], [1, 0, [1]], [1, 0, [None]], [1, 0, {}],
])
def test_a_ready_frame_of_the_wrong_shape_is_refused(payload: Any) -> None:
    assert _rejected(READY, payload) == "a ready frame with the wrong shape"


def test_an_idle_frame_gives_settles_received_and_cpu() -> None:
    assert parse_child_frame(IDLE, "[3, 1.5]") == (3, 1.5)
    received, cpu = parse_child_frame(IDLE, "[0, 0]")
    assert received == 0 and isinstance(cpu, float)


@pytest.mark.parametrize("payload", [
    None, {}, [], [1], [1, 2, 3], [-1, 0], [True, 0], [1.0, 0], ["1", 0],
    [1, -0.1], [1, False], [1, None], [1, "2"],
])
def test_an_idle_frame_of_the_wrong_shape_is_refused(payload: Any) -> None:
    assert _rejected(IDLE, payload) == "an idle frame with the wrong shape"


@pytest.mark.parametrize("outcome", [
    {"ok": True, "value": None},
    {"ok": True, "value": {"a": [1, "\ud800"]}},
    {"ok": True, "value": [None], "warnings": ["return value[0]: undefined became null"]},
    {"ok": False, "code": None, "error": ""},
    {"ok": False, "code": "RESOURCE_LIMIT", "error": "x"},
    {"ok": False, "code": None, "error": "Error: boom", "thrown": True},
    {"ok": False, "code": None, "error": "Error: boom", "thrown": True, "stack": "  at f"},
])
def test_an_end_frame_gives_the_outcome(outcome: dict[str, Any]) -> None:
    assert parse_child_frame(END, json.dumps(outcome)) == outcome


def test_an_end_frame_of_null_means_stopped() -> None:
    assert parse_child_frame(END, "null") is None


@pytest.mark.parametrize("payload", [
    True, 0, "ok", [], {},
    {"ok": "true", "value": 1},
    {"ok": 1, "value": 1},
    {"ok": True},
    {"ok": False, "error": "x"},
    {"ok": True, "value": 1, "error": "x"},
    {"ok": True, "value": 1, "thrown": True},
    {"ok": True, "value": 1, "warnings": "x"},
    {"ok": True, "value": 1, "warnings": [1]},
    {"ok": False, "code": None, "error": "x", "warnings": []},
    {"ok": False, "code": None},
    {"ok": False, "code": None, "error": None},
    {"ok": False, "code": None, "error": 3},
    {"ok": False, "code": 7, "error": "x"},
    {"ok": False, "code": None, "error": "x", "thrown": False},
    {"ok": False, "code": None, "error": "x", "thrown": 1},
    {"ok": False, "code": None, "error": "x", "stack": 3},
    {"ok": False, "code": None, "error": "x", "value": 1},
    {"ok": False, "code": None, "error": "x", "extra": 1},
])
def test_an_end_frame_of_the_wrong_shape_is_refused(payload: Any) -> None:
    assert _rejected(END, payload) == "an end frame whose outcome has the wrong shape"


@given(st.binary(min_size=1, max_size=1), st.text(max_size=40))
def test_any_child_frame_is_parsed_or_refused_with_a_protocol_error(kind: bytes,
                                                                    text: str) -> None:
    try:
        parse_child_frame(kind, text)
    except ProtocolError:
        pass


@given(st.sampled_from([READY, IDLE, END]), _json)
def test_any_json_payload_is_parsed_or_refused_with_a_protocol_error(kind: bytes,
                                                                     value: Any) -> None:
    try:
        parse_child_frame(kind, json.dumps(value))
    except ProtocolError:
        pass


@given(st.binary(max_size=64))
def test_any_body_is_split_or_refused_with_a_protocol_error(body: bytes) -> None:
    try:
        kind, text = decode_payload(body)
    except ProtocolError:
        return
    assert kind == body[:1] and text.encode("utf-8", "surrogatepass") == body[1:]
