"""What a durable run records of its provider: its declared record, never a secret.

:func:`provider_options` is the provider's ``info.record`` (:class:`~dsh_workflow.ProviderInfo`:
``kind`` and everything needed to rebuild it for a resume — model, base URL, command argv,
routes) plus ``identity``, the identity its journal keys use. The provider declares both
secret-free; as a second guard every string in them also passes
:func:`~dsh_workflow._failure.redact` with the provider's declared ``secrets``, so a redacted
value reads ``[REDACTED]`` and a recorded provider is never silently wrong. Nothing but
:func:`~dsh_workflow._subagent.provider_info` is read of the provider.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._failure import redact
from ._subagent import provider_info

__all__ = ["provider_options"]


def _scrubbed(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {str(key): _scrubbed(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrubbed(item, secrets) for item in value]
    return value


def provider_options(provider: object) -> dict[str, Any]:
    """The recorded options of ``provider``: its ``info.record`` (``kind`` always set, to
    ``info.kind`` when the record lacks it) and ``identity`` (see the module docstring)."""
    info = provider_info(provider)
    options: dict[str, Any] = _scrubbed(dict(info.record), info.secrets)
    options.setdefault("kind", info.kind)
    options["identity"] = redact(info.identity, info.secrets)
    return options
