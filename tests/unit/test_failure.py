"""``AgentFailure`` and the one redaction of secrets (SPEC §17)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from dsh_workflow import AgentFailure, ProviderUnavailable
from dsh_workflow._failure import group_failures, redact


@pytest.mark.parametrize(("text", "expected"), [
    ("Authorization: Bearer abc.def-123", "Authorization: Bearer [REDACTED]"),
    ("key sk-proj-AbC123_xyz-789 refused", "key [REDACTED] refused"),
    ("GET https://u:p4ss@host.example/v1 failed", "GET https://[REDACTED]@host.example/v1 failed"),
    ('{"api_key": "hunter22"}', '{"api_key": "[REDACTED]"}'),
    ("GET /v1?token=abcd1234&x=1", "GET /v1?token=[REDACTED]&x=1"),
    ("max_tokens=1000, tokens: 12345", "max_tokens=1000, tokens: 12345"),  # no secrets
    ("nothing secret here", "nothing secret here"),
])
def test_redact_takes_out_the_kinds_of_secret_it_knows(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_a_named_secret_is_redacted_wherever_it_appears() -> None:
    assert redact("the key my-own-key-42 was refused (my-own-key-42)", ["my-own-key-42"]) == \
        "the key [REDACTED] was refused ([REDACTED])"
    assert redact("abc", ["ab", None, ""]) == "abc"  # too short to be a secret


@given(st.text(max_size=3000))
def test_a_failure_message_is_bounded_and_redacted(text: str) -> None:
    failure = AgentFailure.of("provider", text + " Bearer secret-token-1")
    assert len(failure.message) <= 1000
    assert "secret-token-1" not in failure.message


def test_the_model_enforces_its_bounds_however_it_is_built() -> None:
    with pytest.raises(ValidationError):
        AgentFailure(kind="nope", message="x")
    made = AgentFailure(kind="invalid", message="m", details=[f"/a: {i}" for i in range(9)])
    assert len(made.details) == 5
    assert AgentFailure(kind="provider", message="Bearer zzzzzzzz").message == "Bearer [REDACTED]"


def test_provider_unavailable_redacts_its_text() -> None:
    exc = ProviderUnavailable("refused key k-123456 at http://a:b@h/v1", secrets=["k-123456"])
    assert str(exc) == exc.message == "refused key [REDACTED] at http://[REDACTED]@h/v1"


def test_groups_drop_the_offending_value_and_count_most_frequent_first() -> None:
    failures = [{"kind": "invalid", "message": "", "details": [f"/n: 'INV-{i}' does not match 'x'"]}
                for i in range(3)] + [{"kind": "timeout", "message": "t", "details": []}]
    assert group_failures(failures) == [(3, "invalid", "/n: does not match 'x'"),
                                        (1, "timeout", "")]
