"""A run's secrets and the clearing of answers (``dsh_workflow._secrets``, SPEC §23 "Secrets
never leave"): which environment variables count, that ``info.secrets`` joins them, and that
no named secret survives in any string of an answer, however it is nested."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import ProviderInfo, SubagentResult
from dsh_workflow._secrets import environment_secrets, redact_result, redact_value, run_secrets

SECRET = "k3y-Secret-value-123"


def test_the_api_key_variables_count_and_others_do_not() -> None:
    environ = {
        "OPENAI_API_KEY": "openai-key-1", "DSH_WORKFLOW_OPENAI_API_KEY": "dsh-key-2",
        "ANTHROPIC_API_KEY": "anthropic-3", "ANTHROPIC_AUTH_TOKEN": "auth-token-4",
        "CLAUDE_CODE_OAUTH_TOKEN": "oauth-5", "CODEX_API_KEY": "codex-6",
        "OPENAI_ORG_TOKEN": "org-token-7", "DSH_WORKFLOW_TOKEN": "viewer-token-8",
        "ANTHROPIC_MODEL": "claude-sonnet-4-5", "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "32000",
        "HOME": "/home/someone", "GITHUB_TOKEN": "not-ours-9", "OPENAI_API_KEY_SHORT": "x",
        "CODEX_KEY": "abc",  # too short to be a secret: it would match ordinary text
    }
    assert set(environment_secrets(environ)) == {
        "openai-key-1", "dsh-key-2", "anthropic-3", "auth-token-4", "oauth-5", "codex-6",
        "org-token-7", "viewer-token-8"}


def test_the_presets_pass_no_key_variable_that_is_not_counted() -> None:
    from dsh_workflow._providers.agent_cli import agent_cli_env
    from dsh_workflow._secrets import ENV_KEY_PREFIXES

    passed = agent_cli_env({"ANTHROPIC_X_TOKEN": "a", "CODEX_Y_API_KEY": "b", "OTHER_TOKEN": "c",
                            "CLAUDE_Z_TOKEN": "d", "OPENAI_W_API_KEY": "e"})
    secret_names = [name for name in passed if name.endswith(("_TOKEN", "_API_KEY"))]
    assert secret_names and all(name.startswith(ENV_KEY_PREFIXES) for name in secret_names)


class _Declared:
    info = ProviderInfo(kind="mine", identity="mine", secrets=("declared-secret", "abc"))

    async def run(self, request: Any) -> SubagentResult:  # pragma: no cover - never run
        raise AssertionError


def test_a_run_s_secrets_are_the_provider_s_and_the_environment_s_longest_first() -> None:
    secrets = run_secrets(_Declared(), {"OPENAI_API_KEY": "declared-secret-longer"})
    assert secrets == ("declared-secret-longer", "declared-secret")  # "abc": too short


def test_a_secret_that_contains_another_is_replaced_whole() -> None:
    secrets = run_secrets(_Declared(), {"OPENAI_API_KEY": "declared-secret-longer"})
    assert redact_value("x declared-secret-longer y", secrets) == "x [REDACTED] y"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@st.composite
def leaky_values(draw: st.DrawFn) -> Any:
    """JSON values with the secret spliced into some of their strings (keys included)."""
    def splice(text: str) -> str:
        if draw(st.booleans()):
            cut = draw(st.integers(0, len(text)))
            return text[:cut] + SECRET + text[cut:]
        return text

    def leak(value: Any) -> Any:
        if isinstance(value, str):
            return splice(value)
        if isinstance(value, list):
            return [leak(item) for item in value]
        if isinstance(value, dict):
            return {splice(key): leak(item) for key, item in value.items()}
        return value
    return leak(draw(json_values))


@given(leaky_values())
def test_no_secret_survives_in_any_string_of_a_structured_answer(value: Any) -> None:
    cleared = redact_value(value, (SECRET,))
    assert SECRET not in json.dumps(cleared, ensure_ascii=False)


@given(json_values)
def test_a_value_without_secrets_is_kept_as_it_is(value: Any) -> None:
    assert redact_value(value, (SECRET,)) == value


def test_an_answer_loses_only_named_secrets_and_an_error_also_the_patterns() -> None:
    result = SubagentResult(text=f"the key {SECRET}; max token: 4096", structured={SECRET: [SECRET]},
                            model=f"model-{SECRET}")
    cleared = redact_result(result, (SECRET,))
    assert cleared.text == "the key [REDACTED]; max token: 4096"
    assert cleared.structured == {"[REDACTED]": ["[REDACTED]"]}
    assert cleared.model == "model-[REDACTED]"
    failed = redact_result(SubagentResult(stop_reason="error",
                                          error=f"401 {SECRET} api_key=abcdef123"), (SECRET,))
    assert failed.error == "401 [REDACTED] api_key=[REDACTED]"


def test_a_result_with_nothing_to_clear_is_the_same_object() -> None:
    result = SubagentResult(text="fine", structured={"a": ["b"]})
    assert redact_result(result, (SECRET,)) is result


@pytest.mark.parametrize("secrets", [(), (SECRET,)])
def test_an_error_always_passes_the_patterns(secrets: tuple[str, ...]) -> None:
    failed = redact_result(SubagentResult(stop_reason="error", error="Bearer abcdefgh1234"),
                           secrets)
    assert failed.error == "Bearer [REDACTED]"
