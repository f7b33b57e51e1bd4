"""The access token of a local server (``dsh-workflow ui``, ``dsh-workflow mcp --http``).

Contract (SECURITY.md, "Local servers: the token"):

- The token is ``--token TOKEN`` when given, else the environment variable
  :data:`TOKEN_ENV` (``DSH_WORKFLOW_TOKEN``) when set and not empty, else a new random one
  (``secrets.token_urlsafe(32)``, 256 bits) made at each start.
- A token is 1 to 512 visible ASCII characters (no spaces or control characters: it travels in
  an HTTP header and a URL). Anything else is a start error (:class:`CliError`, exit 2), and
  the message never repeats the refused value.
- The server prints it once, in the address it shows on stderr; nothing else writes it except
  the viewer's owner-only beacon file (so ``run`` can print a link that works).
"""

from __future__ import annotations

import argparse
import os
import secrets
from dataclasses import dataclass
from typing import Literal

from .errors import CliError

__all__ = ["TOKEN_ENV", "ServerToken", "add_token_option", "server_token"]

TOKEN_ENV = "DSH_WORKFLOW_TOKEN"
MAX_TOKEN_CHARS = 512

TokenSource = Literal["option", "environment", "generated"]


@dataclass(frozen=True)
class ServerToken:
    """The token a server checks, and where it came from."""

    value: str
    source: TokenSource

    def __repr__(self) -> str:  # never in a traceback or a log by accident
        return f"ServerToken(source={self.source!r})"


def add_token_option(parser: argparse.ArgumentParser, *, used_as: str) -> None:
    """Add ``--token TOKEN`` to ``parser``; ``used_as`` says how clients pass it (help text)."""
    parser.add_argument(
        "--token", metavar="TOKEN",
        help=f"the access token clients must send ({used_as}); default: ${TOKEN_ENV} when set, "
             "else a new random token at each start, printed once")


def server_token(option: str | None) -> ServerToken:
    """The token of this start: ``option`` (``--token``), else ``$DSH_WORKFLOW_TOKEN``, else a
    new random one. Raises :class:`CliError` for a token that cannot be used."""
    if option is not None:
        return ServerToken(_checked(option, "--token"), "option")
    from_env = os.environ.get(TOKEN_ENV)
    if from_env:
        return ServerToken(_checked(from_env, f"${TOKEN_ENV}"), "environment")
    return ServerToken(secrets.token_urlsafe(32), "generated")


def _checked(value: str, where: str) -> str:
    if not value:
        raise CliError(f"{where} is empty: give a token, or leave it out for a random one")
    if len(value) > MAX_TOKEN_CHARS:
        raise CliError(f"{where} is longer than {MAX_TOKEN_CHARS} characters")
    if not all("!" <= c <= "~" for c in value):
        raise CliError(f"{where} may hold only visible ASCII characters (no spaces)")
    return value
