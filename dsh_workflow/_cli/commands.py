"""How a command joins the command line: the one registration contract.

A command module exposes ``register(commands: Subcommands) -> None``, which adds its
subcommand parser(s) to ``commands`` and sets each one's ``handler`` (``handler(ns) -> int``,
the exit code). ``main.py`` lists every ``register`` in one table, in the order ``--help``
shows the commands. Registering only declares options: a module imports what its handler
needs inside the handler, so ``dsh-workflow --help`` loads nothing heavy
(``tests/cli/test_cli_startup.py``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeAlias

__all__ = ["Handler", "Register", "Subcommands"]

Subcommands: TypeAlias = "argparse._SubParsersAction[Any]"
"""The ``dsh-workflow`` subcommand parsers a command registers on (their parsers are the main
parser's class, whatever it is)."""

Handler = Callable[[argparse.Namespace], int]
"""A command's handler: runs it on the parsed options, returns the exit code."""

Register = Callable[[Subcommands], None]
"""A command module's ``register``."""
