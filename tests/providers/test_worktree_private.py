"""Worktrees made for ``isolation: "worktree"`` are owner-only (SECURITY.md): under a shared
temporary folder, another local user cannot read the checkout of a private repository."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_workflow._providers.worktree import WorktreeError, fresh_worktree

pytestmark = [pytest.mark.anyio,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "dev")
    _git(repo, "config", "user.email", "dev@localhost")
    (repo / "secret.txt").write_text("private\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    return repo


async def test_a_worktree_is_owner_only_under_umask_022(repo: Path, tmp_path: Path) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp
    old = os.umask(0o022)
    try:
        async with fresh_worktree(repo, parent_dir=shared, tag="t") as worktree:
            assert (Path(worktree.path) / "secret.txt").read_text() == "private\n"
            assert stat.S_IMODE(os.stat(worktree.path).st_mode) == 0o700
    finally:
        os.umask(old)
    assert not os.path.exists(worktree.path)
    lock = Path(worktree.common_dir) / "dsh-workflow-worktrees.lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


async def test_a_path_that_already_exists_is_refused_and_left_alone(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / "wt"
    parent.mkdir()
    monkeypatch.setattr("secrets.token_hex", lambda n: "feedbeef")
    taken = parent / "dsh-workflow-repo-t-feedbeef"
    taken.mkdir()
    (taken / "someone-elses.txt").write_text("keep me\n")
    with pytest.raises(WorktreeError, match="cannot create"):
        async with fresh_worktree(repo, parent_dir=parent, tag="t"):
            pass
    assert (taken / "someone-elses.txt").read_text() == "keep me\n"
