"""The telemetry seam's pure rules (docs/telemetry.md): the ``traceparent`` text, what a
child's environment and headers get, and which labels are the prompt's own words."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow._agent_options import default_label
from dsh_workflow._telemetry import (
    child_context,
    child_traceparent,
    is_traceparent,
    trace_env,
    trace_headers,
)
from dsh_workflow.integrations.otel import _from_prompt

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@given(st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1), st.integers(0, 255))
def test_every_valid_trace_context_is_a_traceparent(trace_id: int, span_id: int,
                                                    flags: int) -> None:
    assert is_traceparent(f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}")


def test_malformed_trace_contexts_are_not() -> None:
    for text in ("", PARENT.upper(), PARENT + "-00", "01" + PARENT[2:],
                 "00-" + "0" * 32 + "-b7ad6b7169203331-01",
                 "00-0af7651916cd43dd8448eb211c80319c-" + "0" * 16 + "-01", None, 7):
        assert not is_traceparent(text)


def test_only_a_running_traced_child_gets_the_variables_and_the_header() -> None:
    assert (child_traceparent(), trace_env(), trace_headers()) == (None, {}, {})
    with child_context(PARENT):
        assert trace_env() == {"TRACEPARENT": PARENT, "OTEL_TRACEPARENT": PARENT}
        assert trace_headers() == {"traceparent": PARENT}
        with child_context("not a trace context"):
            assert trace_env() == {}
        assert child_traceparent() == PARENT
    assert trace_env() == {}


@given(st.text(min_size=1))
def test_a_label_the_engine_makes_from_a_prompt_counts_as_content(prompt: str) -> None:
    assert _from_prompt(default_label(prompt), prompt)



def test_a_label_the_script_chose_is_not() -> None:
    assert not _from_prompt("review", "review the diff")
    assert not _from_prompt("security pass", "read a.py\nthen b.py")
    assert _from_prompt("read a.py", "read a.py\nthen b.py")
