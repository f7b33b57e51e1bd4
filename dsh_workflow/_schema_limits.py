"""The bounds of every schema check (:class:`SchemaLimits`), without the checks themselves.

The engine needs these limits for every run, but jsonschema (the checks of :mod:`._schema`)
only for a run whose script passes a schema: keeping them apart lets a run without schemas
start without loading jsonschema (docs/cli.md: start-up time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_LIMITS", "SchemaLimits"]


@dataclass(frozen=True)
class SchemaLimits:
    """The bounds every check here works within (``EngineConfig`` fields of the same names).

    The defaults sit far above what models write (their schemas are a few kilobytes: tens of
    subschemas, a few short patterns). Measured on a loaded 2-core machine, the worst schema
    within them (1,000 empty subschemas) takes the gate about 0.25 s and the worst value about
    0.25 s of one worker thread; the event loop only does the size walk (about 2 ms).
    """

    max_schema_chars: int = 100_000
    """Longest canonical JSON text (sorted keys, no spaces) of one schema."""
    max_schema_nodes: int = 1_000
    """Most JSON values (objects, arrays, strings, numbers, ...) one schema may hold."""
    max_pattern_cost: int = 20_000
    """Most compiled-size units (:func:`._patterns.pattern_cost`) of patterns one check
    compiles: all patterns of a schema at the gate, all ``format: "regex"`` strings of a value."""
    max_validation_steps: int = 20_000
    """Most keyword applications one value validation may make."""

    @classmethod
    def of(cls, config: Any) -> SchemaLimits:
        """The limits of an ``EngineConfig`` (or anything with these attributes)."""
        return cls(max_schema_chars=config.max_schema_chars,
                   max_schema_nodes=config.max_schema_nodes,
                   max_pattern_cost=config.max_pattern_cost,
                   max_validation_steps=config.max_validation_steps)


DEFAULT_LIMITS = SchemaLimits()
