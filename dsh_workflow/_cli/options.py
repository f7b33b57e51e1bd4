"""The options every command that runs workflows shares: engine, limits, provider, agents.

``run`` and ``mcp`` declare them with :func:`add_engine_options` and turn the parsed namespace
into an :class:`EngineSetup` with :func:`engine_setup`, so both commands accept the same
options, check them the same way and build engines and providers in one place.

Contract: every check happens in :func:`engine_setup`, before any event loop starts; a bad
value raises :class:`CliError` (printed as ``Error: <message>``, exit code 2). The provider is
built later, inside the run's event loop, by :attr:`EngineSetup.provider`.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import CliError

if TYPE_CHECKING:  # loaded where used: declaring the options must stay cheap (start-up time)
    from dsh_workflow import (
        AgentRegistry,
        EngineConfig,
        RunStore,
        SubagentProvider,
        WorkflowEngine,
        WorkflowLibrary,
    )

__all__ = ["LIMIT_FLAGS", "PROVIDER_KINDS", "EngineSetup", "ProviderKind", "add_agent_options",
           "add_engine_options", "at_least_zero", "count",
           "default_config", "dollars", "echo_factory", "engine_config", "engine_setup",
           "limit_flags", "load_agents", "name_limit_flags", "positive_seconds",
           "provider_factory", "seconds"]

#: Providers every command offers; a command may add its own (``mcp`` adds ``sampling``).
BASE_PROVIDERS = ("echo", "openai", "command", "claude", "codex")
#: The agent command-line presets (docs/providers.md): --provider NAME -> its executable.
AGENT_CLIS = {"claude": "claude", "codex": "codex"}

#: The ``EngineConfig`` limit each command-line flag sets: an error about the limit names the
#: flag that set it (:func:`name_limit_flags`), not only the Python setting.
LIMIT_FLAGS: dict[str, str] = {
    "budget_tokens": "--budget",
    "run_timeout_s": "--timeout",
    "max_total_agents": "--max-agents",
    "max_concurrent_agents": "--max-concurrency",
    "agent_timeout_s": "--agent-timeout",
}
_LIMIT_OPTIONS = {"budget_tokens": "budget", "run_timeout_s": "timeout",
                  "max_total_agents": "max_agents", "max_concurrent_agents": "max_concurrency",
                  "agent_timeout_s": "agent_timeout"}


def _whole_number(text: str, lowest: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < lowest:
        raise argparse.ArgumentTypeError(f"must be at least {lowest}, got {value}")
    return value


def count(text: str) -> int:
    """argparse type: a whole number >= 1."""
    return _whole_number(text, 1)


def port_type(lowest: int) -> Callable[[str], int]:
    """argparse type: a TCP port from ``lowest`` (0 lets the system pick one) to 65535."""
    def port(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
        if not lowest <= value <= 65535:
            raise argparse.ArgumentTypeError(f"must be between {lowest} and 65535, got {value}")
        return value

    return port


def at_least_zero(text: str) -> int:
    """argparse type: a whole number >= 0."""
    return _whole_number(text, 0)


def seconds(text: str) -> float:
    """argparse type: a finite number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def dollars(text: str) -> float:
    """argparse type: a finite amount of US dollars > 0 (a leading ``$`` is allowed)."""
    try:
        value = float(text.strip().removeprefix("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount of dollars, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite amount > 0, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def _price(text: str) -> tuple[str, tuple[float, float]]:
    """argparse type of ``--price MODEL=IN/OUT``: dollars per million input and output tokens,
    each a finite amount >= 0 (the model may itself hold ``=`` or ``/``)."""
    model, sep, pair = text.rpartition("=")
    given, slash, taken = pair.partition("/")
    try:
        amounts = (float(given.strip().removeprefix("$")), float(taken.strip().removeprefix("$")))
    except ValueError:
        amounts = (math.nan, math.nan)
    if not sep or not slash or not model.strip() \
            or not all(math.isfinite(a) and a >= 0 for a in amounts):
        raise argparse.ArgumentTypeError(
            f"expected MODEL=IN/OUT (dollars per million input and output tokens, e.g. "
            f"my-model=0.5/1.5), got {text!r}")
    return model.strip(), amounts


def _alias(text: str) -> tuple[str, str]:
    name, sep, model = text.partition("=")
    if not sep or not name.strip() or not model.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=MODEL, got {text!r}")
    return name.strip(), model.strip()


def add_engine_options(parser: argparse.ArgumentParser, *,
                       providers: Sequence[str] = BASE_PROVIDERS) -> None:
    """Declare the provider, engine, limit and agent-definition options on ``parser``."""
    parser.add_argument("--provider", choices=tuple(providers), default="echo",
                        help="who answers agent() calls (default: echo, offline)")
    parser.add_argument("--model", help="model name (openai, claude, codex)")
    parser.add_argument("--base-url", metavar="URL", help="OpenAI-compatible base URL (openai)")
    parser.add_argument("--command", dest="command_line", metavar="ARGV",
                        help='command run per agent, prompt on stdin (command), e.g. '
                        '"my-agent --json"; for claude and codex: the CLI executable and any '
                        'extra arguments (default: claude / codex on PATH)')
    parser.add_argument("--engine", choices=("quickjs", "subprocess"), default="quickjs",
                        help="quickjs: in-process (default); subprocess: the script runs in a "
                        "locked-down child process, for scripts treated as hostile")
    parser.add_argument("--max-concurrency", type=count, metavar="N",
                        help="agents running at once")
    parser.add_argument("--max-agents", type=count, metavar="N", help="agents a run may start")
    parser.add_argument("--budget", type=count, metavar="TOKENS",
                        help="tokens (input + output) the run may spend; past it agent() throws "
                             "BUDGET_EXCEEDED")
    parser.add_argument("--budget-usd", type=dollars, metavar="DOLLARS",
                        help="US dollars the run may spend; past it agent() throws "
                             "BUDGET_EXCEEDED (refused when a model has no price: see --price)")
    parser.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                        help="wall-clock limit of the run")
    parser.add_argument("--agent-timeout", type=positive_seconds, metavar="SECONDS",
                        help="wall-clock limit of one agent (it then returns null)")
    parser.add_argument("--max-failed-agents", type=at_least_zero, metavar="N",
                        help="failure ceiling: once more than N agents failed, the run ends "
                        "with AGENT_FAILED (default: no ceiling)")
    parser.add_argument("--on-limit", choices=("park", "fail"), default=None,
                        help="what a provider's usage limit does: park the run until it resets "
                        "(default; exit 75, continue with resume) or fail that agent")
    parser.add_argument("--echo-latency", type=seconds, metavar="SECONDS",
                        help="simulated latency of each echo agent (echo)")
    add_agent_options(parser)
    parser.add_argument("--model-alias", action="append", default=[], metavar="NAME=MODEL",
                        type=_alias, help="use MODEL wherever a call or an agent definition "
                        "names NAME (repeatable), e.g. --model-alias sonnet=gpt-4.1")
    parser.add_argument("--price", action="append", default=[], metavar="MODEL=IN/OUT",
                        type=_price, help="price MODEL at IN and OUT US dollars per million "
                        "input and output tokens, over the price data (repeatable), e.g. "
                        "--price my-model=0.5/1.5")


def add_agent_options(parser: argparse.ArgumentParser) -> None:
    """Declare ``--agents DIR`` (repeatable)."""
    parser.add_argument("--agents", action="append", default=[], metavar="DIR",
                        help="a folder of agent definitions (*.md) searched before "
                        ".claude/agents and ~/.claude/agents (repeatable)")


def load_agents(folders: Sequence[str]) -> AgentRegistry:
    """The registry for a run or a check: ``folders`` first, then the default search path.
    Unusable definition files are skipped with a warning line on stderr each."""
    from dsh_workflow import AgentRegistry

    for folder in folders:
        if not os.path.isdir(folder):
            raise CliError(f"--agents {folder!r} is not a folder")
    registry = AgentRegistry.default(folders)
    for problem in registry.problems:
        sys.stderr.write(f"Warning: skipped agent definition {problem}\n")
    sys.stderr.flush()
    return registry


def default_config() -> EngineConfig:
    """The engine's default limits (a dataclass default that loads the config on use)."""
    from dsh_workflow import EngineConfig

    return EngineConfig()


def echo_factory() -> Callable[[], SubagentProvider]:
    """The offline provider's class, as a provider factory."""
    from dsh_workflow import EchoProvider

    return EchoProvider


@dataclass
class EngineSetup:
    """How to build the engine and provider the options asked for (all already checked)."""

    config: EngineConfig = field(default_factory=default_config)
    provider: Callable[[], SubagentProvider] = field(default_factory=echo_factory)
    engine: str = "quickjs"
    agents: AgentRegistry | None = None
    library: WorkflowLibrary | None = None  # saved workflows for workflow(name)

    def make_engine(self, provider: SubagentProvider,
                    store: RunStore | None = None) -> WorkflowEngine:
        """A new, not yet entered engine of the chosen kind over ``provider`` (recording its
        runs in ``store`` when given)."""
        if self.engine == "subprocess":
            from dsh_workflow import SubprocessEngine

            return SubprocessEngine(self.config, provider=provider, pool_size=0,
                                    agents=self.agents, store=store, library=self.library)
        from dsh_workflow import QuickJSEngine

        return QuickJSEngine(self.config, provider=provider, agents=self.agents, store=store,
                             library=self.library)


def limit_flags(ns: argparse.Namespace) -> dict[str, str]:
    """The limits set by flags of ``ns``: ``EngineConfig`` field -> the flag as given
    (``{"budget_tokens": "--budget 150"}``)."""
    given: dict[str, str] = {}
    for setting, flag in LIMIT_FLAGS.items():
        value = getattr(ns, _LIMIT_OPTIONS[setting], None)
        if value is not None:
            given[setting] = f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}"
    return given


def name_limit_flags(error: str, flags: Mapping[str, str]) -> str:
    """``error`` with the flags that set the limits it names appended: ``... (budget_tokens=150;
    ...) (set by --budget 150)``; unchanged when it names none of ``flags``."""
    named = [flag for setting, flag in flags.items()
             if re.search(rf"(?<![A-Za-z0-9_]){setting}(?![A-Za-z0-9_])", error)]
    return f"{error} (set by {', '.join(named)})" if named else error


def engine_config(ns: argparse.Namespace) -> EngineConfig:
    """The limits the options chose; invalid combinations raise :class:`CliError`."""
    from pydantic import ValidationError

    from dsh_workflow import EngineConfig

    chosen = {"max_concurrent_agents": ns.max_concurrency, "max_total_agents": ns.max_agents,
              "run_timeout_s": ns.timeout, "agent_timeout_s": ns.agent_timeout,
              "max_failed_agents": getattr(ns, "max_failed_agents", None),
              "on_limit": getattr(ns, "on_limit", None),
              "budget_tokens": ns.budget, "budget_usd": ns.budget_usd,
              "model_aliases": dict(ns.model_alias) or None,
              "model_prices": dict(getattr(ns, "price", ())) or None}
    try:
        return EngineConfig(**{key: value for key, value in chosen.items() if value is not None})
    except ValidationError as exc:
        raise CliError("invalid limits: " + "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None


ProviderMaker = Callable[[], "SubagentProvider"]


def _recorded_str(record: Mapping[str, object], key: str) -> str | None:
    value = record.get(key)
    return value if isinstance(value, str) and value else None


def _recorded_argv(record: Mapping[str, object], key: str) -> list[str] | None:
    value = record.get(key)
    if isinstance(value, list) and all(isinstance(arg, str) for arg in value):
        return list(value)
    return None


def _echo_options(record: Mapping[str, object]) -> dict[str, object]:
    latency = record.get("latency_s")
    if isinstance(latency, int | float) and not isinstance(latency, bool) and latency > 0:
        return {"echo_latency": float(latency)}
    return {}


def _openai_options(record: Mapping[str, object]) -> dict[str, object]:
    return {"model": _recorded_str(record, "model"), "base_url": _recorded_str(record, "base_url")}


def _command_options(record: Mapping[str, object]) -> dict[str, object]:
    argv = _recorded_argv(record, "command")
    return {"command_line": None if not argv else shlex.join(argv)}


def _agent_cli_options(record: Mapping[str, object]) -> dict[str, object]:
    executable = _recorded_str(record, "executable")
    extra = _recorded_argv(record, "extra_args") or []
    return {"model": _recorded_str(record, "model"),
            "command_line": None if executable is None else shlex.join([executable, *extra])}


def _echo_provider(ns: argparse.Namespace, config: EngineConfig) -> ProviderMaker:
    from dsh_workflow import EchoProvider

    latency = ns.echo_latency or 0.0
    return lambda: EchoProvider(latency_s=latency)


def _openai_provider(ns: argparse.Namespace, config: EngineConfig) -> ProviderMaker:
    from dsh_workflow import OpenAIProvider

    options = {"model": ns.model, "base_url": ns.base_url,
               "max_connections": config.max_concurrent_agents}
    try:
        OpenAIProvider(**options)  # fail on bad settings now
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return lambda: OpenAIProvider(**options)


def _routing_options(record: Mapping[str, object]) -> dict[str, object]:
    return {"provider_record": dict(record)}


def _routing_provider(ns: argparse.Namespace, config: EngineConfig) -> ProviderMaker:
    """A routing provider rebuilt from its recorded routes, each through the table (routing is
    not offered as ``--provider``: only ``resume`` makes one, from a verified record)."""
    from dsh_workflow import RoutingProvider
    from dsh_workflow._failure import REDACTED

    record = getattr(ns, "provider_record", None)
    routes = record.get("routes") if isinstance(record, Mapping) else None
    default = record.get("default") if isinstance(record, Mapping) else None
    if not isinstance(routes, Mapping) or not routes or not isinstance(default, str):
        raise CliError("a routing provider is made only from a recorded one (give --provider)")
    makers: dict[str, ProviderMaker] = {}
    for name, route in sorted(routes.items()):
        kind = route.get("kind") if isinstance(route, Mapping) else None
        entry = PROVIDER_KINDS.get(kind) if isinstance(kind, str) and kind != "routing" else None
        if entry is None or not isinstance(route, Mapping):
            raise CliError(f"the recorded route {name!r} is a provider the command line cannot "
                           f"rebuild ({kind!r}); give --provider")
        options = argparse.Namespace(provider=kind, model=None, base_url=None,
                                     command_line=None, echo_latency=None)
        for attr, value in entry.from_record(route).items():
            if isinstance(value, str) and REDACTED in value:
                raise CliError(f"the recorded route {name!r} had a secret taken out of its "
                               f"{entry.options[attr]}; give --provider")
            setattr(options, attr, value)
        makers[name] = entry.build(options, config)
    try:
        RoutingProvider({name: make() for name, make in makers.items()}, default=default)
    except ValueError as exc:
        raise CliError(f"the recorded routing provider: {exc}") from None
    return lambda: RoutingProvider({name: make() for name, make in makers.items()},
                                   default=default)


@dataclass(frozen=True)
class ProviderKind:
    """One ``--provider`` kind: the command-line options it reads (``ns`` attributes, with
    the flag each is given by), how a recorded ``record`` (``ProviderInfo.record``) turns into
    those options, and how the options build the provider."""

    options: Mapping[str, str]
    from_record: Callable[[Mapping[str, object]], dict[str, object]]
    build: Callable[[argparse.Namespace, EngineConfig], ProviderMaker]


#: The one provider table of the command line, keyed by kind (``ProviderInfo.kind``): ``run``,
#: ``mcp`` and ``worker`` build from options, ``resume`` from the recorded record (each entry's
#: ``from_record`` gives the option values the record holds). ``routing`` is not a
#: ``--provider`` choice: ``resume`` rebuilds a recorded one whose routes are all in the table.
PROVIDER_KINDS: dict[str, ProviderKind] = {
    "openai": ProviderKind({"model": "--model", "base_url": "--base-url"}, _openai_options,
                           _openai_provider),
    "command": ProviderKind({"command_line": "--command"}, _command_options,
                            lambda ns, config: _command_factory(ns.command_line)),
    "claude": ProviderKind({"model": "--model", "command_line": "--command"},
                           _agent_cli_options,
                           lambda ns, config: _agent_cli_factory("claude", ns.command_line,
                                                                 ns.model)),
    "codex": ProviderKind({"model": "--model", "command_line": "--command"},
                          _agent_cli_options,
                          lambda ns, config: _agent_cli_factory("codex", ns.command_line,
                                                                ns.model)),
    "echo": ProviderKind({"echo_latency": "--echo-latency"}, _echo_options, _echo_provider),
    "routing": ProviderKind({}, _routing_options, _routing_provider),
}


def provider_factory(ns: argparse.Namespace,
                     config: EngineConfig) -> Callable[[], SubagentProvider] | None:
    """Check the provider options now; the factory builds the provider inside the run, through
    the entry of :data:`PROVIDER_KINDS` for ``ns.provider``.

    Returns ``None`` for a provider that is not in the table (a command that adds its own, like
    ``mcp``'s ``sampling``, builds it itself). An option of another kind raises
    :class:`CliError` (``--model applies only to --provider openai, claude or codex``).
    """
    flags = {flag: attr for kind in PROVIDER_KINDS.values() for attr, flag in kind.options.items()}
    for flag, attr in flags.items():
        if getattr(ns, attr, None) is not None and (
                ns.provider not in PROVIDER_KINDS or attr not in PROVIDER_KINDS[ns.provider].options):
            providers = [name for name, kind in PROVIDER_KINDS.items() if attr in kind.options]
            names = ", ".join(providers[:-1]) + " or " + providers[-1] if len(providers) > 1 \
                else providers[0]
            raise CliError(f"{flag} applies only to --provider {names}")
    kind = PROVIDER_KINDS.get(ns.provider)
    return None if kind is None else kind.build(ns, config)


def _agent_cli_factory(kind: str, command_line: str | None,
                       model: str | None) -> Callable[[], SubagentProvider]:
    """``--provider claude|codex``: the preset, ``--command`` naming the executable (and extra
    arguments) when given."""
    from dsh_workflow import ClaudeCodeProvider, CodexProvider

    preset = ClaudeCodeProvider if kind == "claude" else CodexProvider
    argv = _preset_argv(kind, command_line)
    return lambda: preset(argv[0], model=model, extra_args=argv[1:])


def _preset_argv(kind: str, command_line: str | None) -> list[str]:
    """The executable and extra arguments of a preset: ``--command`` split, else its default
    executable."""
    if not command_line:
        return [AGENT_CLIS[kind]]
    try:
        argv = shlex.split(command_line)
    except ValueError as exc:
        raise CliError(f"--command {command_line!r}: {exc}") from None
    if not argv:
        raise CliError("--command needs the program to run")
    return argv


def _command_factory(command_line: str | None) -> Callable[[], SubagentProvider]:
    from dsh_workflow import CommandProvider

    if not command_line:
        raise CliError('--provider command needs --command "program and arguments"')
    try:
        argv = shlex.split(command_line)
        CommandProvider(argv)
    except ValueError as exc:
        raise CliError(f"--command {command_line!r}: {exc}") from None
    return lambda: CommandProvider(argv)


def check_command(ns: argparse.Namespace) -> None:
    """For a run about to start: the program a ``command`` run or a ``claude``/``codex``
    preset would start must be startable (not found on PATH, no such file, not executable:
    :class:`CliError`, one clear line, instead of a run whose every child fails)."""
    if ns.provider in AGENT_CLIS:
        argv = _preset_argv(ns.provider, ns.command_line)
        problem = _unrunnable(argv[0])
        if problem is not None:
            given = f"--command {ns.command_line!r}" if ns.command_line \
                else f"--provider {ns.provider}"
            raise CliError(f"{given}: {problem} (install it, or name the executable with "
                           "--command)")
        return
    if ns.provider != "command" or not ns.command_line:
        return
    argv = shlex.split(ns.command_line)
    problem = _unrunnable(argv[0]) if argv else None
    if problem is not None:
        raise CliError(f"--command {ns.command_line!r}: {problem}")


def _unrunnable(program: str) -> str | None:
    """Why ``program`` cannot be started (not found on PATH, no such file, not executable),
    or None when it can."""
    if os.sep not in program:
        return None if shutil.which(program) is not None else \
            f"the command {program!r} was not found on PATH"
    if not os.path.isfile(program):
        return f"the command {program!r} does not exist"
    if not os.access(program, os.X_OK):
        return f"the command {program!r} is not executable"
    return None


def engine_setup(ns: argparse.Namespace) -> EngineSetup:
    """Check every engine, limit, provider and agent option of ``ns``; raises :class:`CliError`.

    A provider outside :data:`BASE_PROVIDERS` leaves :attr:`EngineSetup.provider` as echo: the
    command that offered it replaces it.
    """
    from dsh_workflow import WorkflowLibrary

    config = engine_config(ns)
    factory = provider_factory(ns, config)
    folders = getattr(ns, "workflows", None)
    library = WorkflowLibrary.default(folders) if folders is not None else None
    return EngineSetup(config=config, provider=factory or echo_factory(), engine=ns.engine,
                       agents=load_agents(ns.agents), library=library)
