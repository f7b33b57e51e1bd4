"""What every engine does in ``start()`` before a run exists: the checks, in the seam's order,
and the run object they lead to."""

from __future__ import annotations

import enum
import json
import math
import uuid
from dataclasses import dataclass
from typing import Any

from anyio.abc import TaskGroup

from .._agents import AgentRegistry
from .._config import EngineConfig
from .._depth import deeper_than
from .._errors import WorkflowError, WorkflowErrorCode
from .._events import EventHub
from .._library import WorkflowLibrary
from .._meta import WorkflowMeta, parse_meta
from .._questions import AnswerProvider
from .._request import WorkflowStartRequest
from .._script import check_body, run_header
from .._secrets import RedactingProvider, run_secrets
from .._store import RunStore
from .._subagent import SubagentProvider, provider_identity, provider_info
from .host.faults import RetryGates
from .host.host import HostedRun
from .host.journal import EventRecorder, RunJournal, check_resume
from .host.pricing import unpriced_defaults
from .script.prelude import body_line_offset

__all__ = ["Admission", "EngineState", "admit", "check_agents", "check_answers", "check_library",
           "check_priced",
           "encode_args", "hosted_run",
           "resolve_budget", "resolve_budget_usd", "resolve_provider", "resolve_total_cap"]


class EngineState(enum.Enum):
    UNOPENED = "unopened"  # constructed; start() refused
    OPEN = "open"          # inside `async with`; start() accepted
    CLOSED = "closed"      # the block was left; every run was disposed; start() refused


@dataclass(frozen=True)
class Admission:
    """A start request that passed every start-time check."""

    meta: WorkflowMeta
    script: str
    provider: SubagentProvider
    max_total_agents: int
    args_text: str | None
    parent: Any
    budget_tokens: int | None = None
    budget_usd: float | None = None
    args: Any = None
    resume_from: str | None = None
    rerun: frozenset[int] = frozenset()


def check_agents(value: object) -> AgentRegistry | None:
    """An engine's ``agents=``: an :class:`~dsh_workflow.AgentRegistry` or None."""
    if value is not None and not isinstance(value, AgentRegistry):
        raise TypeError("agents must be an AgentRegistry (or None), e.g. "
                        f"AgentRegistry.default() (got {type(value).__name__})")
    return value


def resolve_total_cap(value: object, ceiling: int) -> int:
    """The per-run total-agent cap: ``value`` if given (it may only lower ``ceiling``)."""
    if value is None:
        return ceiling
    if type(value) is not int or value < 1:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            f"max_total_agents must be a positive integer (got {value!r})")
    if value > ceiling:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
            f"max_total_agents {value} exceeds the engine ceiling (max_total_agents={ceiling}); "
            "a run may only lower it"))
    return value


def resolve_budget(value: object, ceiling: int | None) -> int | None:
    """The run's token budget: ``value`` if given (it may only lower ``ceiling``; None is
    unlimited), else ``ceiling``."""
    if value is None:
        return ceiling
    if type(value) is not int or value < 1:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            f"budget_tokens must be a positive integer (got {value!r})")
    if ceiling is not None and value > ceiling:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
            f"budget_tokens {value} exceeds the engine's budget (budget_tokens={ceiling}); a "
            "run may only lower it"))
    return value


def resolve_budget_usd(value: object, ceiling: float | None) -> float | None:
    """The run's dollar budget: ``value`` if given (it may only lower ``ceiling``; None is
    unlimited), else ``ceiling``."""
    if value is None:
        return ceiling
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            f"budget_usd must be a positive number of dollars (got {value!r})")
    if ceiling is not None and value > ceiling:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
            f"budget_usd {value:g} exceeds the engine's budget (budget_usd={ceiling:g}); a run "
            "may only lower it"))
    return float(value)


def resolve_provider(value: object, default: SubagentProvider) -> SubagentProvider:
    """The run's provider: ``value`` if given, which must have an async ``run(request)``."""
    if value is None:
        return default
    if not callable(getattr(value, "run", None)):
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
            f"provider must be a SubagentProvider with an async run(request) method "
            f"(got {type(value).__name__})"))
    return value  # type: ignore[return-value]  # duck-checked just above


def encode_args(args: Any, max_depth: int | None = None) -> str | None:
    """``args`` as ASCII JSON text for the runtime, or None when absent; refused when nested
    deeper than ``max_depth`` (the runtime parses it recursively)."""
    if args is None:
        return None
    if max_depth is not None and deeper_than(args, max_depth):
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
            f"args are nested deeper than max_value_depth={max_depth} levels"))
    try:
        return json.dumps(args, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            f"args must be JSON data ({exc})") from None


def admit(request: object, *, default_provider: SubagentProvider,
          config: EngineConfig, store: RunStore | None = None) -> Admission:
    """The start-time checks every engine makes, in the seam's order.

    Raises ``TypeError`` for something that is not a :class:`WorkflowStartRequest`, and
    :class:`~dsh_workflow.WorkflowError` for invalid meta (``META_INVALID``), a body that does
    not parse (``SCRIPT_PARSE``), a bad provider, total-agent cap or args (``INVALID_ARGUMENT``).
    Runs no script code and emits nothing.
    """
    if not isinstance(request, WorkflowStartRequest):
        raise TypeError("start() takes a WorkflowStartRequest")
    meta = parse_meta(request.meta)
    check_body(request.script)
    provider = resolve_provider(request.provider, default_provider)
    max_total = resolve_total_cap(request.max_total_agents, config.max_total_agents)
    budget = resolve_budget(request.budget_tokens, config.budget_tokens)
    budget_usd = resolve_budget_usd(request.budget_usd, config.budget_usd)
    if budget_usd is not None:
        check_priced(provider, config)
    try:
        resume_from = check_resume(store, request.resume_from)
    except ValueError as exc:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, str(exc)) from None
    rerun = check_rerun(request.rerun, resume_from)
    return Admission(meta=meta, script=request.script, provider=provider,
                     max_total_agents=max_total,
                     args_text=encode_args(request.args, config.max_value_depth),
                     parent=request.parent, budget_tokens=budget, budget_usd=budget_usd,
                     args=request.args, resume_from=resume_from, rerun=rerun)


def check_priced(provider: SubagentProvider, config: EngineConfig) -> None:
    """Under a dollar budget, every default model of ``provider`` (its own and each route's)
    must have a price (``model_prices`` or the price data), else the budget could count
    nothing: refused with ``INVALID_ARGUMENT`` naming the models and both fixes. Loads the
    price data when not yet loaded (an engine with ``budget_usd`` loads it on entry)."""
    missing = unpriced_defaults(provider, config.model_prices)
    if not missing:
        return
    names = ", ".join(repr(m) for m in missing)
    first = missing[0]
    raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
        f"the dollar budget cannot be enforced: model{'s' if len(missing) > 1 else ''} {names} "
        f"{'have' if len(missing) > 1 else 'has'} no price. Give the price in dollars per "
        f"million input and output tokens (--price {first}=IN/OUT, or EngineConfig.model_prices"
        f"={{{first!r}: (IN, OUT)}}), or limit tokens instead (--budget N, budget_tokens)"))


def check_rerun(rerun: object, resume_from: str | None) -> frozenset[int]:
    """The seqs to run live again: whole numbers >= 1, and only when resuming a run."""
    if not rerun:
        return frozenset()
    if not isinstance(rerun, frozenset | set | tuple | list) \
            or not all(type(seq) is int and seq >= 1 for seq in rerun):
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            f"rerun must be seqs of agent() calls (whole numbers >= 1), got "
                            f"{rerun!r}")
    if resume_from is None:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            "rerun names calls of the run being resumed: it needs resume_from")
    return frozenset(rerun)


def hosted_run(admission: Admission, *, config: EngineConfig, events: EventHub,
               task_group: TaskGroup, agents: AgentRegistry | None = None,
               recorder: tuple[RunStore, EventRecorder] | None = None,
               library: WorkflowLibrary | None = None,
               gates: RetryGates | None = None, answers: AnswerProvider | None = None,
               park: bool = False) -> HostedRun:
    """The host side of an admitted run (its runtime is attached by the engine); ``agents``
    resolves ``agentType`` at each call; with a ``recorder`` (the engine's store and event
    listener) the run is durable; ``answers`` and ``park`` say who answers its questions."""
    run_id = str(uuid.uuid4())
    journal = None
    if recorder is not None:
        store, listener = recorder
        journal = RunJournal(store, run_id, meta=admission.meta.model_dump(mode="json"),
                             script=admission.script, args=admission.args,
                             resumed_from=admission.resume_from,
                             identity=provider_identity(admission.provider),
                             provider=admission.provider, rerun=admission.rerun,
                             model_aliases=config.model_aliases)
        listener.journals[run_id] = journal
    declared = provider_info(admission.provider)  # before any wrapper: the run's provider itself
    secrets = run_secrets(admission.provider)
    # Every answer is cleared of the run's secrets before anything records or shows it.
    provider: SubagentProvider = RedactingProvider(admission.provider, secrets)
    if journal is not None and journal.calls is not None:
        provider = journal.calls.wrap(provider)  # each call's answer goes into its record
    return HostedRun(run_id=run_id, meta=admission.meta, config=config, journal=journal,
                     library=library,
                     provider=provider, secrets=secrets,
                     max_total_agents=admission.max_total_agents,
                     parent=admission.parent, budget_tokens=admission.budget_tokens,
                     budget_usd=admission.budget_usd,
                     events=events, task_group=task_group,
                     body_line_offset=body_line_offset(),
                     body_header_chars=len(run_header(admission.script)), agents=agents,
                     declared=declared, gates=gates, answers=answers, park=park)


def check_answers(value: object) -> AnswerProvider | None:
    """An engine's ``answers=``: an :class:`~dsh_workflow.AnswerProvider` (an object with an
    async ``answer(question)``) or None."""
    if value is not None and not callable(getattr(value, "answer", None)):
        raise TypeError("answers must be an AnswerProvider with an async answer(question) "
                        f"method, e.g. dsh_workflow.testing.AutoAnswer (got "
                        f"{type(value).__name__})")
    return value  # type: ignore[return-value]  # duck-checked just above


def check_library(value: object) -> WorkflowLibrary | None:
    """An engine's ``library=`` argument: a :class:`WorkflowLibrary` or None."""
    if value is not None and not isinstance(value, WorkflowLibrary):
        raise TypeError("library must be a WorkflowLibrary (or None)")
    return value
