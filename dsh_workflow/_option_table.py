"""The ``agent()`` options: one table, and every part that names an option reads it.

:data:`AGENT_OPTIONS` says, per option, the key a script writes, the field of the host's parsed
options it fills, what values it takes and what the tool's description says of it. Its readers:

- the runtime (``runtime_js/hooks.js``): the shape its error names when the options are not an
  object, handed to it at start in its config (``_engines/script/prelude.js_config``);
- the host's parse of a call's options (``_agent_options.parse_agent_options``):
  which keys exist, and each one's value rule;
- ``check``'s lint (``_cli/lint.py``): unknown keys, literal values outside the choices;
- the tool's description (``_tool/texts.py``): the ``opts:`` list;
- the manual's table of options (``docs/scripts.md``) and the conformance kit
  (``testing/_suite_hooks.py``), checked against it by tests.

Adding an option is a row here, a field of ``AgentOptions`` (``_agent_options``)
and what the option does; ``tests/unit/test_option_table.py`` adds a fake row and sees every
reader take it. Pure Python without pydantic or ``dataclasses``: the sandbox process reads it
(the runtime's config).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = ["AGENT_OPTIONS", "EFFORTS", "FAILURE_MODES", "ISOLATIONS", "AgentOption", "OptionKind",
           "agent_option_names", "agent_options_shape"]

#: How an option's value is checked (``null`` always counts as absent):
#: ``text`` any string; ``name`` a string of at most 256 characters (``nonempty``: not ``""``);
#: ``choice`` one of :attr:`AgentOption.choices`; ``schema`` a JSON Schema through the schema gate.
OptionKind = Literal["text", "name", "choice", "schema"]

#: Claude Code's effort levels (``SubagentRequest.effort``).
EFFORTS: tuple[str, ...] = ("low", "medium", "high", "xhigh", "max")
#: The isolations a child can ask for (``SubagentRequest.isolation``).
ISOLATIONS: tuple[str, ...] = ("worktree",)
#: What a failed child does in the script: resolve ``null`` (the default) or reject with a
#: non-fatal ``AgentFailure`` error (docs/scripts.md, "Truthful outcomes").
FAILURE_MODES: tuple[str, ...] = ("null", "throw")


class AgentOption(NamedTuple):
    """One ``agent()`` option.

    ``name`` is the key a script writes; ``field`` the ``AgentOptions`` attribute the host's
    parse fills from it. ``described`` is what the tool's description says of it, in
    parentheses after its name (``""``: the name alone; a ``choice`` without one shows its
    choices). ``nonempty`` names, for a ``name`` option, what its value names when ``""`` is
    refused (e.g. ``"agent type name"``). A named tuple, not a dataclass: ``dataclasses``
    would cost every sandbox process start-up time.
    """

    name: str
    field: str
    kind: OptionKind
    choices: tuple[str, ...] = ()
    described: str = ""
    nonempty: str = ""

    def description(self) -> str:
        """The option as the tool's description lists it: ``name`` or ``name (what it is)``."""
        said = self.described or "|".join(f'"{choice}"' for choice in self.choices)
        return f"{self.name} ({said})" if said else self.name


#: Every ``agent()`` option, in the order messages and the description list them.
AGENT_OPTIONS: tuple[AgentOption, ...] = (
    AgentOption("label", "label", "text", described=(
        "display name, any string, need not be unique; default: the prompt's first line, up "
        "to 48 characters")),
    AgentOption("phase", "phase", "text",
                described="progress group, display only; default: the current phase(title)"),
    AgentOption("schema", "schema", "schema"),
    AgentOption("model", "model", "name"),
    AgentOption("provider", "provider", "name"),
    AgentOption("effort", "effort", "choice", EFFORTS),
    AgentOption("agentType", "agent_type", "name", nonempty="agent type name",
                described='an agent type, e.g. "general-purpose"'),
    AgentOption("isolation", "isolation", "choice", ISOLATIONS,
                described='"worktree": its own git worktree'),
    AgentOption("failure", "failure", "choice", FAILURE_MODES,
                described='"null", the default, or "throw"'),
)


def agent_option_names() -> tuple[str, ...]:
    """The keys a script may pass, in the table's order."""
    return tuple(option.name for option in AGENT_OPTIONS)


def agent_options_shape() -> str:
    """The options as one object literal's shape, ``{label, phase, ...}`` (the runtime's text)."""
    return "{" + ", ".join(agent_option_names()) + "}"
