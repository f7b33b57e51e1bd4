"""``resume`` on the recorded provider, and ``--rerun`` (docs/durable-runs.md, "Runs under control").

Contract:

- ``resume`` without ``--provider`` uses the provider options the run was recorded with (its
  kind, and the model and base URL, the command, or the echo latency it had); an option given
  on the command line wins over the recorded one. Without ``--model-alias`` the run's recorded
  model aliases apply. A run recorded with a provider the command
  line cannot make (a routing or custom provider) resumes on echo. A recorded command whose
  secrets were taken out is not reused (``--command`` must be given again).
- When the resume's provider identity differs from the recorded one, a ``warning:`` line on
  stderr names both and says how many completed calls will therefore run live instead of
  replaying (every journal key contains the identity).
- ``--rerun SEQ[,SEQ...]`` names calls (by seq) that run live again; a seq that is not a
  completed call of the run gets a ``warning:`` (it would run live anyway).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import CliError
from .options import BASE_PROVIDERS, engine_config, provider_factory

__all__ = ["recorded_aliases", "resume_provider", "seq_list"]


def seq_list(text: str) -> frozenset[int]:
    """argparse type: ``SEQ[,SEQ...]``, each a whole number >= 1."""
    seqs: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            seq = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected seqs of agent() calls like 3 or 2,5 (got {text!r})") from None
        if seq < 1:
            raise argparse.ArgumentTypeError(f"a seq is at least 1 (got {seq})")
        seqs.add(seq)
    return frozenset(seqs)


def _warn(message: str, secrets: Iterable[str] = ()) -> None:
    """A ``warning:`` line with ``secrets`` and the API keys of the environment taken out
    (docs/SECURITY.md: secrets are in no shown text)."""
    from .._failure import redact
    from .._secrets import environment_secrets

    message = redact(message, (*secrets, *environment_secrets()))
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


def recorded_aliases(recorded: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The model aliases a run was recorded with, as ``--model-alias`` pairs."""
    aliases = None if recorded is None else recorded.get("model_aliases")
    if not isinstance(aliases, Mapping):
        return []
    return [(name, model) for name, model in aliases.items()
            if isinstance(name, str) and isinstance(model, str)]


def _apply(ns: argparse.Namespace, recorded: Mapping[str, Any]) -> None:
    """Fill the provider options ``ns`` lacks from ``recorded``."""
    from .._engines.host.provider_options import REDACTED

    kind = recorded.get("kind")
    if kind not in BASE_PROVIDERS:
        ns.provider = "echo"
        return
    ns.provider = kind
    if kind == "openai":
        if ns.model is None and isinstance(recorded.get("model"), str):
            ns.model = recorded["model"]
        if ns.base_url is None and isinstance(recorded.get("base_url"), str) \
                and REDACTED not in recorded["base_url"]:
            ns.base_url = recorded["base_url"]
    elif kind == "command" and ns.command_line is None:
        command = recorded.get("command")
        if isinstance(command, list) and all(isinstance(a, str) for a in command):
            if any(REDACTED in arg for arg in command):
                _warn("the recorded command had secrets taken out; give --command again")
            else:
                ns.command_line = shlex.join(command)
    elif kind == "echo" and ns.echo_latency is None:
        latency = recorded.get("latency_s")
        if isinstance(latency, int | float) and latency > 0:
            ns.echo_latency = float(latency)


def resume_provider(ns: argparse.Namespace, recorded: Mapping[str, Any] | None,
                    completed: Iterable[int]) -> None:
    """Choose the resume's provider options (see the module docstring) and warn about what
    will not replay. ``completed`` are the seqs of the run's completed (journaled) calls."""
    done = set(completed)
    for seq in sorted(ns.rerun - done):
        _warn(f"--rerun {seq}: run {ns.run_id} has no completed call {seq}, so there is no "
              "answer to replay (it runs live anyway)")
    if not ns.model_alias:
        ns.model_alias = recorded_aliases(recorded)
    if ns.provider is None:
        if recorded is not None:
            _apply(ns, recorded)
        else:
            ns.provider = "echo"
    old = None if recorded is None else recorded.get("identity")
    if not isinstance(old, str):
        return
    from .._engines.host.provider_options import provider_options
    from .._secrets import run_secrets

    factory = provider_factory(ns, engine_config(ns))
    if factory is None:  # pragma: no cover - resume offers only the base providers
        return
    try:
        provider = factory()
        new = provider_options(provider)["identity"]
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if new != old:
        live = len(done - ns.rerun)
        _warn(f"run {ns.run_id} was recorded with the provider {old!r}, but this resume uses "
              f"{new!r}: its {live} completed call{'s' if live != 1 else ''} will run live "
              "instead of replaying (journal keys include the provider)",
              run_secrets(provider))
