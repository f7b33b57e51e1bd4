"""Why a child failed: :class:`AgentFailure`, the one redaction of secrets, and
:class:`ProviderUnavailable` (a fault every later child would hit too).

A child that did not complete carries one :class:`AgentFailure` on its ``AgentEnded`` event
(docs/scripts.md, "Truthful outcomes"). Its ``message`` is bounded (:data:`MAX_MESSAGE_CHARS`) and has
passed :func:`redact`, the one place secrets are taken out of texts that leave a provider:
bearer tokens, ``sk-...``-style keys, URL credentials, ``api_key=...``-style assignments and any secret the
caller names (a provider's own API key). :func:`group_failures` groups failures by kind and
reason (the offending value dropped), for every summary of a run's failures (the CLI's
``warning:`` line, the tool's ``Agents failed:`` line). :func:`argv_secrets` and
:func:`redact_argv` are the one rule for the secrets a command line carries.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from ._subagent import ErrorKind
from ._text import valid_text

__all__ = [
    "MAX_DETAILS",
    "MAX_MESSAGE_CHARS",
    "REDACTED",
    "AgentFailure",
    "FailureKind",
    "ProviderUnavailable",
    "argv_secrets",
    "bounded",
    "failure_reason",
    "group_failures",
    "redact",
    "redact_argv",
]

FailureKind = Literal["provider", "invalid", "missing", "timeout", "cancelled"]
"""Why a child did not complete: its provider returned a failed result (``provider``), its
structured value failed validation (``invalid``), a schema call produced no structured value
(``missing``), it passed ``agent_timeout_s`` (``timeout``), or the run's stop ended it
(``cancelled``)."""

FAILURE_KINDS: tuple[str, ...] = get_args(FailureKind)
MAX_MESSAGE_CHARS = 1000
MAX_DETAILS = 5
_MAX_DETAIL_CHARS = 300
REDACTED = "[REDACTED]"

_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{4,}")
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{6,}")
_ASSIGNED = re.compile(
    r"(?i)\b((?:x-)?api[_-]?key|(?:access[_-]?|auth[_-]?)?token|secret|password)"
    r"(\"?'?\s*[:=]\s*\"?'?)([^\s\"'&,;]{4,})")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@:]+:[^/\s@]+@")
_MIN_NAMED_SECRET = 4


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every secret replaced by ``[REDACTED]``: each of ``secrets`` (named
    secrets of at least 4 characters, wherever they appear), bearer tokens, ``sk-...`` keys,
    a URL's ``user:password@`` and ``api_key=...``-style assignments. The one redaction of the
    package."""
    for secret in secrets:
        if secret and len(secret) >= _MIN_NAMED_SECRET:
            text = text.replace(secret, REDACTED)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _SK_KEY.sub(REDACTED, text)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    return _ASSIGNED.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)


#: Name parts of a command-line option whose value is a secret (``--api-key``, ``--token``,
#: ``--client-secret``, ``--foo-key=``); ``--max-tokens`` or ``--keyfile`` are not.
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd",
                           "credential", "credentials", "authorization"})
_OPTION = re.compile(r"^(-{1,2})([A-Za-z0-9][\w.-]*)$")
_ASSIGNED_OPTION = re.compile(r"^(-{0,2}([A-Za-z0-9][\w.-]*)=)(.+)$", re.DOTALL)
_HEADER = re.compile(r"^(\s*(?:proxy-)?authorization\s*:\s*)(.+)$", re.IGNORECASE | re.DOTALL)


def _secret_name(name: str) -> bool:
    return any(part in _SECRET_WORDS for part in re.split(r"[-_.]", name.lower()))


def _argv_parts(argv: Iterable[str]) -> list[tuple[str, str | None]]:
    """Each argument split into what stays and its secret value (None: not a secret)."""
    parts: list[tuple[str, str | None]] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            hide_next = False
            parts.append(("", arg))
            continue
        assigned = _ASSIGNED_OPTION.match(arg)
        header = _HEADER.match(arg)
        option = _OPTION.match(arg)
        if assigned and _secret_name(assigned.group(2)):
            parts.append((assigned.group(1), assigned.group(3)))
        elif header:
            parts.append((header.group(1), header.group(2)))
        else:
            hide_next = bool(option and _secret_name(option.group(2)))
            parts.append((arg, None))
    return parts


def argv_secrets(argv: Iterable[str]) -> tuple[str, ...]:
    """The secret values a command line carries, in order, each once: the argument after an
    option whose name says key, token, secret, password, credential or auth (``--api-key X``,
    ``--token X``), the value of such an option written ``--foo-key=X``, and the value of an
    ``Authorization: ...`` header argument. Never raises."""
    return tuple(dict.fromkeys(value for _, value in _argv_parts(argv) if value))


def redact_argv(argv: Iterable[str]) -> list[str]:
    """``argv`` with each value :func:`argv_secrets` finds replaced by :data:`REDACTED`
    (``--api-key [REDACTED]``, ``--foo-key=[REDACTED]``, ``Authorization: [REDACTED]``) and
    every other argument passed through :func:`redact`; as many arguments as given."""
    parts = _argv_parts(argv)
    secrets = [value for _, value in parts if value]
    return [(kept + REDACTED if kept else REDACTED) if value is not None
            else redact(kept, secrets) for kept, value in parts]


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters (the last one an ellipsis when cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class AgentFailure(BaseModel):
    """Why one child did not complete (``AgentEnded.error``).

    ``kind`` is a :data:`FailureKind`; ``message`` says what happened in one text (at most
    1,000 characters, secrets redacted); ``details`` lists up to 5 validator messages with
    their JSON paths for ``invalid`` (e.g. ``/number: 'INV-12' does not match
    '^INV-\\d{4}$'``), empty otherwise. ``cause`` is what the provider's backend said
    (:data:`~dsh_workflow.ErrorKind`, from ``SubagentResult.error_kind``; None when it did not
    say). Build with :meth:`of` to get the bounds and the redaction applied; the validators
    enforce them on any other construction too.
    """

    model_config = ConfigDict(frozen=True)

    kind: FailureKind
    message: str = Field(max_length=MAX_MESSAGE_CHARS)
    details: tuple[str, ...] = Field(default=(), max_length=MAX_DETAILS)
    cause: ErrorKind | None = None

    @model_serializer(mode="wrap")
    def _cause_when_known(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("cause", "") is None:
            del data["cause"]
        return data

    @field_validator("message", mode="before")
    @classmethod
    def _redacted_message(cls, value: object) -> object:
        # before pydantic's own check, which refuses a lone surrogate (valid_text: U+FFFD)
        return bounded(redact(valid_text(value))) if isinstance(value, str) else value

    @field_validator("details", mode="before")
    @classmethod
    def _redacted_details(cls, value: object) -> object:
        if isinstance(value, (list, tuple)):
            return tuple(bounded(redact(valid_text(item)), _MAX_DETAIL_CHARS)
                         if isinstance(item, str) else item for item in value[:MAX_DETAILS])
        return value

    @classmethod
    def of(cls, kind: FailureKind, message: str, details: Iterable[str] = (), *,
           secrets: Iterable[str | None] = (), cause: ErrorKind | None = None) -> AgentFailure:
        """A failure with ``message`` redacted (also of ``secrets``) and bounded, and at most
        5 ``details``."""
        listed = [bounded(redact(valid_text(d), secrets), _MAX_DETAIL_CHARS)
                  for d in list(details)[:MAX_DETAILS]]
        return cls(kind=kind, message=bounded(redact(valid_text(message or kind), secrets)),
                   details=tuple(listed), cause=cause)

    def summary(self) -> str:
        """``kind: message`` on one line, for progress lines and grouping."""
        first = self.message.split("\n", 1)[0]
        return f"{self.kind}: {first}"


class ProviderUnavailable(Exception):
    """A provider fault every later child would hit too: credentials refused, an unknown
    model, an endpoint unreachable after its retries, a command that does not exist or is
    not executable. A provider raises it instead of failing each child; the engine ends the
    run at once with fatal ``AGENT_FAILED`` whose text is ``str(exc)`` (already redacted)."""

    def __init__(self, message: str, *, secrets: Iterable[str | None] = ()) -> None:
        super().__init__(bounded(redact(message, secrets)))

    @property
    def message(self) -> str:
        return str(self.args[0])


#: Kinds whose message says something beyond the kind itself.
_EXPLAINED = ("provider", "invalid", "missing")
#: A validator message's offending value (``/number: 'INV-12' does not match ...``): dropped in
#: the summary so that equal reasons of different values group together.
_VALUE = re.compile(
    r"^(?P<path>/\S*): (?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?\d[\w.+-]*|True|False|None"
    r"|\[.*?\]|\{.*?\}) (?=does not match|is not of type|is not one of|is not valid|is too "
    r"|is less than|is greater than|is not a |was expected|is not allowed|should not)")
_MAX_REASON_CHARS = 120


def failure_reason(failure: dict[str, Any], *, keep_value: bool = False,
                   limit: int = _MAX_REASON_CHARS) -> str:
    """What a failure says after its kind: its first detail or message line (without the
    offending value unless ``keep_value``), bounded to ``limit`` characters."""
    details = failure.get("details") or []
    text = details[0] if details else str(failure.get("message", ""))
    text = text.split("\n", 1)[0]
    if not keep_value:
        text = _VALUE.sub(r"\g<path>: ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def group_failures(failures: list[dict[str, Any]], *,
                   kinds: tuple[str, ...] = _EXPLAINED) -> list[tuple[int, str, str]]:
    """``(count, kind, reason)`` groups, most frequent first (first seen first among equals);
    the reason is empty for kinds not in ``kinds``."""
    groups: Counter[tuple[str, str]] = Counter()
    for failure in failures:
        kind = str(failure.get("kind"))
        groups[(kind, failure_reason(failure) if kind in kinds else "")] += 1
    return [(count, kind, reason) for (kind, reason), count in groups.most_common()]
