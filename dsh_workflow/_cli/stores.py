"""Where the command line keeps its runs: the ``--store`` option and the store's default file.

Contract (docs/durable-runs.md, command line):

- Every command finds its store with :func:`store_path`: ``--store PATH``, else the file
  named by ``$DSH_WORKFLOW_STORE``, else ``.dsh-workflow/runs.sqlite3`` under the current
  directory. ``run`` and ``resume`` record runs by default; ``run --no-store`` records nothing.
  ``mcp`` records only when given ``--store`` (a server is long-lived and shared).
- A command that records creates the store's folder when it is missing (mode ``0o700``: the
  file holds scripts, arguments and every answer, so it is as sensitive as the workflows).
- A command that only reads (``runs``, ``show``, ``logs``) or resumes never creates a store:
  a missing file is "no runs" for ``runs`` and an unknown run for the others.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence

from .errors import CliError

__all__ = ["DEFAULT_RELATIVE", "ENV_VAR", "add_store_option", "default_store_path",
           "ensure_folder", "resume_command", "store_path"]

#: The environment variable naming the default store file.
ENV_VAR = "DSH_WORKFLOW_STORE"
#: The default store file, relative to the current directory.
DEFAULT_RELATIVE = os.path.join(".dsh-workflow", "runs.sqlite3")


def add_store_option(parser: argparse.ArgumentParser, *, can_disable: bool = False,
                     help: str | None = None) -> None:
    """Add ``--store PATH`` (and ``--no-store`` when ``can_disable``) to ``parser``; ``help``
    replaces the option's usual help (for a command whose store is not the default one)."""
    parser.add_argument("--store", metavar="PATH",
                        help=help or f"the run store file (default: ${ENV_VAR}, else "
                                     f"{DEFAULT_RELATIVE} under the current directory)")
    if can_disable:
        parser.add_argument("--no-store", action="store_true",
                            help="record nothing (the run cannot be listed or resumed)")


def default_store_path() -> str:
    """The store file used when ``--store`` is not given (absolute)."""
    chosen = os.environ.get(ENV_VAR) or DEFAULT_RELATIVE
    return os.path.abspath(os.path.expanduser(chosen))


def store_path(ns: argparse.Namespace, *, opt_in: bool = False) -> str | None:
    """The store file a command uses (absolute): ``--store``, else :func:`default_store_path`.

    None with ``--no-store``; and, for a command that records only when asked (``opt_in``),
    when ``--store`` is not given.
    """
    if getattr(ns, "no_store", False):
        return None
    chosen: str | None = ns.store
    if chosen or (opt_in and chosen is not None):
        return os.path.abspath(os.path.expanduser(chosen))
    return None if opt_in else default_store_path()


def ensure_folder(path: str) -> None:
    """Create the folder of the store file ``path`` if missing (private to the user)."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create the run store folder {folder!r}: "
                               f"{exc.strerror or exc}") from None


def resume_command(run_id: str, path: str, extra: Sequence[str] = ()) -> str:
    """The shell command that resumes ``run_id``: ``dsh-workflow resume <id>``, with
    ``--store PATH`` when ``path`` is not the default store, then ``extra`` options."""
    argv = ["dsh-workflow", "resume", run_id]
    if os.path.abspath(path) != default_store_path():
        argv += ["--store", path]
    argv += list(extra)
    return shlex.join(argv)
