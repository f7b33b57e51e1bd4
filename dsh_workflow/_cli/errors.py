"""The command line's exit codes and its one usage-error type, shared by every command."""

from __future__ import annotations

__all__ = ["EXIT_CANCELLED", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "EXIT_WAITING", "CliError"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130
#: The run parked (open questions, or a provider's limit): ``answer`` or ``resume`` continues
#: it (EX_TEMPFAIL: try again later).
EXIT_WAITING = 75


class CliError(Exception):
    """A usage or start error: printed as ``Error: <message>``, exit code 2."""
