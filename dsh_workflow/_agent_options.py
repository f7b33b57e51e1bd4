"""The rules for one ``agent()`` call: its options, its default label.

The host of every engine parses each call's options here (the runtime has already checked the
prompt and turned the options into JSON data, so what arrives is untrusted JSON, validated
again in full); ``check``'s lint reads the same option names and choices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from ._errors import WorkflowError, WorkflowErrorCode
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

SUPPORTED_OPTIONS = ("label", "phase", "schema", "model", "provider", "effort", "agentType",
                     "isolation", "failure")
_SUPPORTED_TEXT = ", ".join(SUPPORTED_OPTIONS)
EFFORTS: tuple[str, ...] = get_args(Effort)
ISOLATIONS: tuple[str, ...] = get_args(Isolation)
#: What a failed child does in the script: resolve ``null`` (the default) or reject with a
#: non-fatal ``AgentFailure`` error (docs/scripts.md, "Truthful outcomes").
FAILURE_MODES: tuple[str, ...] = ("null", "throw")
_CHOICES: dict[str, tuple[str, ...]] = {"effort": EFFORTS, "isolation": ISOLATIONS,
                                        "failure": FAILURE_MODES}
_STRING_OPTIONS = ("label", "phase", "model", "provider", "agentType")
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
    for key in ("model", "provider", "agentType"):
        if key in values and len(values[key]) > _NAME_CHARS:
            raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
                f'agent() option "{key}" is {len(values[key])} characters; a {key} name is at '
                f"most {_NAME_CHARS}"))
    if values.get("agentType") == "":
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            'agent() option "agentType" must be a non-empty agent type name')
    for key, allowed in _CHOICES.items():
        if key in values and values[key] not in allowed:
            raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
                f'agent() option "{key}" must be one of '
                + ", ".join(f'"{choice}"' for choice in allowed)
                + f" (got {_shown(values[key])})"))
    schema = values.get("schema")
    if "schema" in values and check_schema:
        from ._schema import check_agent_schema  # jsonschema loads only for runs with schemas

        check_agent_schema(schema)
    return AgentOptions(label=values.get("label"), phase=values.get("phase"), schema=schema,
                        model=values.get("model"), provider=values.get("provider"),
                        effort=values.get("effort"), agent_type=values.get("agentType"),
                        isolation=values.get("isolation"),
                        failure=values.get("failure"))


def default_label(prompt: str) -> str:
    """The prompt's first line, cut to 48 characters (47 and an ellipsis) when longer."""
    first = prompt.split("\n", 1)[0]
    return first if len(first) <= _LABEL_CHARS else first[: _LABEL_CHARS - 1] + "…"
