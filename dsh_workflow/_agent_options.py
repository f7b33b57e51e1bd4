"""The rules for one ``agent()`` call: its options, its default label.

Shared by every engine; the runtime has already checked the prompt and turned the options into
JSON data, so what arrives here is untrusted JSON, validated again in full. Which options exist
and what each takes is the table of ``_option_table.py`` (:data:`AGENT_OPTIONS`), read here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ._errors import WorkflowError, WorkflowErrorCode
from ._option_table import AGENT_OPTIONS, EFFORTS, FAILURE_MODES, ISOLATIONS, agent_option_names
from ._subagent import Effort, Isolation

__all__ = [
    "EFFORTS",
    "FAILURE_MODES",
    "ISOLATIONS",
    "SUPPORTED_OPTIONS",
    "AgentOptions",
    "default_label",
    "parse_agent_options",
]

#: The keys a script may pass (the table's).
SUPPORTED_OPTIONS = agent_option_names()
_SUPPORTED_TEXT = ", ".join(SUPPORTED_OPTIONS)
_STRING_OPTIONS = tuple(option.name for option in AGENT_OPTIONS if option.kind in ("text", "name"))
_NAME_OPTIONS = tuple(option.name for option in AGENT_OPTIONS if option.kind == "name")
_NONEMPTY = {option.name: option.nonempty for option in AGENT_OPTIONS if option.nonempty}
_CHOICES = {option.name: option.choices for option in AGENT_OPTIONS if option.kind == "choice"}
_SCHEMA_OPTIONS = tuple(option.name for option in AGENT_OPTIONS if option.kind == "schema")
_LABEL_CHARS = 48
_NAME_CHARS = 256  # model, provider and agent type names


@dataclass(frozen=True)
class AgentOptions:
    label: str | None = None
    phase: str | None = None
    schema: dict[str, Any] | None = None
    model: str | None = None
    provider: str | None = None
    effort: Effort | None = None
    agent_type: str | None = None
    isolation: Isolation | None = None
    failure: str | None = None  # "null" (the default) or "throw"

    @property
    def throw(self) -> bool:
        """A failed child rejects with an ``AgentFailure`` error instead of resolving null."""
        return self.failure == "throw"


#: The options of a call that passed none (frozen, so one instance serves every such call).
_NO_OPTIONS = AgentOptions()
#: option key -> the AgentOptions field it fills (every row of the table has one: a test checks).
_FIELDS = {option.name: option.field for option in AGENT_OPTIONS
           if option.field in {f.name for f in fields(AgentOptions)}}


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a string" if isinstance(value, str) else type(value).__name__


def _shown(value: object) -> str:
    if isinstance(value, str):
        return '"' + (value if len(value) <= 40 else value[:39] + "…") + '"'
    return _kind(value)


def parse_agent_options(raw: object, *, check_schema: bool = True) -> AgentOptions:
    """Validate ``agent()`` options (already JSON data).

    Keys are checked in order and the first unknown key decides (``UNSUPPORTED_OPTION``, the
    message lists every supported option). Then, with ``null`` counting as absent:
    ``label``/``phase``/``model``/``provider``/``agentType`` must be strings (model, provider
    and agent type names non-empty where it matters and at most 256 characters), ``effort``
    one of ``low|medium|high|xhigh|max``, ``isolation`` ``worktree`` and ``failure`` ``null|throw``
    (all ``INVALID_ARGUMENT``,
    naming the allowed values), and ``schema`` must pass the schema gate
    (``UNSUPPORTED_SCHEMA``) — unless ``check_schema`` is false: then the caller runs the gate
    (off the event loop).
    """
    if raw is None:
        return _NO_OPTIONS
    if not isinstance(raw, dict):
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            f"agent() options must be an object (got {_kind(raw)})")
    for key in raw:
        if key not in SUPPORTED_OPTIONS:
            raise WorkflowError(WorkflowErrorCode.UNSUPPORTED_OPTION, (
                f'agent() option "{key}" is not recognized (supported: {_SUPPORTED_TEXT})'))
    values = {key: value for key, value in raw.items() if value is not None}
    for key in _STRING_OPTIONS:
        if key in values and not isinstance(values[key], str):
            raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
                f'agent() option "{key}" must be a string (got {_kind(values[key])})'))
    for key in _NAME_OPTIONS:
        if key in values and len(values[key]) > _NAME_CHARS:
            raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
                f'agent() option "{key}" is {len(values[key])} characters; a {key} name is at '
                f"most {_NAME_CHARS}"))
    for key, what in _NONEMPTY.items():
        if values.get(key) == "":
            raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                                f'agent() option "{key}" must be a non-empty {what}')
    for key, allowed in _CHOICES.items():
        if key in values and values[key] not in allowed:
            raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
                f'agent() option "{key}" must be one of '
                + ", ".join(f'"{choice}"' for choice in allowed)
                + f" (got {_shown(values[key])})"))
    if check_schema:
        for key in _SCHEMA_OPTIONS:
            if key in values:
                from ._schema import check_agent_schema  # jsonschema loads only with a schema

                check_agent_schema(values[key])
    return AgentOptions(**{_FIELDS[key]: value for key, value in values.items() if key in _FIELDS})


def default_label(prompt: str) -> str:
    """The prompt's first line, cut to 48 characters (47 and an ellipsis) when longer."""
    first = prompt.split("\n", 1)[0]
    return first if len(first) <= _LABEL_CHARS else first[: _LABEL_CHARS - 1] + "…"
