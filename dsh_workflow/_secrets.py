"""A run's secrets, and the one place a provider's answers are cleared of them.

The secrets of a run (:func:`run_secrets`) are its provider's ``info.secrets`` (the API keys it
was given, the values after secret-looking flags of a command's argv) and the values of the
API-key environment variables a provider reads or an agent CLI child is passed
(:func:`environment_secrets`). :class:`RedactingProvider` wraps the run's provider, so every
result is cleared of them before anything else sees it: the script, the events, the store,
``show``, the viewer and the tool's text (SECURITY.md, "Secrets never leave").

An answer's text and structured value lose only the named secrets (an answer may speak of
tokens and passwords); an error text also passes :func:`~._failure.redact`'s patterns.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ._failure import REDACTED, ProviderUnavailable, redact
from ._subagent import (
    ProviderInfo,
    SubagentProvider,
    SubagentRequest,
    SubagentResult,
    provider_info,
)

__all__ = ["ENV_KEY_NAMES", "ENV_KEY_PREFIXES", "RedactingProvider", "environment_secrets",
           "redact_result", "redact_value", "run_secrets"]

#: API-key variables a built-in provider reads (the OpenAI-compatible provider, the agent CLIs).
ENV_KEY_NAMES = ("OPENAI_API_KEY", "DSH_WORKFLOW_OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                 "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CODEX_API_KEY")
#: Prefixes of the variables the agent CLI presets pass through to their children (and this
#: package's own): any of them ending in ``_API_KEY``, ``_KEY`` or ``_TOKEN`` is a secret.
ENV_KEY_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "CODEX_", "OPENAI_", "DSH_WORKFLOW_")
_SECRET_SUFFIXES = ("_API_KEY", "_KEY", "_TOKEN")
#: Shorter values are never treated as secrets (they would match ordinary text).
_MIN_SECRET = 4


def environment_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values (at least 4 characters) of the API-key variables of ``environ`` (default:
    this process's environment): :data:`ENV_KEY_NAMES` and every variable with a prefix of
    :data:`ENV_KEY_PREFIXES` whose name ends in ``_API_KEY``, ``_KEY`` or ``_TOKEN``."""
    source = os.environ if environ is None else environ
    found = []
    for name, value in source.items():
        if name in ENV_KEY_NAMES or (name.startswith(ENV_KEY_PREFIXES)
                                     and name.endswith(_SECRET_SUFFIXES)):
            found.append(value)
    return _ordered(found)


def _ordered(values: Iterable[str | None]) -> tuple[str, ...]:
    """Distinct values of at least 4 characters, longest first (so a secret that contains
    another is replaced whole)."""
    unique = {value for value in values if value and len(value) >= _MIN_SECRET}
    return tuple(sorted(unique, key=lambda value: (-len(value), value)))


def run_secrets(provider: object, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every secret a run with ``provider`` must never show: ``provider_info(provider).secrets``
    and :func:`environment_secrets` (longest first, each at least 4 characters)."""
    return _ordered((*provider_info(provider).secrets, *environment_secrets(environ)))


def _named_out(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_value(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (JSON data) with every named secret replaced in every string, keys included;
    the value itself when nothing changed. Never raises on non-JSON data (kept as it is)."""
    if not secrets:
        return value
    if isinstance(value, str):
        return _named_out(value, secrets)
    if isinstance(value, list):
        items = [redact_value(item, secrets) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = [(redact_value(k, secrets), redact_value(v, secrets)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(),
                                                                 strict=True)):
            return value
        return dict(pairs)
    return value


def redact_result(result: SubagentResult, secrets: tuple[str, ...]) -> SubagentResult:
    """``result`` with ``secrets`` out of its text, structured value and model (named secrets
    only) and its error (also :func:`~._failure.redact`'s patterns); the same object when there
    is nothing to take out."""
    update: dict[str, Any] = {}
    if result.error is not None:
        error = redact(result.error, secrets)
        if error != result.error:
            update["error"] = error
    if secrets:
        for name in ("text", "model"):
            text = getattr(result, name)
            if text is not None and (cleared := _named_out(text, secrets)) != text:
                update[name] = cleared
        if result.structured is not None:
            structured = redact_value(result.structured, secrets)
            if structured is not result.structured:
                update["structured"] = structured
    return result.model_copy(update=update) if update else result


class RedactingProvider:
    """``inner`` with every result cleared of ``secrets`` (:func:`redact_result`), and a
    :class:`~._failure.ProviderUnavailable` it raises re-raised with its text cleared too;
    every other exception and cancellation pass through untouched (the engine redacts their
    text where it makes the failure)."""

    def __init__(self, inner: SubagentProvider, secrets: tuple[str, ...]) -> None:
        self.inner = inner
        self.secrets = secrets

    @property
    def info(self) -> ProviderInfo:
        """The wrapped provider's declaration."""
        return provider_info(self.inner)

    async def run(self, request: SubagentRequest) -> SubagentResult:
        try:
            result = await self.inner.run(request)
        except ProviderUnavailable as exc:
            exc.args = (redact(exc.message, self.secrets), *exc.args[1:])
            raise
        if isinstance(result, SubagentResult):
            return redact_result(result, self.secrets)
        return result
