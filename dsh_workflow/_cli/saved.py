"""Saved workflows as the commands that run scripts find them (docs/embedding.md, "Saved
workflows and `workflow()`"): the ``--workflows`` option, the library a run gets, and ``run
NAME``'s lookup of a saved workflow.

Contract:

- ``--workflows DIR`` (repeatable) names folders searched before the default search path;
- :func:`load_library` gives the library a run's ``workflow(name)`` finds saved workflows in
  (``workflow({scriptPath})`` resolves relative to the current directory, then ``base_dir``);
- ``run NAME`` runs the saved workflow ``NAME`` when ``NAME`` is not a file
  (:func:`saved_script`); a ``NAME`` that is neither is a usage error naming the closest saved
  names and listing the saved workflows (:func:`unknown_workflow`).

The ``list`` and ``save`` commands are :mod:`.library`'s.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded where used: declaring the options must stay cheap (start-up time)
    from dsh_workflow import WorkflowLibrary

__all__ = ["add_library_option", "load_library", "saved_script", "unknown_workflow"]


def add_library_option(parser: argparse.ArgumentParser) -> None:
    """``--workflows DIR`` (repeatable): folders searched for saved workflows first."""
    parser.add_argument("--workflows", action="append", default=[], metavar="DIR",
                        help="a folder of saved workflows, searched before the default ones "
                             "(repeatable)")


def load_library(folders: list[str], *, base_dir: str | os.PathLike[str] | None = None
                 ) -> WorkflowLibrary:
    """The library: ``folders`` first, then the default search path (docs/embedding.md, "Saved
    workflows and `workflow()`")."""
    from dsh_workflow import WorkflowLibrary

    return WorkflowLibrary.default(folders, base_dir=base_dir)


def saved_script(name: str, library: WorkflowLibrary) -> tuple[dict[str, Any], str, Path] | None:
    """The meta, body and path of the saved workflow ``name``, or None."""
    found = library.get(name)
    if found is not None:
        return found.meta.model_dump(mode="json", exclude_none=True), found.body, found.path
    return None


def unknown_workflow(name: str, library: WorkflowLibrary) -> str:
    """The message for ``run NAME`` when NAME is neither a file nor a saved workflow: the
    closest saved names, then every saved workflow (or where none was found). A NAME that
    reads as a path (a ``.js`` file, a folder in it) is reported as the file it names."""
    import difflib

    workflows = library.workflows()
    names = [w.name for w in workflows]
    if name.endswith(".js") or os.sep in name or "/" in name:
        message = f"cannot read script {name!r}: no such file, nor a saved workflow of that name"
    else:
        message = f"no file or saved workflow named {name!r}"
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    if not close:  # a path to a saved workflow's file: compare its stem
        close = difflib.get_close_matches(Path(name).stem, names, n=3, cutoff=0.5)
    if close:
        message += "; did you mean " + " or ".join(repr(n) for n in close) + "?"
    if not workflows:
        return message + " (no saved workflows in: " + ", ".join(map(str, library.paths)) + ")"
    width = max(map(len, names))
    listed = "\n".join(f"  {w.name:<{width}}  {w.description}" for w in workflows)
    return f"{message}\nsaved workflows (dsh-workflow list):\n{listed}"
