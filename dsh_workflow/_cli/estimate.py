"""``run --estimate`` and ``run --confirm-above N``: what a run will cost, before it starts.

Contract:

- :func:`estimate` runs the script offline: on the run's engine (``--engine``) with the run's
  limits (its wall-clock and agent time limits removed, so the projection sees the whole
  script; its budgets kept, so the script's ``budget`` global reads as in the real run)
  against :class:`~dsh_workflow.EchoProvider`, with the run's agent
  definitions, model aliases and saved workflows, and **no run store**: no provider is called
  and nothing is recorded. Each ``agent()`` call that starts is counted, by phase and by model
  (the call's model, else the definition's, else the ``--model`` given, else "default").
- The projection is a range, because echo answers are not a model's: a call's input tokens are
  its prompt's (and system prompt's) characters divided by 4 (low) and by 3 (high) — plus its
  schema's, for a schema call; its output tokens are :data:`OUTPUT_TOKENS` (100 to 2,000). The
  dollar range prices both ends by the rules a run prices its children by (``--price`` first,
  Claude Code's aliases, then ``genai-prices``); calls to models without a price are counted as
  unpriced. Branches that depend on what a model answers
  follow the echo answers, so the count is the shape of one plausible run.
- :func:`confirm` shows the estimate on stderr and, when its agent calls exceed ``above``, asks
  ``Start the run? [y/N]`` on the terminal; without one (stdin not a terminal) it refuses
  unless ``--yes`` was given. Refusing is a :class:`CliError` (exit status 2), so nothing runs.
- The confirmation binds the run: the real run's provider is wrapped in a
  :class:`ConfirmationGate` that lets through as many agent calls as the estimate showed;
  the first call past them stops and asks again on the terminal (``--yes`` answered only the
  question about what was shown); without a terminal, or on any answer but yes, the run is
  cancelled with a reason that says why, before that call reaches the provider.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import CliError
from .options import at_least_zero

if TYPE_CHECKING:  # loaded where used: declaring the options must stay cheap (start-up time)
    from dsh_workflow import AgentStarted, SubagentRequest, SubagentResult, WorkflowEvent

    from .plan import Plan

__all__ = ["OUTPUT_TOKENS", "ConfirmationGate", "Estimate", "add_estimate_options", "confirm", "estimate",
           "estimate_text", "print_estimate"]

#: Output tokens assumed per call (low, high): echo answers say nothing about a model's length.
OUTPUT_TOKENS = (100, 2_000)
#: Characters per token assumed (low estimate, high estimate) for a call's input.
_CHARS_PER_TOKEN = (4, 3)
_DEFAULT_MODEL = "default"
_NO_PHASE = "(no phase)"


def add_estimate_options(run: argparse.ArgumentParser) -> None:
    """Declare ``--estimate``, ``--confirm-above N`` and ``--yes`` on ``run``."""
    run.add_argument("--estimate", action="store_true",
                     help="run the script offline against the echo provider (no provider "
                          "called, nothing recorded) and print the projected agent calls per "
                          "phase and model, tokens and dollars; then exit")
    run.add_argument("--confirm-above", type=at_least_zero, metavar="N",
                     help="show the estimate first and ask before starting when it projects "
                          "more than N agent calls (refused without a terminal unless --yes)")
    run.add_argument("--yes", "-y", action="store_true",
                     help="answer yes to --confirm-above's question (for scripts and CI)")


@dataclass
class ModelLine:
    """The projected calls to one model."""

    agents: int = 0
    input_tokens: list[int] = field(default_factory=lambda: [0, 0])  # low, high
    output_tokens: list[int] = field(default_factory=lambda: [0, 0])
    cost_usd: list[float] | None = None  # low, high; None: the price data lacks the model


@dataclass
class Estimate:
    """What the offline run projected (see the module docstring)."""

    name: str
    agents: int = 0
    phases: Counter[str] = field(default_factory=Counter)
    models: dict[str, ModelLine] = field(default_factory=dict)
    stop_reason: str = "completed"
    error: str | None = None

    @property
    def tokens(self) -> tuple[int, int]:
        lines = self.models.values()
        return (sum(m.input_tokens[0] + m.output_tokens[0] for m in lines),
                sum(m.input_tokens[1] + m.output_tokens[1] for m in lines))

    @property
    def cost_usd(self) -> tuple[float, float] | None:
        priced = [m.cost_usd for m in self.models.values() if m.cost_usd is not None]
        if not priced:
            return None
        return sum(c[0] for c in priced), sum(c[1] for c in priced)

    @property
    def unpriced_agents(self) -> int:
        return sum(m.agents for m in self.models.values() if m.cost_usd is None)

    def as_json(self) -> dict[str, Any]:
        cost = self.cost_usd
        return {"name": self.name, "agents": self.agents, "phases": dict(self.phases),
                "models": {name: {"agents": m.agents, "input_tokens": m.input_tokens,
                                  "output_tokens": m.output_tokens, "cost_usd": m.cost_usd}
                           for name, m in self.models.items()},
                "tokens": list(self.tokens), "cost_usd": None if cost is None else list(cost),
                "unpriced_agents": self.unpriced_agents, "output_tokens_per_call":
                    list(OUTPUT_TOKENS), "stop_reason": self.stop_reason, "error": self.error}


class _Recorder:
    """Echo, noting each request's model and input size (runs on the event loop)."""

    def __init__(self, default_model: str | None) -> None:
        from dsh_workflow import EchoProvider

        self.echo = EchoProvider()
        self.default_model = default_model
        self.calls: dict[tuple[str, int], tuple[str, int]] = {}  # (run, seq) -> model, chars

    @property
    def identity(self) -> str:
        return self.echo.identity

    async def run(self, request: SubagentRequest) -> SubagentResult:
        chars = len(request.prompt)
        if request.agent is not None:
            chars += len(request.agent.system_prompt)
        if request.schema is not None:
            chars += len(json.dumps(request.schema))
        model = request.model or self.default_model or _DEFAULT_MODEL
        self.calls[(request.run_id, request.seq)] = (model, chars)
        return await self.echo.run(request)


def estimate(plan: Plan, default_model: str | None) -> Estimate:
    """Run ``plan``'s script offline and project its calls (see the module docstring).
    A start error (bad meta or script) raises :class:`CliError`."""
    import anyio

    return anyio.run(_estimate, plan, default_model, backend="trio")


async def _estimate(plan: Plan, default_model: str | None) -> Estimate:
    from dsh_workflow import AgentStarted, WorkflowError, WorkflowStartRequest

    # The budgets stay: the script's `budget` global must read as in the real run (a script
    # can branch on it); echo answers report a few tokens only, far below a model's.
    config = plan.config.model_copy(update={"run_timeout_s": None, "agent_timeout_s": None})
    recorder = _Recorder(default_model)
    started: list[AgentStarted] = []

    def listen(event: WorkflowEvent) -> None:
        if isinstance(event, AgentStarted):
            started.append(event)

    async with dataclasses.replace(plan, config=config).make_engine(recorder, None) as engine:
        engine.events.subscribe(listen)
        try:
            run = engine.start(WorkflowStartRequest(meta=plan.meta, script=plan.body,
                                                    args=plan.args))
        except WorkflowError as exc:
            raise CliError(str(exc)) from None
        result = await run.result()
        await run.dispose()
    found = Estimate(name=run.meta.name, stop_reason=result.stop_reason, error=result.error)
    for event in started:
        found.agents += 1
        found.phases[event.phase or _NO_PHASE] += 1
        model, chars = recorder.calls.get((event.run.id, event.seq),
                                          (event.model or default_model or _DEFAULT_MODEL, 0))
        line = found.models.setdefault(model, ModelLine())
        line.agents += 1
        for end, per_token in enumerate(_CHARS_PER_TOKEN):
            line.input_tokens[end] += math.ceil(chars / per_token)
            line.output_tokens[end] += OUTPUT_TOKENS[end]
    for model, line in found.models.items():
        line.cost_usd = _price(model, line, plan.config.model_prices)
    return found


def _price(model: str, line: ModelLine,
           prices: Mapping[str, tuple[float, float]]) -> list[float] | None:
    """Both ends of ``line``'s dollar range, priced as a run prices a child (``--price``
    first, Claude Code's aliases, the price data); None when the model has no price."""
    from dsh_workflow import Usage
    from dsh_workflow._prices import cost_usd

    if model == _DEFAULT_MODEL:
        return None
    low = cost_usd(Usage(input_tokens=line.input_tokens[0], output_tokens=line.output_tokens[0]),
                   model, prices)
    high = cost_usd(Usage(input_tokens=line.input_tokens[1],
                          output_tokens=line.output_tokens[1]), model, prices)
    return None if low is None or high is None else [low, high]


def estimate_text(found: Estimate) -> str:
    """The estimate as ``run --estimate`` prints it."""
    from dsh_workflow._prices import format_usd

    def tokens(pair: tuple[int, int] | list[int]) -> str:
        return f"{pair[0]:,}–{pair[1]:,} tokens"

    def dollars(pair: tuple[float, float] | list[float] | None) -> str:
        return "price unknown" if pair is None else f"{format_usd(pair[0])}–{format_usd(pair[1])}"

    lines = [f'Estimate for "{found.name}": an offline dry run against the echo provider '
             "(no provider called, nothing recorded)",
             f"agent calls: {found.agents}"]
    if found.phases:
        lines.append("by phase:")
        width = max(len(title) for title in found.phases)
        lines += [f"  {title.ljust(width)}  {count}" for title, count in found.phases.items()]
    if found.models:
        lines.append("by model:")
        width = max(len(name) for name in found.models)
        for name, line in found.models.items():
            span = (line.input_tokens[0] + line.output_tokens[0],
                    line.input_tokens[1] + line.output_tokens[1])
            lines.append(f"  {name.ljust(width)}  {line.agents} agent"
                         f"{'' if line.agents == 1 else 's'}, {tokens(span)}, "
                         f"{dollars(line.cost_usd)}")
    total = f"total: {found.agents} agent calls, {tokens(found.tokens)}"
    cost = found.cost_usd
    if cost is not None:
        total += f", {dollars(cost)}"
        if found.unpriced_agents:
            unpriced = found.unpriced_agents
            total += f" (+ {unpriced} call{'' if unpriced == 1 else 's'} at unknown prices)"
    lines.append(total)
    lines.append(f"(input: the prompts' characters / 4 to / 3; output: {OUTPUT_TOKENS[0]:,} to "
                 f"{OUTPUT_TOKENS[1]:,} tokens per call; prices: --price, else genai-prices)")
    if found.stop_reason != "completed":
        lines.append(f"warning: the offline run ended early ({found.stop_reason}): "
                     f"{found.error}; the count covers the calls before that")
    return "\n".join(lines)


def print_estimate(found: Estimate, *, as_json: bool) -> None:
    """``run --estimate``: the estimate on stdout (JSON with ``--json``)."""
    if as_json:
        sys.stdout.write(json.dumps(found.as_json(), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(estimate_text(found) + "\n")
    sys.stdout.flush()


def confirm(found: Estimate, above: int, *, yes: bool) -> None:
    """``--confirm-above``: show the estimate on stderr and, past ``above`` agent calls, ask
    on the terminal; raises :class:`CliError` when the answer (or the lack of a terminal)
    says no."""
    sys.stderr.write(estimate_text(found) + "\n")
    sys.stderr.flush()
    if found.agents <= above or yes:
        return
    if not sys.stdin.isatty():
        raise CliError(f"the estimate projects {found.agents} agent calls, more than "
                       f"--confirm-above {above}, and there is no terminal to ask: pass --yes "
                       "to start anyway")
    sys.stderr.write(f"This run is projected to start {found.agents} agents "
                     f"(more than {above}). Start the run? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise CliError("not started: the run was not confirmed")


def _ask_on_terminal(question: str) -> bool:
    """Ask ``question`` on the terminal (stderr, then a line of stdin); False without one."""
    if not sys.stdin.isatty():
        return False
    sys.stderr.write(question + " [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


class ConfirmationGate:
    """The real run's provider, held to the number of agent calls the estimate showed.

    The first ``shown`` calls go straight to ``provider``. The first call past them asks
    ``ask(question)`` (run in a worker thread; by default on the terminal, False without
    one), once for the whole run: yes lets every later call through; no calls
    ``stop(reason)`` (which cancels the run) and holds the call until that cancel ends it,
    so it never reaches ``provider``. It reads as the provider to the engine and the run
    store: its ``info`` (:class:`~dsh_workflow.ProviderInfo`, the one thing read of a
    provider) is the provider's.
    """

    def __init__(self, provider: Any, shown: int, stop: Any, ask: Any = _ask_on_terminal) -> None:
        import anyio

        from dsh_workflow._subagent import provider_info

        self.provider = provider
        self.shown = shown
        self.info = provider_info(provider)
        self._stop = stop
        self._ask = ask
        self._lock = anyio.Lock()
        self._calls = 0
        self._answer: bool | None = None

    @property
    def identity(self) -> str:
        return str(self.info.identity)

    async def run(self, request: SubagentRequest) -> SubagentResult:
        import anyio

        self._calls += 1
        if self._calls > self.shown and self._answer is not True:
            async with self._lock:
                if self._answer is None:
                    question = (f"The run is starting more agent calls than the {self.shown} "
                                "the estimate showed. Go on?")
                    self._answer = await anyio.to_thread.run_sync(self._ask, question)
                    if not self._answer:
                        self._stop(f"not confirmed: the run would start more agent calls than "
                                   f"the {self.shown} shown by --confirm-above")
            if not self._answer:
                await anyio.sleep_forever()  # the run's cancel ends this call
        return await self.provider.run(request)  # type: ignore[no-any-return]
