"""Engine configuration: every cap and limit a deployment can set, with its unit and default."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._depth import MAX_VALUE_DEPTH_CEILING, STACK_BYTES_PER_LEVEL

__all__ = ["EngineConfig", "RetryPolicy"]


class RetryPolicy(BaseModel):
    """How the engine retries a child whose provider failed with ``rate_limited``,
    ``overloaded``, ``server`` or ``network`` (``SubagentResult.error_kind``): up to
    ``attempts`` calls in all (1: no retry), waiting an exponential backoff from ``base_s``
    doubling up to ``cap_s``, with full jitter; a ``Retry-After`` (or a CLI's reset time) within
    ``cap_s`` replaces the backoff and pauses every child of that provider identity. A reset
    beyond ``cap_s`` is a ``limit`` (docs/providers.md, "Faults and retries")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempts: int = Field(3, ge=1, le=20)
    base_s: float = Field(1.0, ge=0, allow_inf_nan=False)
    cap_s: float = Field(60.0, ge=0, allow_inf_nan=False)


class EngineConfig(BaseModel):
    """Caps and limits shared by every run of one engine.

    Each limit, when hit, ends the offending call or run with an error that names the setting
    and its configured value, so a model can correct its script.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_concurrent_agents: int = Field(
        16, ge=1, description="Children running at once per run; more calls queue in FIFO order. "
        "A cap on I/O-bound work, never derived from the CPU count.")
    max_total_agents: int = Field(
        1000, ge=1, description="Accepted agent() calls per run (a runaway-loop backstop; "
        "AGENT_CAP past it). Also the ceiling for a per-run override.")
    max_items_per_call: int = Field(
        4096, ge=1, description="Longest array one parallel()/pipeline() accepts (ITEM_CAP).")
    memory_limit_bytes: int = Field(
        64 * 1024 * 1024, ge=1024 * 1024, description="JavaScript heap per run (RESOURCE_LIMIT).")
    stack_limit_bytes: int = Field(
        1024 * 1024, ge=64 * 1024, le=4 * 1024 * 1024, description="JavaScript stack per run (RESOURCE_LIMIT).")
    slice_cpu_limit_s: float = Field(
        5.0, gt=0, description="CPU seconds any single synchronous stretch of script may use, "
        "wherever it occurs, including promise-job loops (RESOURCE_LIMIT).")
    run_timeout_s: float | None = Field(
        None, gt=0, description="Wall-clock limit of a whole run; None is unlimited (TIMEOUT).")
    agent_timeout_s: float | None = Field(
        None, gt=0, description="Wall-clock limit of one child; past it the child is cancelled "
        "and agent() resolves null (outcome 'timeout').")
    max_failed_agents: int | None = Field(
        None, ge=0, description="Failure ceiling: once more than this many children of a run "
        "have failed, the run ends with fatal AGENT_FAILED naming the count and the most "
        "frequent reason; None is no ceiling.")
    dispose_grace_s: float = Field(
        5.0, ge=0, description="How long dispose() and cancellation wait for children and the "
        "script thread before giving up on them.")
    max_prompt_chars: int = Field(
        1_000_000, ge=1, description="Longest prompt one agent() call may send (INVALID_ARGUMENT).")
    max_log_chars: int = Field(
        10_000, ge=80, description="Longest log()/phase() text kept; longer text is cut with a "
        "'[truncated]' marker.")
    warm_runtimes: int = Field(
        0, ge=0, le=64, description="Script runtimes an engine keeps prepared (context created, "
        "runtime loaded, each on its own idle thread owned by the engine) so a run starts "
        "without that millisecond; each still serves exactly one run. 0 prepares every runtime "
        "when its run starts, so no thread exists beyond the runs in flight (and, for 0.1 s after "
        "the last start, the one that starts their threads).")
    max_refused_calls: int = Field(
        100, ge=1, description="agent() calls a run may have refused (bad options, a tripped "
        "cap) before the run ends with RESOURCE_LIMIT: a script retrying a call that can never "
        "succeed would otherwise spin forever.")
    max_log_events: int = Field(
        10_000, ge=1, description="phase()/log() events one run may emit; later ones are dropped "
        "after a single notice.")
    max_error_chars: int = Field(
        10_000, ge=200, description="Longest error text of a result; longer text is cut with a "
        "'[truncated: N more characters]' marker.")
    budget_tokens: int | None = Field(
        None, ge=1, description="Tokens (input + output, as providers report them) one run may "
        "spend; None is unlimited. Once a run's children have reported that many, every later "
        "agent() call, queued ones included, throws fatal BUDGET_EXCEEDED. A start request may "
        "only lower it.")
    budget_usd: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="US dollars one run may spend, as its "
        "children's costs say (Usage.cost_usd: reported by the provider or priced from the "
        "model); None is unlimited. A hard ceiling like budget_tokens: once the known costs "
        "reach it, every later agent() call throws fatal BUDGET_EXCEEDED naming dollars. "
        "Never silently unenforced: a run whose provider's default model has no price is "
        "refused at start (INVALID_ARGUMENT), and a child whose cost cannot be computed ends "
        "the run with BUDGET_EXCEEDED (a warning when budget_tokens is set too).")
    model_aliases: dict[str, str] = Field(
        default_factory=dict, description="Model names to replace before a request reaches the "
        "provider, e.g. {'sonnet': 'gpt-4.1'}: applies to a call's `model` and to an agent "
        "definition's model alike; a name without an alias passes unchanged.")
    model_prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="Prices of models the price data does not know (a "
        "self-hosted or brand-new model), in US dollars per million input and output tokens, "
        "e.g. {'my-model': (0.5, 1.5)}; they win over the price data.")
    retry: RetryPolicy = Field(
        default_factory=RetryPolicy, description="Retries of children whose provider was rate "
        "limited, overloaded, failed on the server or the network (RetryPolicy).")
    on_limit: Literal["park", "fail"] = Field(
        "park", description="What a child failing on a provider's usage limit (error_kind "
        "'limit': a CLI's usage limit, an HTTP 429 whose reset is beyond the retry cap) does: "
        "'park' stops the run waiting (stop_reason 'waiting', waiting_reason 'limit', "
        "resume_after) so a later resume continues it; 'fail' fails the child as any fault.")
    max_value_depth: int = Field(
        256, ge=8, le=MAX_VALUE_DEPTH_CEILING, description="Deepest nesting of a value leaving the script "
        "(return value, agent() options) (RESULT_UNSERIALIZABLE / INVALID_ARGUMENT).")
    max_schema_chars: int = Field(
        100_000, ge=1_000, description="Longest agent() schema, in characters of its canonical "
        "JSON (sorted keys, no spaces); a longer one is refused with UNSUPPORTED_SCHEMA. Models "
        "write schemas of a few kilobytes.")
    max_schema_nodes: int = Field(
        1_000, ge=50, description="Most JSON values (objects, arrays, strings, numbers, ...) one "
        "agent() schema may hold (UNSUPPORTED_SCHEMA past it). Checking a schema against the "
        "JSON Schema metaschema costs about a quarter of a millisecond per subschema, on a "
        "worker thread; this bounds it (about 0.25 s at the default).")
    max_pattern_cost: int = Field(
        20_000, ge=100, description="Most units of compiled regular expression one check may "
        "build: the patterns of one agent() schema together (UNSUPPORTED_SCHEMA past it), or "
        "the format: regex strings of one child value. A pattern's cost is its length with "
        "every counted repeat multiplied out ('(a{100}){100}' costs about 10,000), which is what "
        "compiling it expands to.")
    max_validation_steps: int = Field(
        20_000, ge=100, description="Most keyword applications one validation of a child's "
        "structured value may make; past it the value is rejected (agent() resolves null, "
        "outcome 'failed') and the reason is logged. Bounds schemas whose anyOf/allOf/$ref "
        "chains fan out exponentially.")

    @field_validator("model_prices")
    @classmethod
    def _prices_are_amounts(cls, value: dict[str, tuple[float, float]]
                            ) -> dict[str, tuple[float, float]]:
        for model, pair in value.items():
            if not model or not all(math.isfinite(p) and p >= 0 for p in pair):
                raise ValueError(f"model_prices[{model!r}] must be two finite amounts >= 0 "
                                 f"(dollars per million input and output tokens), got {pair!r}")
        return value

    @model_validator(mode="after")
    def _stack_holds_deepest_value(self) -> EngineConfig:
        # Values entering the script are parsed recursively by the engine: the stack must hold
        # one nested max_value_depth deep (the boundary copying values out is iterative).
        need = STACK_BYTES_PER_LEVEL * self.max_value_depth
        if self.stack_limit_bytes < need:
            raise ValueError(
                f"stack_limit_bytes={self.stack_limit_bytes} cannot hold a value nested "
                f"max_value_depth={self.max_value_depth} deep: it needs at least {need} bytes "
                f"({STACK_BYTES_PER_LEVEL} per level); raise stack_limit_bytes or lower "
                "max_value_depth")
        return self
