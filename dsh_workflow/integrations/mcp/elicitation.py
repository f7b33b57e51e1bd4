"""A run's questions asked of the MCP client's user with ``elicitation/create`` (SPEC §25;
docs/mcp.md, "Questions").

Contract:

- **One request per question.** :class:`ElicitingAnswers` is the engine's ``answers=`` for a
  call whose client declared the elicitation capability: each question becomes one form-mode
  ``elicitation/create`` request, tied to the ``tools/call`` being served. Its message is the
  question (and its details); its requested schema is flat (:func:`elicitation_schema`): a
  checkpoint is a boolean ``approve``, choices are a string ``answer`` with an ``enum`` (an
  array of them when ``multiple``), a plain question a string ``answer``, and an ``ask``
  schema that is already a flat object (properties of type string, number, integer or
  boolean, or arrays of enumerated strings) is sent as it is and its content is the answer.
- **What is not asked.** A nested schema cannot be a form: the question is left open, as are
  questions the user declines or cancels, and questions a connection with no channel back to
  the client cannot carry. With nobody else to answer, the run parks, and the tool's text lists
  those questions and the answer tool (:mod:`dsh_workflow._tool.texts`).
- The content the client returns is the answer before the engine's check; an invalid one
  never reaches the script (the engine keeps the question open, and the run parks).
- Answers are recorded as given by ``mcp``.
"""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, NoBackChannelError

from ..._questions import Question

__all__ = ["ElicitingAnswers", "NotElicited", "client_can_elicit", "elicitation_schema"]

_FLAT = ("string", "number", "integer", "boolean")
_FIELD_TITLE = 200  # characters of a question shown as a field's title


class NotElicited(LookupError):
    """The question was not answered through elicitation (it stays open)."""


def client_can_elicit(session: ServerSession) -> bool:
    """Whether the client on ``session`` declared the elicitation capability."""
    return session.check_client_capability(
        types.ClientCapabilities(elicitation=types.ElicitationCapability()))


def _flat_property(schema: object) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind in _FLAT:
        return True
    items = schema.get("items")
    return kind == "array" and isinstance(items, dict) and items.get("type", "string") == "string" \
        and isinstance(items.get("enum"), list)


def elicitation_schema(question: Question) -> tuple[dict[str, Any], str | None] | None:
    """The flat requested schema for ``question`` and the property that holds the answer
    (None: the whole content is the answer); None when the question cannot be a form."""
    title = question.question[:_FIELD_TITLE]
    if question.kind == "checkpoint":
        field: dict[str, Any] = {"type": "boolean", "title": title, "description":
                                 "true approves, false rejects"}
        if isinstance(question.default, bool):
            field["default"] = question.default
        return {"type": "object", "properties": {"approve": field},
                "required": ["approve"]}, "approve"
    if question.choices is not None:
        choices = list(question.choices)
        field = {"type": "array", "title": title, "items": {"type": "string", "enum": choices},
                 "uniqueItems": True} if question.multiple else \
            {"type": "string", "title": title, "enum": choices}
        return {"type": "object", "properties": {"answer": field},
                "required": ["answer"]}, "answer"
    schema = question.schema
    if schema is None or schema == {"type": "string"}:
        return {"type": "object", "properties": {"answer": {"type": "string", "title": title}},
                "required": ["answer"]}, "answer"
    properties = schema.get("properties")
    if schema.get("type") == "object" and isinstance(properties, dict) \
            and all(_flat_property(p) for p in properties.values()) \
            and not any(key in schema for key in ("$defs", "$ref", "allOf", "anyOf", "oneOf",
                                                  "patternProperties")):
        return schema, None
    return None


class ElicitingAnswers:
    """Answers a run's questions by asking the client on ``session`` (see the module
    docstring); ``related_request_id`` is the ``tools/call`` the requests belong to."""

    #: Who answered, as the run records it (``QuestionAnswered.by``).
    answered_by = "mcp"

    def __init__(self, session: ServerSession, *,
                 related_request_id: types.RequestId | None = None) -> None:
        self._session = session
        self._related = related_request_id

    async def answer(self, question: Question) -> Any:
        """The user's answer, or :class:`NotElicited` (the question stays open)."""
        shape = elicitation_schema(question)
        if shape is None:
            raise NotElicited(f"{question.qid}: its schema is not flat enough for a form")
        schema, field = shape
        message = question.question + (f"\n\n{question.details}" if question.details else "")
        try:
            result = await self._session.elicit_form(message, schema,
                                                     related_request_id=self._related)
        except NoBackChannelError:
            raise NotElicited(f"{question.qid}: no channel back to the client") from None
        except MCPError as exc:
            raise NotElicited(f"{question.qid}: the client's elicitation failed: "
                              f"{exc.error.message}") from None
        if result.action != "accept" or result.content is None:
            raise NotElicited(f"{question.qid}: the user did not answer ({result.action})")
        if field is None:
            return dict(result.content)
        if field not in result.content:
            raise NotElicited(f"{question.qid}: the form came back without {field!r}")
        return result.content[field]
