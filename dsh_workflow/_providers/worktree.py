"""Fresh detached git worktrees for isolated children (``isolation: "worktree"``), POSIX only.

Contract of :func:`fresh_worktree`:

- **Where.** ``directory`` must lie inside a git repository with at least one commit; otherwise
  :class:`WorktreeError` is raised (no git repository, no commit yet, or ``git`` missing) — a
  configuration fault, not something the child could fix. The worktree is
  ``<parent_dir>/dsh-workflow-<repo>-<tag>-<random>`` (``parent_dir`` defaults to the system's
  temporary folder, so the repository's own tree stays clean), created owner-only (``0o700``,
  whatever the umask) before git fills it, checked out with
  ``git worktree add --detach`` at the commit ``HEAD`` names when the child starts: no branch is
  created, and uncommitted changes of the main tree are not in it. The child runs in the same
  subfolder of it as ``directory`` is of the repository; a folder the commit lacks (e.g. an
  untracked one) raises :class:`WorktreeError`.
- **Changed** means ``git status --porcelain`` prints anything (modified, staged, deleted or new
  untracked files; ignored files do not count) or ``HEAD`` no longer is the base commit (the
  child committed or checked out something else).
- **Removal.** On leaving the ``async with`` block the worktree is removed — ``git worktree
  remove --force --force``; if that fails (a creation cut short), whatever is left of the
  folder, then ``git worktree unlock`` (such an entry may still be locked) and ``git worktree
  prune`` — unless
  :meth:`Worktree.keep` was called and the block ended without an exception. So cancellation,
  also in the middle of ``git worktree add``, always removes it: nothing is left behind, neither
  a worktree entry nor a folder. Removal is shielded from cancellation and bounded in time.
- **A process about to exit at once** (a second Ctrl-C) calls :func:`remove_all_now`: every
  worktree still open is removed synchronously, as leaving its block would have.
- **Concurrency.** Every ``git`` is an async subprocess in its own process group (killed with its
  hooks and helpers on cancellation); the event loop is never blocked. Commands that change the
  repository's worktree list (add, remove, unlock, prune) hold an exclusive ``flock`` on
  ``<git-common-dir>/dsh-workflow-worktrees.lock``, acquired by polling, because concurrent
  ``git worktree`` commands can read each other's half-written entries and fail; the lock also
  serializes them across processes.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from subprocess import DEVNULL, PIPE

import anyio
import anyio.abc
import anyio.to_thread

from .procgroup import terminate_group

__all__ = ["Worktree", "WorktreeError", "fresh_worktree", "remove_all_now"]

LOCK_NAME = "dsh-workflow-worktrees.lock"
_CLEANUP_TIMEOUT_S = 60.0
#: The worktrees this process has open (created, not yet removed or kept), for
#: :func:`remove_all_now`.
_open: dict[int, Worktree] = {}  # by id(): a Worktree is a mutable dataclass
_GIT_KILL_GRACE_S = 1.0
# Variables that would point git at another repository than the folder it runs in.
_GIT_LOCATION_VARS = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX",
)  # fmt: skip
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_PRIVATE_DIR = 0o700


class WorktreeError(RuntimeError):
    """An isolated child cannot get a worktree: not in a git repository, no commit, git failed."""


@dataclass(frozen=True)
class GitOutput:
    """One finished ``git`` command."""

    returncode: int
    stdout: str
    stderr: str


@dataclass
class Worktree:
    """One child's worktree: ``path`` (its root), ``cwd`` (where the child runs), ``base`` (the
    commit it was checked out at), ``repo`` and ``common_dir`` (the main repository's top folder
    and shared git folder)."""

    path: str
    cwd: str
    base: str
    repo: str
    common_dir: str
    _kept: bool = False

    async def changed(self) -> bool:
        """Whether the child left anything behind (see the module docstring).

        A folder the child deleted counts as unchanged (there is nothing to keep); a status
        that git cannot produce counts as changed, so that work is never thrown away on doubt.
        """
        if not os.path.isdir(self.path):
            return False
        status = await run_git(["status", "--porcelain"], self.path, optional_locks=False)
        head = await run_git(["rev-parse", "--verify", "--quiet", "HEAD"], self.path)
        if status.returncode != 0 or head.returncode != 0:
            return True
        return bool(status.stdout.strip()) or head.stdout.strip() != self.base

    def keep(self) -> None:
        """Leave the worktree in place when the ``async with`` block ends normally."""
        self._kept = True


def _git_env(optional_locks: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
    env["GIT_TERMINAL_PROMPT"] = "0"
    if not optional_locks:
        env["GIT_OPTIONAL_LOCKS"] = "0"  # status must not take the index lock to refresh it
    return env


async def run_git(args: Sequence[str], cwd: str, *, optional_locks: bool = True) -> GitOutput:
    """Run ``git args`` in ``cwd`` as an async subprocess in its own process group.

    On cancellation the whole group (git and the hooks or helpers it started) is terminated and
    reaped before the cancellation propagates. Raises :class:`WorktreeError` when git is missing.
    """
    try:
        process = await anyio.open_process(
            ["git", *args], cwd=cwd, env=_git_env(optional_locks), stdin=DEVNULL, stdout=PIPE,
            stderr=PIPE, start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise WorktreeError(f"isolation 'worktree' needs git, which cannot be started: {exc}") from None
    out, err = bytearray(), bytearray()
    try:
        async with anyio.create_task_group() as tg:

            async def drain(stream: anyio.abc.ByteReceiveStream | None, into: bytearray) -> None:
                assert stream is not None
                async for chunk in stream:
                    into.extend(chunk)

            tg.start_soon(drain, process.stdout, out)
            tg.start_soon(drain, process.stderr, err)
            await process.wait()
    finally:
        with anyio.CancelScope(shield=True):
            await terminate_group(process, _GIT_KILL_GRACE_S)
            await process.aclose()
    assert process.returncode is not None
    return GitOutput(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


@asynccontextmanager
async def _repository_lock(common_dir: str) -> AsyncIterator[None]:
    """Hold an exclusive ``flock`` on the repository's lock file, polling without blocking."""
    fd = os.open(os.path.join(common_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.02)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _failure(what: str, output: GitOutput) -> str:
    detail = output.stderr.strip() or output.stdout.strip() or f"exit status {output.returncode}"
    return f"{what}: {detail}"


async def _locate(directory: str) -> tuple[str, str, str, str]:
    """``(toplevel, prefix, common_dir, head)`` of the repository ``directory`` lies in."""
    where = await run_git(["rev-parse", "--show-toplevel", "--show-prefix", "--git-common-dir"],
                          directory)
    lines = where.stdout.splitlines()
    if where.returncode != 0 or len(lines) != 3 or not lines[0]:
        raise WorktreeError(_failure(
            f"isolation 'worktree' needs a git repository with a working tree, "
            f"and {directory} is not inside one", where))
    toplevel, prefix, common_dir = lines
    head = await run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], directory)
    if head.returncode != 0:
        raise WorktreeError(
            f"isolation 'worktree' needs a commit to check out, and the repository at "
            f"{toplevel} has none yet")
    return toplevel, prefix, os.path.join(directory, common_dir), head.stdout.strip()


async def _remove(worktree: Worktree) -> None:
    """Remove the worktree, its folder and its entry; tolerant of every half-created state."""
    async with _repository_lock(worktree.common_dir):
        removed = await run_git(["worktree", "remove", "--force", "--force", worktree.path], worktree.repo)
        if removed.returncode == 0 and not os.path.lexists(worktree.path):
            return
        if os.path.lexists(worktree.path):
            await anyio.to_thread.run_sync(shutil.rmtree, worktree.path, True)
        await run_git(["worktree", "unlock", worktree.path], worktree.repo)
        await run_git(["worktree", "prune"], worktree.repo)


@asynccontextmanager
async def fresh_worktree(
    directory: str | os.PathLike[str],
    *,
    parent_dir: str | os.PathLike[str] | None = None,
    tag: str = "",
) -> AsyncIterator[Worktree]:
    """A fresh detached worktree of the repository ``directory`` lies in (module docstring)."""
    directory = os.path.realpath(directory)
    toplevel, prefix, common_dir, base = await _locate(directory)
    parent = os.path.realpath(parent_dir if parent_dir is not None else tempfile.gettempdir())
    os.makedirs(parent, exist_ok=True)
    repo = _UNSAFE_NAME.sub("-", os.path.basename(toplevel)) or "repo"
    name = "-".join(p for p in ("dsh-workflow", repo, _UNSAFE_NAME.sub("-", tag), secrets.token_hex(4)) if p)
    path = os.path.join(parent, name)
    worktree = Worktree(path=path, cwd=os.path.normpath(os.path.join(path, prefix)), base=base,
                        repo=toplevel, common_dir=common_dir)
    # Owner-only from the start: git fills the existing empty folder, and another local user
    # cannot read the checkout of a private repository under a shared temporary folder. Made
    # before the try: a path that already exists is not ours to remove.
    try:
        os.mkdir(path, _PRIVATE_DIR)
    except OSError as exc:
        raise WorktreeError(f"isolation 'worktree': cannot create {path}: "
                            f"{exc.strerror or exc}") from None
    failed = True
    _open[id(worktree)] = worktree
    try:
        os.chmod(path, _PRIVATE_DIR)
        async with _repository_lock(common_dir):
            added = await run_git(["worktree", "add", "--detach", path, base], toplevel)
        if added.returncode != 0:
            raise WorktreeError(_failure(f"git worktree add {path} failed", added))
        if not os.path.isdir(worktree.cwd):
            raise WorktreeError(
                f"isolation 'worktree': {directory} is not in commit {base} of {toplevel} "
                f"(only committed folders exist in a fresh worktree)")
        yield worktree
        failed = False
    finally:
        if failed or not worktree._kept:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLEANUP_TIMEOUT_S):
                await _remove(worktree)
        _open.pop(id(worktree), None)


def remove_all_now(timeout_s: float = 10.0) -> None:
    """Remove every worktree still open, synchronously (for a process about to exit without
    leaving their blocks; kill their children first). Never raises."""
    for key, worktree in list(_open.items()):
        try:
            subprocess.run(["git", "worktree", "remove", "--force", "--force", worktree.path],
                           cwd=worktree.repo, env=_git_env(True), stdin=DEVNULL,
                           stdout=DEVNULL, stderr=DEVNULL, timeout=timeout_s, check=False)
            if os.path.lexists(worktree.path):
                shutil.rmtree(worktree.path, ignore_errors=True)
                subprocess.run(["git", "worktree", "prune"], cwd=worktree.repo,
                               env=_git_env(True), stdin=DEVNULL, stdout=DEVNULL,
                               stderr=DEVNULL, timeout=timeout_s, check=False)
        except (OSError, subprocess.SubprocessError):
            pass
        _open.pop(key, None)


def kept_note(worktree: Worktree) -> str:
    """The sentence appended to a child's text (or error) when its worktree is kept."""
    return f"Worktree with changes kept at {worktree.path} (detached from commit {worktree.base})."


def worktree_env(worktree: Worktree) -> Mapping[str, str]:
    """What an isolated child's environment gains."""
    return {"DSH_WORKFLOW_WORKTREE": worktree.path}
