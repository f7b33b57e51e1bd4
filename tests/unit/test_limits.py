"""Every runtime failure and limit becomes a code and a text in one place:
``_engines/script/limits.py``.

Checked here without a runtime: each limit's error names its setting and configured value; the
runtime's end records (with their internal codes) become outcomes whose public code and text
agree (``CODE: …`` exactly when the code is a public one); the engine's own failures read as the
engine's. The public code of an outcome is read with ``outcome.outcome_code`` and its text with
``ScriptText.error``, as the host does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import quickjs
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import EngineConfig, WorkflowErrorCode
from dsh_workflow._engines.host.outcome import ScriptText, outcome_code
from dsh_workflow._engines.script.limits import (
    LimitExceeded,
    RuntimeLimits,
    cpu_backstop_spent,
    engine_failure,
    js_limit,
    limit_error,
    not_started,
    stalled,
    translate_end,
)
from dsh_workflow._engines.script.wire import (
    HOST_MADE_CODES,
    JS_ONLY_CODES,
    Failed,
    InternalCode,
    LimitKind,
)
from dsh_workflow._engines.script.wire import (
    ScriptOutcome as Outcome,
)
from dsh_workflow._errors import ENGINE_FAILED, SCRIPT_FAILED
from dsh_workflow._meta import WorkflowMeta

LIMIT = WorkflowErrorCode.RESOURCE_LIMIT
CONFIG = EngineConfig(memory_limit_bytes=3 * 1024 * 1024, stack_limit_bytes=512 * 1024,
                      slice_cpu_limit_s=0.75)
#: The limits a runtime enforces under CONFIG, as the engines pass them.
LIMITS = RuntimeLimits.of(CONFIG)
TEXT = ScriptText(WorkflowMeta(name="w", description="d"), 0, 0)
#: The setting each limit's text names, with its value as CONFIG sets it.
SETTINGS = {
    LimitKind.MEMORY: f"memory_limit_bytes={3 * 1024 * 1024} (3 MiB)",
    LimitKind.STACK: f"stack_limit_bytes={512 * 1024} (0.5 MiB)",
    LimitKind.SLICE: "slice_cpu_limit_s=0.75 seconds",
}


class Probe:
    """A ``sliced``/``near_memory`` answer that counts how often it was asked."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.answer


def _never() -> bool:
    raise AssertionError("asked, though the code does not need it")


def _failure(outcome: Outcome) -> Failed:
    assert outcome["ok"] is False, outcome
    return outcome


def _end(record: dict[str, Any], *, sliced: Callable[[], bool] = _never,
         near_memory: Callable[[], bool] = _never) -> Outcome:
    return translate_end(json.dumps(record), LIMITS, sliced=sliced, near_memory=near_memory)


def _assert_limit(outcome: Outcome, kind: LimitKind) -> None:
    failure = _failure(outcome)
    assert failure["code"] == LIMIT.value
    assert SETTINGS[kind] in failure["error"]
    assert outcome_code(failure) is LIMIT
    assert TEXT.error(failure).startswith(f"{LIMIT.value}: ")


def _assert_scripts_own(outcome: Outcome) -> str:
    """The outcome is the script's own failure: no code, no prefix; returns its text."""
    failure = _failure(outcome)
    assert failure["code"] is None and failure.get("thrown") is True
    assert outcome_code(failure) is SCRIPT_FAILED
    text = TEXT.error(failure)
    assert text and not text.startswith(tuple(f"{c.value}:" for c in WorkflowErrorCode))
    return text


# ---- limit_error ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(LimitKind))
def test_every_limit_names_its_setting_and_configured_value(kind: LimitKind) -> None:
    error = limit_error(kind, LIMITS)
    assert isinstance(error, LimitExceeded)
    assert error.kind is kind and error.code == LIMIT.value
    assert SETTINGS[kind] in error.message and str(error) == error.message
    assert "null" not in error.message
    assert error.as_outcome() == {"ok": False, "code": LIMIT.value, "error": error.message}
    _assert_limit(error.as_outcome(), kind)


def test_the_limit_texts_follow_the_configuration() -> None:
    other = RuntimeLimits.of(EngineConfig(memory_limit_bytes=20 * 1024 * 1024,
                                          slice_cpu_limit_s=2.0))
    assert "memory_limit_bytes=20971520 (20 MiB)" in limit_error(LimitKind.MEMORY, other).message
    # the value as the setting is written (2, not 2.0)
    assert "slice_cpu_limit_s=2 seconds" in limit_error(LimitKind.SLICE, other).message
    assert "stack_limit_bytes=1048576 (1 MiB)" in limit_error(LimitKind.STACK, other).message


def test_each_limit_says_what_ran_out() -> None:
    assert "out of memory" in limit_error(LimitKind.MEMORY, LIMITS).message
    assert "stack" in limit_error(LimitKind.STACK, LIMITS).message
    assert "CPU" in limit_error(LimitKind.SLICE, LIMITS).message


# ---- js_limit ---------------------------------------------------------------------------


@pytest.mark.parametrize(("exc", "sliced", "kind"), [
    (quickjs.JSException("InternalError: interrupted\n    at f"), True, LimitKind.SLICE),
    (quickjs.StackOverflow("anything"), False, LimitKind.STACK),
    (quickjs.JSException("RangeError: Maximum call stack size exceeded"), False, LimitKind.STACK),
    (quickjs.JSException("InternalError: stack overflow"), True, LimitKind.STACK),
    (quickjs.JSException("InternalError: out of memory"), False, LimitKind.MEMORY),
    (quickjs.JSException("null"), False, LimitKind.MEMORY),
    (quickjs.JSException(""), False, LimitKind.MEMORY),
    (quickjs.JSException("TypeError: x is not a function"), True, LimitKind.SLICE),
])
def test_what_escapes_a_quickjs_call_is_the_limit_it_stands_for(exc: quickjs.JSException,
                                                                sliced: bool,
                                                                kind: LimitKind) -> None:
    error = js_limit(exc, LIMITS, sliced=sliced)
    assert error is not None and error.kind is kind


@pytest.mark.parametrize("text", [
    "InternalError: interrupted",  # not an interrupt of ours without the CPU spent
    "TypeError: x is not a function",
    "Error: the heap is fine\nout of memory",  # only the first line counts
])
def test_an_exception_that_is_no_limit_stays_none(text: str) -> None:
    assert js_limit(quickjs.JSException(text), LIMITS, sliced=False) is None


# ---- translate_end ----------------------------------------------------------------------


def test_a_completed_record_passes_unchanged() -> None:
    record = {"ok": True, "value": {"a": [1, "x", None]}}
    assert _end(record) == record


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", "null", '"ok"', "{"])
def test_a_malformed_record_is_the_engine_failing(text: str) -> None:
    outcome = translate_end(text, LIMITS, sliced=_never, near_memory=_never)
    failure = _failure(outcome)
    assert failure == engine_failure("it recorded a malformed result")
    assert outcome_code(failure) is ENGINE_FAILED
    assert TEXT.error(failure) == "workflow runtime failed: it recorded a malformed result"


@pytest.mark.parametrize("code", [InternalCode.STALLED.value, InternalCode.NULL.value, "BOGUS", 7])
def test_a_record_with_an_unknown_code_is_the_engine_failing(code: object) -> None:
    outcome = _end({"ok": False, "code": code, "error": "Error: x", "thrown": True})
    failure = _failure(outcome)
    assert failure["error"].startswith("workflow runtime failed: it recorded an unknown result code")
    assert outcome_code(failure) is ENGINE_FAILED


def test_a_record_with_a_public_code_keeps_it() -> None:
    record = {"ok": False, "code": "RESULT_UNSERIALIZABLE", "error": "x"}
    assert _end(dict(record)) == record


@pytest.mark.parametrize(("code", "kind"), [(InternalCode.MEMORY, LimitKind.MEMORY),
                                            (InternalCode.STACK, LimitKind.STACK)])
def test_an_engine_made_memory_or_stack_error_is_that_limit_unasked(code: InternalCode,
                                                                    kind: LimitKind) -> None:
    _assert_limit(_end({"ok": False, "code": code.value, "error": ""}), kind)


def test_an_interrupt_confirmed_by_the_cpu_spent_is_the_slice_limit() -> None:
    sliced = Probe(True)
    _assert_limit(_end({"ok": False, "thrown": True, "code": "INTERRUPTED",
                        "error": "InternalError: interrupted"}, sliced=sliced), LimitKind.SLICE)
    assert sliced.asked == 1


def test_an_unconfirmed_interrupt_is_the_scripts_own_error() -> None:
    record = {"ok": False, "thrown": True, "code": "INTERRUPTED",
              "error": "InternalError: interrupted", "stack": "    at f (<input>:1:2)"}
    outcome = _end(record, sliced=Probe(False))
    assert _assert_scripts_own(outcome).startswith("InternalError: interrupted")
    assert _failure(outcome)["stack"] == record["stack"]


def test_a_thrown_undefined_is_named_and_the_heap_is_not_asked() -> None:
    outcome = _end({"ok": False, "code": "THROWN_NOTHING", "error": "undefined"})
    assert _assert_scripts_own(outcome) == "the script threw undefined, not an Error"


def test_a_thrown_null_with_the_heap_near_full_is_the_memory_limit() -> None:
    near = Probe(True)
    _assert_limit(_end({"ok": False, "code": "THROWN_NOTHING", "error": "null"},
                       near_memory=near), LimitKind.MEMORY)
    assert near.asked == 1


def test_a_thrown_null_with_room_on_the_heap_is_the_script_throwing_null() -> None:
    text = _assert_scripts_own(_end({"ok": False, "code": "THROWN_NOTHING", "error": "null"},
                                    near_memory=Probe(False)))
    assert text.startswith("the script threw null, not an Error")
    # it says why it might still have been memory, naming the setting
    assert f"memory_limit_bytes={CONFIG.memory_limit_bytes}" in text


@pytest.mark.parametrize("near", [True, False])
def test_memory_if_full_is_memory_only_when_the_heap_is_full(near: bool) -> None:
    record = {"ok": False, "thrown": True, "code": "MEMORY_IF_FULL",
              "error": "the script threw an error that the engine could not deliver"}
    outcome = _end(record, near_memory=Probe(near))
    if near:
        _assert_limit(outcome, LimitKind.MEMORY)
    else:
        assert _assert_scripts_own(outcome) == record["error"]


@pytest.mark.parametrize("near", [True, False])
def test_an_unrenderable_throw_is_memory_when_full_else_a_fixed_text(near: bool) -> None:
    outcome = _end({"ok": False, "code": "UNRENDERABLE", "error": ""}, near_memory=Probe(near))
    if near:
        _assert_limit(outcome, LimitKind.MEMORY)
    else:
        assert _assert_scripts_own(outcome) == (
            "the script failed, and what it threw could not be rendered as text")


@pytest.mark.parametrize("code", sorted(set(InternalCode) - HOST_MADE_CODES - JS_ONLY_CODES))
@pytest.mark.parametrize("answer", [True, False])
def test_no_internal_code_the_runtime_sends_reaches_the_host(code: InternalCode,
                                                            answer: bool) -> None:
    for error in ("null", "undefined", "text"):
        outcome = _end({"ok": False, "thrown": True, "code": code.value, "error": error},
                       sliced=Probe(answer), near_memory=Probe(answer))
        failure = _failure(outcome)
        assert failure["code"] in (None, LIMIT.value)
        assert TEXT.error(failure).startswith(f"{LIMIT.value}: ") == (failure["code"] is not None)


@pytest.mark.parametrize("code", [c.value for c in WorkflowErrorCode])
def test_a_public_code_in_a_record_is_kept_and_prefixes_the_text(code: str) -> None:
    # A fatal error the script could not catch (AGENT_CAP, BUDGET_EXCEEDED, ...) ends the run
    # with its own code.
    failure = _failure(_end({"ok": False, "code": code, "error": "what happened"}))
    assert failure["code"] == code and outcome_code(failure) is WorkflowErrorCode(code)
    assert TEXT.error(failure) == f"{code}: what happened"


def test_a_plain_script_error_keeps_its_text_and_has_no_code() -> None:
    record: dict[str, Any] = {"ok": False, "thrown": True, "code": None, "error": "Error: boom"}
    outcome = _end(record)
    assert outcome == record
    assert _assert_scripts_own(outcome) == "Error: boom"


@given(st.text(max_size=64))
def test_any_end_text_becomes_an_outcome(text: str) -> None:
    outcome = translate_end(text, LIMITS, sliced=lambda: False, near_memory=lambda: False)
    assert outcome["ok"] in (True, False)


# ---- the engine's own ends --------------------------------------------------------------


def test_an_engine_failure_is_the_engines_and_says_how() -> None:
    failure = engine_failure("the thread died")
    assert failure == {"ok": False, "code": None, "error": "workflow runtime failed: the thread died"}
    assert outcome_code(failure) is ENGINE_FAILED
    assert TEXT.error(failure) == failure["error"]


def test_a_runtime_that_could_not_start_is_the_engines_failure() -> None:
    failure = not_started(RuntimeError("can't start new thread"))
    assert failure["error"] == "the script runtime could not start: can't start new thread"
    assert failure["code"] is None and outcome_code(failure) is ENGINE_FAILED


def test_a_stall_is_the_scripts_failure_with_its_own_text() -> None:
    failure = stalled()
    assert failure["code"] == InternalCode.STALLED.value
    assert outcome_code(failure) is SCRIPT_FAILED
    text = TEXT.error(failure)
    assert text.startswith("the script is waiting for a promise that nothing will ever settle")
    assert "agent()" in text


def test_the_spent_cpu_backstop_is_a_resource_limit_naming_rlimit_cpu() -> None:
    failure = cpu_backstop_spent()
    assert failure["code"] == LIMIT.value and outcome_code(failure) is LIMIT
    assert "RLIMIT_CPU" in failure["error"]
    assert TEXT.error(failure) == f"{LIMIT.value}: {failure['error']}"
