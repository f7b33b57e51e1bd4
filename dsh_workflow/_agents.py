"""Agent definitions: named kinds of child (``agent(prompt, {agentType})``), read from Markdown.

A definition file is Markdown with a YAML front matter block::

    ---
    name: code-reviewer
    description: Reviews a diff for bugs
    model: sonnet            # optional; "inherit" (or absent) leaves the call's model alone
    tools: Read, Grep, Glob  # optional; a comma-separated string or a YAML list
    ---
    You are a careful code reviewer. ...

The body after the closing ``---`` is the system prompt. :class:`AgentRegistry` loads every
``*.md`` file of each folder (in name order), first hit by ``name`` wins across folders in the
order given; the built-in ``general-purpose`` type (no system prompt) always exists unless a file
defines that name itself.

A file that cannot be used (no front matter, YAML that does not parse or is nested too deeply
to parse, a front matter that is not a mapping, a ``name``/``model``/``tools`` of the wrong
type) is skipped, logged at WARNING with its path and reason, and kept in
:attr:`AgentRegistry.problems`; ``strict=True`` raises ``ValueError`` listing every problem
instead. Skipping is the default because the user folder
(``~/.claude/agents``) is shared with other tools, and one foreign or half-written file there
must not stop every workflow; the CLI prints the problems as warnings.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import WorkflowError, WorkflowErrorCode
from ._library import read_regular_text
from ._subagent import AgentDefinition

__all__ = ["GENERAL_PURPOSE", "AgentProblem", "AgentRegistry", "parse_agent_file"]

logger = logging.getLogger("dsh_workflow.agents")

GENERAL_PURPOSE = AgentDefinition(
    name="general-purpose",
    description="General-purpose agent for researching complex questions and executing "
                "multi-step tasks (built in; no system prompt of its own).")

#: ``model`` values that mean "no model of its own": the call's (or the provider's) applies.
_INHERIT = frozenset({"inherit", "default", ""})


@dataclass(frozen=True)
class AgentProblem:
    """A definition file that was skipped, and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class _Unusable(ValueError):
    pass


def _split_front_matter(text: str) -> tuple[str, str]:
    """(front matter, body) of a Markdown file that starts with a ``---`` line."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise _Unusable("no YAML front matter (the file must start with a '---' line)")
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            return "".join(lines[1:index]), "".join(lines[index + 1:])
    raise _Unusable("the YAML front matter is not closed by a '---' line")


_TOP_KEY = re.compile(r"^([A-Za-z_][\w-]*):[ \t]+(\S.*?)\s*$")


def _quote_plain_values(head: str) -> str:
    """Front matter with each top-level one-line plain value quoted.

    Hand-written definitions often carry unquoted descriptions such as
    ``description: Use when: the user asks ...``, which YAML refuses (``: `` inside a plain
    scalar). Quoting those values (a JSON string is a YAML double-quoted scalar) keeps their text
    exactly; values that already start as YAML syntax (quotes, block or flow) are left alone."""
    out = []
    for line in head.splitlines():
        found = _TOP_KEY.match(line)
        if found and found.group(2)[0] not in "\"'|>[{&*!#":
            line = f"{found.group(1)}: {json.dumps(found.group(2), ensure_ascii=False)}"
        out.append(line)
    return "\n".join(out) + "\n"


def _load_front(head: str) -> object:
    """The front matter as data. YAML nested deeper than the parser's recursion allows
    (``RecursionError``, raised by PyYAML's recursive-descent parser) is an unusable file like
    any other, never an error that escapes the registry."""
    if not head.strip():
        return {}
    if _flow_depth(head) > _MAX_FLOW_DEPTH:
        raise _Unusable(_TOO_DEEP)  # refused before PyYAML spends seconds on it
    import yaml  # here: only a definition file with front matter needs it

    try:
        return yaml.safe_load(head)
    except RecursionError:
        raise _Unusable(_TOO_DEEP) from None
    except yaml.YAMLError as exc:
        try:
            return yaml.safe_load(_quote_plain_values(head))
        except RecursionError:
            raise _Unusable(_TOO_DEEP) from None
        except yaml.YAMLError:
            raise _Unusable("the YAML front matter does not parse: " + " ".join(str(exc).split())) from None


_TOO_DEEP = "the YAML front matter is nested too deeply to parse"
#: Flow collections (``[...]``, ``{...}``) nested deeper than this are refused unparsed; no
#: definition needs more than a few levels, and PyYAML takes seconds to fail on thousands.
_MAX_FLOW_DEPTH = 100


def _flow_depth(head: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``head``, counting brackets inside quoted text
    too: an over-estimate, which only matters past :data:`_MAX_FLOW_DEPTH`."""
    depth = deepest = 0
    for char in head:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}" and depth:
            depth -= 1
    return deepest


def _tools(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = [item.strip() for item in value]
    else:
        raise _Unusable("'tools' must be a comma-separated string or a list of strings")
    return tuple(item for item in items if item)


def _text_field(front: Mapping[str, Any], key: str) -> str | None:
    value = front.get(key)
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # e.g. `model: 4` — YAML's typing, not the author's intent
    if not isinstance(value, str):
        raise _Unusable(f"'{key}' must be a string (got {type(value).__name__})")
    return value


def parse_agent_file(text: str, *, fallback_name: str) -> AgentDefinition:
    """One definition from a file's text; ``fallback_name`` (the file's stem) is used when the
    front matter has no ``name``. Raises ``ValueError`` saying what makes the file unusable."""
    head, body = _split_front_matter(text)
    front = _load_front(head)
    if not isinstance(front, dict):
        raise _Unusable("the YAML front matter must be a mapping of keys to values")
    name = (_text_field(front, "name") or fallback_name).strip()
    if not name:
        raise _Unusable("the definition has no name")
    model = _text_field(front, "model")
    model = None if model is None or model.strip().lower() in _INHERIT else model.strip()
    return AgentDefinition(name=name, description=(_text_field(front, "description") or "").strip(),
                           system_prompt=body.strip(), model=model, tools=_tools(front.get("tools")))


class AgentRegistry:
    """Agent definitions by name, loaded once from folders of ``*.md`` files.

    ``paths`` are searched in order (a missing folder is simply empty); the first definition of
    a name wins. ``general-purpose`` is always known. Files that cannot be used are skipped and
    listed in :attr:`problems` (``strict=True``: ``ValueError`` listing them all instead).
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = (), *,
                 strict: bool = False) -> None:
        self.paths: tuple[Path, ...] = tuple(Path(p).expanduser() for p in paths)
        self._by_name: dict[str, AgentDefinition] = {}
        self._origin: dict[str, str] = {}
        problems: list[AgentProblem] = []
        for folder in self.paths:
            if not folder.is_dir():
                continue
            for file in sorted(folder.glob("*.md")):
                if not file.is_file():
                    continue
                try:
                    definition = parse_agent_file(read_regular_text(file),  # never blocks
                                                  fallback_name=file.stem)
                except (OSError, UnicodeDecodeError, ValueError) as exc:
                    problems.append(AgentProblem(str(file), str(exc)))
                    continue
                if definition.name in self._by_name:
                    continue  # an earlier folder (or file) defines it: first hit wins
                self._by_name[definition.name] = definition
                self._origin[definition.name] = str(file)
        self._by_name.setdefault(GENERAL_PURPOSE.name, GENERAL_PURPOSE)
        self.problems: tuple[AgentProblem, ...] = tuple(problems)
        if problems and strict:
            raise ValueError("agent definitions that cannot be used:\n"
                             + "\n".join(f"  {problem}" for problem in problems))
        for problem in problems:
            logger.warning("dsh-workflow: skipped agent definition %s", problem)

    @classmethod
    def default_paths(cls, *, cwd: str | os.PathLike[str] | None = None) -> list[Path]:
        """The default search path: ``.claude/agents`` under ``cwd`` (the current directory),
        then ``~/.claude/agents``."""
        base = Path(cwd) if cwd is not None else Path.cwd()
        return [base / ".claude" / "agents", Path.home() / ".claude" / "agents"]

    @classmethod
    def default(cls, extra: Iterable[str | os.PathLike[str]] = (), *,
                cwd: str | os.PathLike[str] | None = None,
                strict: bool = False) -> AgentRegistry:
        """A registry over ``extra`` folders first, then :meth:`default_paths`."""
        return cls([*extra, *cls.default_paths(cwd=cwd)], strict=strict)

    @classmethod
    def from_definitions(cls, definitions: Iterable[AgentDefinition]) -> AgentRegistry:
        """A registry of the given definitions (first of a name wins) plus ``general-purpose``."""
        registry = cls(())
        by_name: dict[str, AgentDefinition] = {}
        for definition in definitions:
            if not isinstance(definition, AgentDefinition):
                raise TypeError("from_definitions() takes AgentDefinition objects")
            by_name.setdefault(definition.name, definition)
        by_name.setdefault(GENERAL_PURPOSE.name, GENERAL_PURPOSE)
        registry._by_name = by_name
        return registry

    # ---- lookups --------------------------------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        """Every known type, sorted."""
        return tuple(sorted(self._by_name))

    @property
    def definitions(self) -> dict[str, AgentDefinition]:
        """Every definition by name (a copy), sorted by name."""
        return {name: self._by_name[name] for name in self.names}

    def get(self, name: str) -> AgentDefinition | None:
        return self._by_name.get(name)

    def __getitem__(self, name: str) -> AgentDefinition:
        return self._by_name[name]

    def origin(self, name: str) -> str | None:
        """The file a definition came from (None for built-in or programmatic ones)."""
        return self._origin.get(name)

    def resolve(self, name: str) -> AgentDefinition:
        """The definition of ``name``; an unknown type is ``INVALID_ARGUMENT`` listing the
        known types."""
        definition = self._by_name.get(name)
        if definition is None:
            raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
                f'agent() option "agentType": unknown agent type "{name}" (known types: '
                + ", ".join(self.names) + ")"))
        return definition

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[AgentDefinition]:
        return iter([self._by_name[name] for name in self.names])

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"AgentRegistry(paths={[str(p) for p in self.paths]!r}, names={list(self.names)!r})"
