"""Saved workflows: Claude-Code-style ``.js`` files found by their ``meta.name`` (docs/embedding.md,
"Saved workflows and `workflow()`").

A saved workflow is a file that begins with an ``export const meta = {...}`` literal (read as
data, never run) followed by the script's body. :class:`WorkflowLibrary` searches a list of
folders in order; the first file whose meta names a workflow wins. A missing folder is empty. A
file that cannot be used (no meta, a broken literal, invalid meta, a body that does not parse)
is never skipped silently: it is listed in :attr:`WorkflowLibrary.problems` with its path and
the reason, and looking its name up says so. A FIFO, socket or device named ``*.js`` is such a
file: it is never opened in a way that could block (:func:`read_regular_text`).

Files are read when the library is built (:meth:`WorkflowLibrary.reload` reads them again), so a
lookup from a running script never touches the disk.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ._errors import WorkflowError
from ._meta import WorkflowMeta, parse_meta
from ._metafile import MetaFileError, split_meta
from ._script import check_body

__all__ = ["LibraryProblem", "SavedWorkflow", "WorkflowLibrary"]

#: Largest workflow file read (a saved workflow is a script, not data).
MAX_FILE_BYTES = 1_000_000


class SavedWorkflow(BaseModel):
    """One usable saved workflow: its meta, its body (the file with the meta statement blanked,
    so lines and columns match the file) and where it came from."""

    model_config = ConfigDict(frozen=True)

    meta: WorkflowMeta
    body: str
    path: Path

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def description(self) -> str:
        return self.meta.description


class LibraryProblem(BaseModel):
    """A file in a library folder that could not be used, and why."""

    model_config = ConfigDict(frozen=True)

    path: Path
    reason: str


#: How a file in a folder the library reads is opened: never waiting for a writer (a FIFO),
#: never becoming the controlling terminal (a tty).
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0))
NOT_REGULAR = "not a regular file (a FIFO, socket, device or folder is never read)"


def read_regular_text(path: Path, *, max_bytes: int | None = None) -> str:
    """The UTF-8 text of the regular file at ``path`` (newlines translated as ``read_text``
    does), never blocking: a FIFO, socket, device or folder raises ``ValueError`` without
    being read. ``stat`` is checked before opening and ``fstat`` after (opened with
    ``O_NONBLOCK``, so a FIFO swapped in between cannot block either). Raises ``ValueError``
    with the reason for anything unreadable, and for a file over ``max_bytes``."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError(NOT_REGULAR)
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise ValueError(f"cannot be read ({exc})") from None
    with os.fdopen(fd, "rb") as file:
        try:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ValueError(NOT_REGULAR)
            if max_bytes is not None and info.st_size > max_bytes:
                raise ValueError(f"larger than {max_bytes} bytes")
            data = file.read(-1 if max_bytes is None else max_bytes + 1)
        except OSError as exc:
            raise ValueError(f"cannot be read ({exc})") from None
    if max_bytes is not None and len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"cannot be read ({exc})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_workflow_file(path: Path) -> SavedWorkflow:
    """Read and check one workflow file; raises ``ValueError`` with the reason (a file that is
    not a regular file is never opened blocking, see :func:`read_regular_text`)."""
    source = read_regular_text(path, max_bytes=MAX_FILE_BYTES)
    try:
        raw_meta, body = split_meta(source)
    except MetaFileError as exc:
        raise ValueError(f"meta block: {exc}") from None
    if raw_meta is None:
        raise ValueError("it does not begin with `export const meta = {...}`")
    try:
        meta = parse_meta(raw_meta)
        check_body(body)
    except WorkflowError as exc:
        raise ValueError(exc.message) from None
    return SavedWorkflow(meta=meta, body=body, path=path)


class WorkflowLibrary:
    """Saved workflows found by ``meta.name`` in ``paths``, searched in order (first hit wins).

    ``workflow({scriptPath})`` resolves a relative path against ``project_root`` first (the
    folder the run started in, as Claude Code does: default the current directory when the
    library is made), then against ``base_dir`` (the calling script's folder; default: the
    first folder); either way it must name a ``.js`` file inside ``base_dir`` or one of
    ``paths``.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]], *,
                 base_dir: str | os.PathLike[str] | None = None,
                 project_root: str | os.PathLike[str] | None = None) -> None:
        self.paths = [Path(p).expanduser() for p in paths]
        self.base_dir = Path(base_dir).expanduser() if base_dir is not None else (
            self.paths[0] if self.paths else Path.cwd())
        self.project_root = Path(project_root).expanduser() if project_root is not None \
            else Path.cwd()
        self._by_name: dict[str, SavedWorkflow] = {}
        self._problems: list[LibraryProblem] = []
        self.reload()

    @classmethod
    def default_paths(cls, cwd: str | os.PathLike[str] | None = None) -> list[Path]:
        """The search path of docs/embedding.md, "Saved workflows and `workflow()`": the project's
        ``.dsh-workflow/workflows/`` and ``.claude/workflows/``, then the user's
        ``~/.config/dsh-workflow/workflows/`` and ``~/.claude/workflows/``."""
        here = Path(cwd) if cwd is not None else Path.cwd()
        home = Path.home()
        return [here / ".dsh-workflow" / "workflows", here / ".claude" / "workflows",
                home / ".config" / "dsh-workflow" / "workflows", home / ".claude" / "workflows"]

    @classmethod
    def default(cls, extra: Sequence[str | os.PathLike[str]] = (), *,
                cwd: str | os.PathLike[str] | None = None,
                base_dir: str | os.PathLike[str] | None = None) -> WorkflowLibrary:
        """The default search path, after the ``extra`` folders; ``cwd`` (default: the current
        directory) is also the project root script paths resolve against first."""
        return cls([*extra, *cls.default_paths(cwd)], base_dir=base_dir, project_root=cwd)

    def reload(self) -> None:
        """Read every folder again."""
        found: dict[str, SavedWorkflow] = {}
        problems: list[LibraryProblem] = []
        for folder in self.paths:
            try:
                # a folder named *.js is not a file; a FIFO, socket or device is listed as a
                # problem, and never opened blocking
                files = sorted(p for p in folder.iterdir() if p.suffix == ".js" and not p.is_dir())
            except FileNotFoundError:
                continue
            except OSError as exc:
                problems.append(LibraryProblem(path=folder, reason=f"cannot be listed ({exc})"))
                continue
            for path in files:
                try:
                    saved = read_workflow_file(path)
                except ValueError as exc:
                    problems.append(LibraryProblem(path=path, reason=str(exc)))
                    continue
                found.setdefault(saved.name, saved)
        self._by_name = found
        self._problems = problems

    @property
    def problems(self) -> list[LibraryProblem]:
        """Files that could not be used, with their reasons."""
        return list(self._problems)

    def workflows(self) -> list[SavedWorkflow]:
        """Every usable workflow (the first of each name), by name."""
        return [self._by_name[name] for name in sorted(self._by_name)]

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def get(self, name: str) -> SavedWorkflow | None:
        return self._by_name.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def resolve_script_path(self, script_path: str) -> SavedWorkflow:
        """The workflow file ``script_path`` names (a relative one against
        :attr:`project_root`, else against :attr:`base_dir`); raises ``ValueError`` when it is
        unusable. The reason never quotes the file's content, and a path that does not exist,
        one outside the allowed folders (after symlinks) and one that is not a ``.js`` file all
        get one text, so a script cannot learn which host paths exist."""
        refused = ValueError(f"{script_path!r} is not a .js file inside the workflow folders")
        given = Path(script_path)
        bases = [Path()] if given.is_absolute() else [self.project_root, self.base_dir]
        try:
            roots = [root.resolve() for root in [self.base_dir, *self.paths] if root.exists()]
        except (OSError, RuntimeError):
            raise refused from None
        for base in bases:
            try:
                resolved = (base / given).resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if resolved.suffix == ".js" and any(resolved.is_relative_to(r) for r in roots) \
                    and resolved.is_file():
                return read_workflow_file(resolved)
        raise refused

    def describe_names(self) -> str:
        """``a, b, c`` or ``none`` — for error messages."""
        names = self.names()
        return ", ".join(names) if names else "none"


def describe(problems: Sequence[LibraryProblem]) -> list[dict[str, Any]]:
    """Problems as JSON data (for ``list --json``)."""
    return [{"path": str(p.path), "reason": p.reason} for p in problems]
