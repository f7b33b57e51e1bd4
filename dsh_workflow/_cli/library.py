"""Saved workflows on the command line (docs/embedding.md, "Saved workflows and `workflow()`"):
the ``list`` and ``save`` commands. The library ``run`` gives its engine and ``run NAME``'s
lookup are :mod:`.saved`'s.

Contract:

- ``list [--workflows DIR]... [--json]`` prints every saved workflow on the search path (name,
  description, path), first hit per name, and then every file that could not be used, with its
  path and reason (on stderr; exit 0 all the same: a broken file is reported, never hidden);
- ``save RUN_ID [--name N] [--to DIR] [--store PATH] [--force]`` writes a recorded run's script
  and meta as ``DIR/<name>.js`` (default ``.dsh-workflow/workflows/``), refusing to overwrite a
  file unless ``--force``; exit 2 for an unknown run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .commands import Subcommands
from .errors import EXIT_OK, CliError
from .records import find_run
from .saved import add_library_option, load_library
from .stores import add_store_option, store_path

__all__ = ["register"]

#: Where ``save`` writes when ``--to`` is not given (relative to the current directory).
DEFAULT_SAVE_DIR = os.path.join(".dsh-workflow", "workflows")


def register(commands: Subcommands) -> None:
    """Add ``list`` and ``save`` to the ``dsh-workflow`` subparsers."""
    listing = commands.add_parser("list", help="list saved workflows (name, description, path)",
                                  description="List the saved workflows on the search path: "
                                  "--workflows folders, then .dsh-workflow/workflows/ and "
                                  ".claude/workflows/ here, then ~/.config/dsh-workflow/"
                                  "workflows/ and ~/.claude/workflows/.")
    add_library_option(listing)
    listing.add_argument("--json", action="store_true", help="print one JSON document")
    listing.set_defaults(handler=command_list)

    save = commands.add_parser("save", help="save a recorded run's script as a workflow file",
                               description="Write a recorded run's script and meta as a "
                               "Claude-Code-style workflow file that `run NAME` and "
                               "workflow(name) find.")
    save.add_argument("run_id", metavar="RUN_ID")
    save.add_argument("--name", help="the saved workflow's name (default: the run's meta name)")
    save.add_argument("--to", metavar="DIR", help=f"the folder (default: {DEFAULT_SAVE_DIR})")
    save.add_argument("--force", action="store_true", help="overwrite an existing file")
    add_store_option(save)
    save.set_defaults(handler=command_save)


def command_list(ns: argparse.Namespace) -> int:
    library = load_library(ns.workflows)
    workflows = library.workflows()
    problems = library.problems
    if ns.json:
        document = {
            "workflows": [{"name": w.name, "description": w.description, "path": str(w.path)}
                          for w in workflows],
            "problems": [{"path": str(p.path), "reason": p.reason} for p in problems],
        }
        print(json.dumps(document, indent=2, ensure_ascii=False))
    elif workflows:
        width = max(len(w.name) for w in workflows)
        for w in workflows:
            print(f"{w.name:<{width}}  {w.description}  ({w.path})")
    else:
        print("no saved workflows (searched: " + ", ".join(str(p) for p in library.paths) + ")")
    for problem in problems:
        print(f"warning: {problem.path}: not usable: {problem.reason}", file=sys.stderr)
    return EXIT_OK


def command_save(ns: argparse.Namespace) -> int:
    import anyio

    from dsh_workflow import SQLiteRunStore, WorkflowMeta

    path = store_path(ns)
    assert path is not None
    if not os.path.exists(path):
        raise CliError(f"no run {ns.run_id!r}: the run store {path} does not exist")

    async def read() -> Any:
        async with SQLiteRunStore(path) as store:
            return await find_run(store, ns.run_id, where=path)

    from dsh_workflow import RunStoreError

    try:
        record = anyio.run(read, backend="trio")
    except RunStoreError as exc:  # unreadable store, or a broken row: named, no traceback
        raise CliError(str(exc)) from None
    meta = dict(record.meta)
    if ns.name:
        meta["name"] = ns.name
    try:
        checked = WorkflowMeta.model_validate(meta)
    except ValueError as exc:
        raise CliError(f"the saved workflow's meta is not valid: {exc}") from None
    folder = Path(ns.to if ns.to else DEFAULT_SAVE_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{_file_name(checked.name)}.js"
    if target.exists() and not ns.force:
        raise CliError(f"{target} exists; use --force to overwrite it or --name to pick another "
                       "name")
    literal = json.dumps(checked.model_dump(mode="json", exclude_none=True), indent=2,
                         ensure_ascii=False)
    target.write_text(f"export const meta = {literal};\n\n{record.script.lstrip()}\n", "utf-8")
    print(f"saved {checked.name!r} to {target}")
    return EXIT_OK


def _file_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip(".-")
    return cleaned or "workflow"
