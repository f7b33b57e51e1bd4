"""The wire shapes: defined once in Python, spelled identically in the JavaScript, and carried
unchanged through JSON and the sandbox protocol."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import EngineConfig, WorkflowErrorCode
from dsh_workflow._engines.script import wire
from dsh_workflow._engines.script.limits import RuntimeLimits, translate_end
from dsh_workflow._engines.script.wire import HookKind, InternalCode
from dsh_workflow._engines.subprocess import frames as protocol

RUNTIME_JS = Path(__file__).resolve().parents[2] / "runtime_js"
_JS = "\n".join(path.read_text("utf-8") for path in sorted(RUNTIME_JS.glob("*.js")))
#: Upper-case string literals of the JavaScript that are no codes.
_NOT_CODES = {"UTC"}

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=3),
    max_leaves=10)


def _js_codes() -> set[str]:
    """Every upper-case string literal of runtime_js/ (the codes it spells)."""
    found = re.findall(r"""["']([A-Z][A-Z_]{2,})["']""", _JS)
    return set(found) - _NOT_CODES


def test_the_javascript_spells_exactly_the_internal_codes_and_public_ones() -> None:
    public = {code.value for code in WorkflowErrorCode}
    internal = {code.value for code in InternalCode}
    used = _js_codes()
    assert used - public - internal == set(), "a code the JavaScript uses is defined nowhere"
    expected = internal - {code.value for code in wire.HOST_MADE_CODES}
    assert expected - used == set(), "an internal code the JavaScript never spells"
    assert not (public & internal), "an internal code shadows a public one"


def test_the_javascript_names_the_one_definition() -> None:
    assert "dsh_workflow/_engines/script/wire.py" in (RUNTIME_JS / "hooks.js").read_text("utf-8")
    assert "dsh_workflow/_engines/script/wire.py" in (RUNTIME_JS / "boundary.js").read_text("utf-8")


@pytest.mark.parametrize("kind", [HookKind.AGENT, HookKind.WORKFLOW, HookKind.NUMBERS,
                                  HookKind.CANCEL, HookKind.WORKFLOW_END])
def test_the_javascript_posts_each_hook_kind(kind: HookKind) -> None:
    assert f'\'["{kind}",\'' in _JS


@pytest.mark.parametrize("kind", [HookKind.PHASE, HookKind.LOG])
def test_the_javascript_narrates_each_kind(kind: HookKind) -> None:
    assert f"narrate('{kind}'" in _JS


def test_the_spent_tag_is_the_one_the_runtime_reads() -> None:
    assert f"entry[0] === '{wire.SPENT_TAG}'" in _JS


@given(st.integers(1, 2**31), _json)
def test_settle_entries_cross_the_pipe_unchanged(call_id: int, value: Any) -> None:
    for entry in (wire.answer(call_id, value),
                  wire.refusal(call_id, WorkflowErrorCode.AGENT_CAP.value, "m"),
                  wire.spent(call_id)):
        frame = protocol.encode(protocol.SETTLE, entry)
        kind, text = protocol.decode_payload(frame[protocol.HEADER.size:])
        assert kind == protocol.SETTLE and json.loads(text) == entry


@given(st.one_of(
    st.builds(lambda v: {"ok": True, "value": v}, _json),
    st.builds(wire.failed, st.text(max_size=8),
              st.none() | st.sampled_from([c.value for c in WorkflowErrorCode])),
    st.builds(lambda e, s: {"ok": False, "code": None, "error": e, "thrown": True,
                            "stack": s}, st.text(max_size=8), st.text(max_size=8)),
))
def test_outcomes_cross_the_pipe_unchanged(outcome: Any) -> None:
    text = json.dumps(outcome)
    assert protocol.parse_child_frame(protocol.END, text) == outcome
    assert set(outcome) <= (wire.COMPLETED_KEYS if outcome["ok"] else wire.FAILED_KEYS)


def test_a_failed_outcome_carries_every_required_key() -> None:
    assert set(wire.failed("x")) == wire.FAILED_REQUIRED_KEYS
    assert wire.FAILED_REQUIRED_KEYS < wire.FAILED_KEYS


def test_report_kinds_are_their_strings() -> None:
    assert [str(k) for k in wire.ReportKind] == ["outbox", "rest", "end"]
    end: str = wire.ReportKind.END  # compared as the str it is
    assert end == "end"


@pytest.mark.parametrize(("code", "expected"), [
    (InternalCode.MEMORY, "RESOURCE_LIMIT"),
    (InternalCode.STACK, "RESOURCE_LIMIT"),
    (InternalCode.INTERRUPTED, None),  # not confirmed by the CPU spent: the script's own
    (InternalCode.THROWN_NOTHING, None),
    (InternalCode.MEMORY_IF_FULL, None),
    (InternalCode.UNRENDERABLE, None),
])
def test_no_internal_code_survives_translation(code: InternalCode, expected: str | None) -> None:
    record = json.dumps({"ok": False, "code": code.value, "error": "null"})
    outcome = translate_end(record, RuntimeLimits.of(EngineConfig()), sliced=lambda: False,
                            near_memory=lambda: False)
    assert outcome["ok"] is False and outcome["code"] == expected
    assert outcome["error"]


def test_the_warning_bound_is_spelled_once_on_each_side() -> None:
    assert f"const MAX_WARNINGS = {wire.MAX_WARNINGS};" in (RUNTIME_JS / "boundary.js").read_text(
        "utf-8")


def test_a_completed_outcomes_warnings_are_checked_again_on_the_host() -> None:
    many = [f"w{i}" for i in range(40)]
    kept = wire.warnings_of({"ok": True, "value": None, "warnings": many})
    assert kept == tuple(many[:wire.MAX_WARNINGS + 1])
    long = "x" * (wire.MAX_WARNING_CHARS * 3)
    [cut] = wire.warnings_of({"ok": True, "value": None, "warnings": [long]})
    assert len(cut) == wire.MAX_WARNING_CHARS and cut.endswith("…")
    assert wire.warnings_of({"ok": True, "value": None}) == ()
    # a runtime's record is read defensively: warnings of the wrong shape, on purpose
    assert wire.warnings_of({"ok": True, "value": None, "warnings": "x"}) == ()  # type: ignore[typeddict-item]
    assert wire.warnings_of({"ok": True, "value": None, "warnings": ["a", 3, "b"]}) == ("a", "b")  # type: ignore[list-item]
