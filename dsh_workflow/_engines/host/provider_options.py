"""What a durable run records of its provider: the options it was made from, never a secret.

:func:`provider_options` describes a provider as JSON data: ``kind`` (``echo``, ``openai``,
``command``, ``routing``, else the provider's own ``kind`` attribute or class name), and where
the provider has them ``model``, ``base_url``, ``command`` (its argv), ``cwd``, ``latency_s``,
``routes`` (each route described the same way) and ``default`` (the default route), plus
``identity``: the provider's identity as its journal keys use it. Secrets are taken out: a
URL's user and password, query strings, bearer tokens and ``sk-...``-style keys anywhere,
and the value of a command-line option whose name says key, token, secret or password.
A redacted value reads ``[redacted]``, so a recorded provider is never silently wrong.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..._subagent import provider_identity

__all__ = ["REDACTED", "provider_options", "redact"]

REDACTED = "[redacted]"

_KINDS = {"EchoProvider": "echo", "OpenAIProvider": "openai", "CommandProvider": "command",
          "RoutingProvider": "routing"}
_SECRETS = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + REDACTED),
    (re.compile(r"\b(sk|pk|rk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"(?i)(://)[^/@\s]+@"), r"\1" + REDACTED + "@"),
    (re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access_token|secret|password|sig)=)[^&\s\"']+"),
     r"\1" + REDACTED),
)
_SECRET_FLAG = re.compile(r"(?i)^-{1,2}[\w-]*(key|token|secret|passw(or)?d|credential)[\w-]*$")
_SECRET_ASSIGN = re.compile(
    r"(?i)^(-{0,2}[\w-]*(?:key|token|secret|passw(?:or)?d|credential)[\w-]*=).+$")


def redact(text: str) -> str:
    """``text`` with the secrets it visibly carries replaced by ``[redacted]``."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def _argv(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        assigned = _SECRET_ASSIGN.match(arg)
        if assigned:
            out.append(assigned.group(1) + REDACTED)
            continue
        hide_next = bool(_SECRET_FLAG.match(arg))
        out.append(redact(arg))
    return out


def provider_options(provider: object) -> dict[str, Any]:
    """The recorded options of ``provider`` (see the module docstring)."""
    name = type(provider).__name__
    kind = getattr(provider, "kind", None)
    options: dict[str, Any] = {
        "kind": kind if isinstance(kind, str) and kind else _KINDS.get(name, name)}
    model = getattr(provider, "model", None)
    if isinstance(model, str) and model:
        options["model"] = model
    base_url = getattr(provider, "base_url", None)
    if isinstance(base_url, str) and base_url:
        options["base_url"] = redact(base_url)
    argv = getattr(provider, "argv", None)
    if isinstance(argv, Sequence) and not isinstance(argv, str) and argv \
            and all(isinstance(a, str) for a in argv):
        options["command"] = _argv(argv)
        cwd = getattr(provider, "cwd", None)
        if cwd is not None:
            options["cwd"] = os.fspath(cwd)
    latency = getattr(provider, "latency_s", None)
    if isinstance(latency, int | float) and not isinstance(latency, bool) and latency:
        options["latency_s"] = float(latency)
    routes = getattr(provider, "routes", None)
    if isinstance(routes, Mapping) and routes:
        options["routes"] = {str(route): provider_options(target)
                             for route, target in sorted(routes.items())}
        default = getattr(provider, "default", None)
        if isinstance(default, str):
            options["default"] = default
    options["identity"] = redact(provider_identity(provider))
    return options
