"""``EchoProvider``: an offline, deterministic provider, and ``minimal_instance``.

``EchoProvider`` answers every request without any I/O:

- without a schema, ``text`` is ``"echo: " + prompt`` and ``structured`` is ``None``;
- with a schema, ``structured`` is :func:`minimal_instance` of the schema (strings generated
  from a ``pattern`` are seeded by the prompt) and ``text`` is that value as compact JSON;
- ``usage`` counts whitespace-separated words: of the prompt (input) and of the text (output);
- the same request gives the same result.

:func:`minimal_instance` (in ``dsh_workflow._schema_instance``) builds a small value meant to
satisfy the schema, on a worker thread and within fixed bounds: types, required properties,
enums, consts, branches, bounds, lengths, ``format`` and ``pattern`` (with ``rstr``). When the
value it built still does not satisfy the schema (``not``, contradictory constraints, a
pattern Python cannot read, ...), the child fails — ``stop_reason="error"`` with an ``error``
that says what is wrong (``error_kind="other"``: no answer was given), ``text`` the value it came
closest with — instead of answering an invalid value.
"""

from __future__ import annotations

import json
import math
from typing import Any

import anyio
import anyio.lowlevel
from pydantic import JsonValue

from .._subagent import ProviderInfo, SubagentRequest, SubagentResult, Usage

__all__ = ["EchoProvider"]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class EchoProvider:
    """Offline, deterministic :class:`~dsh_workflow.SubagentProvider` (see the module doc).

    ``latency_s`` (finite, >= 0) is slept with ``anyio.sleep`` before answering, so
    cancellation arrives as the running backend's own (trio or asyncio). Never raises except
    through cancellation; ``ValueError`` at construction for an invalid ``latency_s``.

    ``effort``, ``agent_type``, ``agent`` (its system prompt included) and ``isolation`` are
    ignored: the answer depends on the prompt and the schema alone, so scripts written for other
    providers run offline unchanged and give the same answers (it has no filesystem to isolate).
    """

    def __init__(self, latency_s: float = 0.0) -> None:
        if not _is_number(latency_s) or latency_s < 0:
            raise ValueError(f"latency_s must be a finite number >= 0, got {latency_s!r}")
        self.latency_s = float(latency_s)

    @property
    def identity(self) -> str:
        """What answers this provider's calls, for durable runs' journal keys (docs/durable-runs.md)."""
        return "echo"

    @property
    def description(self) -> str:
        """What its children can do, in one line (docs/embedding.md, "The model-facing tool")."""
        return ("offline stand-in, no model: each child answers with an echo of its prompt (a "
                "schema call with a minimal valid instance); no tools, no files")

    @property
    def info(self) -> ProviderInfo:
        """What this provider declares (:class:`~dsh_workflow.ProviderInfo`)."""
        record: dict[str, JsonValue] = {"kind": "echo"}
        if self.latency_s:
            record["latency_s"] = self.latency_s
        return ProviderInfo(kind="echo", identity=self.identity, default_model=None,
                            description=self.description, record=record)

    def __repr__(self) -> str:
        return f"EchoProvider(latency_s={self.latency_s!r})"

    async def run(self, request: SubagentRequest) -> SubagentResult:
        if self.latency_s > 0:
            await anyio.sleep(self.latency_s)
        else:
            await anyio.lowlevel.checkpoint()
        structured: Any = None
        if request.schema is None:
            text = "echo: " + request.prompt
        else:
            # a script's schema: bounded work, but never on the event loop (jsonschema loads
            # only for a call with a schema)
            from .._schema_instance import schema_instance

            structured, problems = await anyio.to_thread.run_sync(
                schema_instance, request.schema, request.prompt)
            text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
            if problems:
                usage = Usage(input_tokens=len(request.prompt.split()),
                              output_tokens=len(text.split()))
                return SubagentResult(
                    stop_reason="error", text=text, usage=usage, error_kind="other",
                    error="the echo provider cannot build a value that satisfies the schema: "
                    + "; ".join(problems))
        usage = Usage(input_tokens=len(request.prompt.split()), output_tokens=len(text.split()))
        return SubagentResult(stop_reason="completed", text=text, structured=structured, usage=usage)
