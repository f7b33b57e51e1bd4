"""CommandProvider with ``isolation="worktree"``: real git repositories, real commands (docs/scripts.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, await_until, quickjs_factory, subprocess_factory

from dsh_workflow import (
    EngineConfig,
    SubagentRequest,
    SubagentResult,
    WorkflowStartRequest,
)
from dsh_workflow._providers.command import CommandProvider
from dsh_workflow._providers.worktree import LOCK_NAME, WorktreeError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "sub").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "dev")
    git(repo, "config", "user.email", "dev@localhost")
    (repo / "tracked.txt").write_text("committed\n")
    (repo / "sub" / "inner.txt").write_text("inner\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    return repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


@pytest.fixture
def worktrees(tmp_path: Path) -> Path:
    folder = tmp_path / "worktrees"
    folder.mkdir()
    return folder


def worktree_paths(repo: Path) -> list[str]:
    """Every worktree git knows of, the main one first."""
    out = git(repo, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]


def assert_nothing_left(repo: Path, worktrees: Path) -> None:
    assert worktree_paths(repo) == [str(repo.resolve())]
    assert git(repo, "branch", "--list", "--format=%(refname:short)").split() == ["main"]
    assert list(worktrees.iterdir()) == []
    assert not (repo / ".git" / "worktrees").exists() or not any((repo / ".git" / "worktrees").iterdir())
    assert git(repo, "status", "--porcelain") == ""


def provider(script: str, repo: Path, worktrees: Path, **options: Any) -> CommandProvider:
    env = {"PATH": os.environ.get("PATH", os.defpath), **options.pop("env", {})}
    return CommandProvider([sys.executable, "-c", textwrap.dedent(script)], cwd=options.pop("cwd", repo),
                           env=env, worktree_dir=worktrees, **options)


def request(prompt: str = "go", seq: int = 1, **fields: Any) -> SubagentRequest:
    fields.setdefault("isolation", "worktree")
    return SubagentRequest(prompt=prompt, label=f"child {seq}", run_id="run-1", seq=seq, **fields)


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] in (b"Z", b"X")
    except FileNotFoundError:
        return True


WHERE = """
import json, os
print(json.dumps({"cwd": os.getcwd(), "worktree": os.environ.get("DSH_WORKFLOW_WORKTREE"),
                  "tracked": open(os.path.join(os.environ["DSH_WORKFLOW_WORKTREE"], "tracked.txt")).read()}))
"""


@pytest.mark.anyio
async def test_unchanged_worktree_is_removed(repo: Path, worktrees: Path) -> None:
    (repo / "tracked.txt").write_text("uncommitted edit in the main tree\n")
    result = await provider(WHERE, repo, worktrees).run(request())
    assert result.stop_reason == "completed", result.error
    seen = json.loads(result.text or "")
    assert seen["cwd"] == seen["worktree"]
    assert Path(seen["cwd"]).parent == worktrees.resolve()
    assert seen["tracked"] == "committed\n"  # a checkout of HEAD, not of the main tree's edits
    assert not Path(seen["cwd"]).exists()
    git(repo, "checkout", "--", "tracked.txt")
    assert_nothing_left(repo, worktrees)


@pytest.mark.anyio
async def test_child_runs_in_the_same_subfolder(repo: Path, worktrees: Path) -> None:
    result = await provider(WHERE, repo, worktrees, cwd=repo / "sub").run(request())
    seen = json.loads(result.text or "")
    assert seen["cwd"] == os.path.join(seen["worktree"], "sub")
    assert_nothing_left(repo, worktrees)


@pytest.mark.anyio
async def test_without_isolation_no_worktree_is_made(repo: Path, worktrees: Path) -> None:
    script = "import os; print(os.getcwd(), os.environ.get('DSH_WORKFLOW_WORKTREE'))"
    result = await provider(script, repo, worktrees).run(request(isolation=None))
    assert result.text == f"{repo} None\n"
    assert_nothing_left(repo, worktrees)


def kept_path(text: str) -> Path:
    _, sep, rest = text.rpartition("\n\nWorktree with changes kept at ")
    assert sep, text
    path, _, commit = rest.partition(" (detached from commit ")
    assert commit.endswith(").")
    return Path(path)


CHANGES = {
    "untracked": "open('new.txt', 'w').write('new')",
    "modified": "open('tracked.txt', 'a').write('more')",
    "deleted": "import os; os.remove('tracked.txt')",
    "committed": "import subprocess; open('c.txt', 'w').write('c'); "
                 "subprocess.run(['git', 'add', 'c.txt'], check=True); "
                 "subprocess.run(['git', 'commit', '-qm', 'child'], check=True)",
}


@pytest.mark.anyio
@pytest.mark.parametrize("change", sorted(CHANGES))
async def test_changed_worktree_is_kept_and_reported(repo: Path, worktrees: Path, change: str) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    script = CHANGES[change] + "\nprint('done')"
    result = await provider(script, repo, worktrees).run(request())
    assert result.stop_reason == "completed", result.error
    path = kept_path(result.text or "")
    assert (result.text or "").startswith("done\n")
    assert (result.text or "").endswith(f"(detached from commit {base}).")
    assert path.parent == worktrees.resolve() and path.is_dir()
    assert worktree_paths(repo) == [str(repo.resolve()), str(path)]
    assert git(repo, "status", "--porcelain") == ""  # the main tree is untouched
    assert git(repo, "rev-parse", "HEAD").strip() == base
    if change == "committed":
        assert git(path, "rev-parse", "HEAD").strip() != base
        assert git(path, "status", "--porcelain") == ""
    else:
        assert git(path, "status", "--porcelain") != ""


@pytest.mark.anyio
async def test_ignored_files_do_not_count_as_changes(repo: Path, worktrees: Path) -> None:
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore build")
    script = "import os; os.mkdir('build'); open('build/out', 'w').write('x'); print('ok')"
    result = await provider(script, repo, worktrees).run(request())
    assert result.text == "ok\n"
    assert_nothing_left(repo, worktrees)


@pytest.mark.anyio
async def test_schema_value_is_unaffected_by_the_note(repo: Path, worktrees: Path) -> None:
    script = "open('new.txt', 'w').write('x'); print('{\"n\": 3}')"
    result = await provider(script, repo, worktrees).run(request(schema=SCHEMA))
    assert result.stop_reason == "completed" and result.structured == {"n": 3}
    assert kept_path(result.text or "").is_dir()


@pytest.mark.anyio
async def test_failed_child_keeps_changes_in_its_error(repo: Path, worktrees: Path) -> None:
    changed = await provider("open('x', 'w').write('x'); raise SystemExit(3)", repo, worktrees).run(request())
    assert changed.stop_reason == "error"
    assert "exited with status 3" in (changed.error or "")
    path = Path((changed.error or "").split("kept at ")[1].split(" (detached")[0])
    assert (path / "x").read_text() == "x"
    git(repo, "worktree", "remove", "--force", str(path))
    clean = await provider("raise SystemExit(3)", repo, worktrees).run(request())
    assert clean.stop_reason == "error" and "kept" not in (clean.error or "")
    assert_nothing_left(repo, worktrees)


@pytest.mark.anyio
async def test_outside_a_git_repository_is_an_error(
        tmp_path: Path, worktrees: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # tmp_path may lie in a repository
    with pytest.raises(WorktreeError, match=f"{plain}.* is not inside one"):
        await provider("print('never')", plain, worktrees).run(request())
    assert list(worktrees.iterdir()) == []


@pytest.mark.anyio
async def test_repository_without_commits_is_an_error(tmp_path: Path, worktrees: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(WorktreeError, match="has none yet"):
        await provider("print('never')", empty, worktrees).run(request())
    assert list(worktrees.iterdir()) == []


# Each child records its worktree, then waits until all eight have started: they run at once.
TOGETHER = """
import os, sys, time
board = sys.argv[1]
seq = int(os.environ["DSH_WORKFLOW_SEQ"])
with open(board, "a") as f:
    f.write(os.getcwd() + "\\n")
deadline = time.monotonic() + 20
while len(open(board).read().splitlines()) < 8 and time.monotonic() < deadline:
    time.sleep(0.01)
if seq % 2:
    open("made-by-%d.txt" % seq, "w").write("x")
print(seq)
"""


@pytest.mark.anyio
async def test_eight_concurrent_isolated_children(repo: Path, worktrees: Path, tmp_path: Path) -> None:
    board = tmp_path / "board"
    p = CommandProvider([sys.executable, "-c", TOGETHER, str(board)], cwd=repo, worktree_dir=worktrees)
    results: dict[int, SubagentResult] = {}

    async def one(seq: int) -> None:
        results[seq] = await p.run(request(seq=seq))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for seq in range(1, 9):
                tg.start_soon(one, seq)
    dirs = board.read_text().splitlines()
    assert len(set(dirs)) == 8 and all(Path(d).parent == worktrees.resolve() for d in dirs)
    kept = {seq: kept_path(r.text or "") for seq, r in results.items() if seq % 2}
    assert {seq: r.text for seq, r in results.items() if not seq % 2} == {s: f"{s}\n" for s in (2, 4, 6, 8)}
    assert all((path / f"made-by-{seq}.txt").exists() for seq, path in kept.items())
    assert sorted(worktree_paths(repo)[1:]) == sorted(str(path) for path in kept.values())
    assert sorted(worktrees.iterdir()) == sorted(kept.values())
    assert (repo / ".git" / LOCK_NAME).exists()  # the admin commands were serialized through it


@pytest.mark.anyio
async def test_cancellation_removes_running_childrens_worktrees(
        repo: Path, worktrees: Path, tmp_path: Path) -> None:
    board = tmp_path / "board"
    script = """
import os, sys, time
open("work.txt", "w").write("unfinished")
with open(sys.argv[1], "a") as f:
    f.write("%d\\n" % os.getpid())
time.sleep(60)
"""
    p = CommandProvider([sys.executable, "-c", textwrap.dedent(script), str(board)], cwd=repo,
                        worktree_dir=worktrees, kill_grace_s=0.5)
    async with anyio.create_task_group() as tg:
        for seq in range(1, 9):
            tg.start_soon(p.run, request(seq=seq))
        await await_until(lambda: board.exists() and len(board.read_text().split()) >= 8,
                          what="all eight children to start", timeout=30)
        assert len(worktree_paths(repo)) == 9
        tg.cancel_scope.cancel()
    assert all(gone(int(pid)) for pid in board.read_text().split())
    assert_nothing_left(repo, worktrees)


def slow_checkout(repo: Path, marker: Path, *, where: str) -> None:
    """Make ``git worktree add`` hang at a chosen point and record the pid of what hangs there.

    ``where="hook"``: a post-checkout hook, after git unlocked the new entry.
    ``where="smudge"``: a smudge filter, in the middle of the checkout (the entry still locked).
    """
    hang = f"echo $$ >> {marker}; exec sleep 60"
    if where == "hook":
        hook = repo / ".git" / "hooks" / "post-checkout"
        hook.write_text(f"#!/bin/sh\n{hang}\n")
        hook.chmod(0o755)
    else:
        (repo / ".gitattributes").write_text("*.slow filter=slow\n")
        (repo / "data.slow").write_text("payload\n")
        git(repo, "add", ".gitattributes", "data.slow")
        git(repo, "commit", "-qm", "slow file")
        git(repo, "config", "filter.slow.smudge", f"sh -c '{hang}'")
        git(repo, "config", "filter.slow.clean", "cat")


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["hook", "smudge"])
async def test_cancellation_during_creation_leaves_nothing(
        repo: Path, worktrees: Path, tmp_path: Path, where: str) -> None:
    marker = tmp_path / "hanging"
    slow_checkout(repo, marker, where=where)
    started = tmp_path / "child-started"
    p = provider(f"open({str(started)!r}, 'w')", repo, worktrees)
    with anyio.move_on_after(30) as timeout:
        async with anyio.create_task_group() as tg:
            tg.start_soon(p.run, request())
            await await_until(lambda: marker.exists() and marker.read_text().strip(),
                              what="the checkout to hang", timeout=30)
            if where == "smudge":
                assert "locked initializing" in git(repo, "worktree", "list", "--porcelain")
            tg.cancel_scope.cancel()
    assert not timeout.cancelled_caught
    assert not started.exists()
    assert all(gone(int(pid)) for pid in marker.read_text().split())
    assert_nothing_left(repo, worktrees)


class Isolating:
    """Asks for a worktree on every call, standing in for scripts that pass ``isolation``."""

    def __init__(self, inner: CommandProvider) -> None:
        self.inner = inner

    async def run(self, request: SubagentRequest) -> SubagentResult:
        return await self.inner.run(request.model_copy(update={"isolation": "worktree"}))


@pytest.fixture(params=["quickjs", "subprocess"])
def engine_factory(request: pytest.FixtureRequest) -> Iterator[Any]:
    factory = quickjs_factory if request.param == "quickjs" else subprocess_factory(1)
    if factory is None:
        pytest.skip(ENGINE_SKIPS["subprocess"])
    yield factory


@pytest.mark.anyio
async def test_engine_exit_leaves_no_worktree(
        repo: Path, worktrees: Path, tmp_path: Path, engine_factory: Any) -> None:
    board = tmp_path / "board"
    script = f"""
import os, time
open("work.txt", "w").write("unfinished")
open({str(board)!r}, "a").write("%d\\n" % os.getpid())
time.sleep(60)
"""
    inner = CommandProvider([sys.executable, "-c", textwrap.dedent(script)], cwd=repo,
                            worktree_dir=worktrees, kill_grace_s=0.5)
    config = EngineConfig(max_concurrent_agents=4, dispose_grace_s=5.0)
    async with engine_factory(config, Isolating(inner)) as engine:
        run = engine.start(WorkflowStartRequest(
            meta={"name": "isolated", "description": "four isolated agents"},
            script="return await parallel([1, 2, 3, 4].map((i) => () => agent('task ' + i)))"))
        await await_until(lambda: board.exists() and len(board.read_text().split()) >= 4,
                          what="all four children to start", timeout=30)
        assert len(worktree_paths(repo)) == 5
    result = await run.result()
    assert result.stop_reason != "completed"
    assert all(gone(int(pid)) for pid in board.read_text().split())
    assert_nothing_left(repo, worktrees)


@pytest.mark.anyio
async def test_removal_copes_with_a_locked_entry_whose_folder_lost_its_git_file(
        repo: Path, worktrees: Path) -> None:
    """The state a creation killed between making the entry and writing the folder's ``.git``
    leaves: ``remove`` refuses it, so the folder goes by hand, then ``unlock`` and ``prune``."""
    from dsh_workflow._providers.worktree import fresh_worktree

    async with fresh_worktree(repo, parent_dir=worktrees, tag="x") as worktree:
        (entry,) = (repo / ".git" / "worktrees").iterdir()
        (entry / "locked").write_text("initializing")
        (Path(worktree.path) / ".git").unlink()
        assert "locked initializing" in git(repo, "worktree", "list", "--porcelain")
    assert_nothing_left(repo, worktrees)


@pytest.mark.anyio
async def test_engine_run_outside_a_repository_fails_clearly(
        tmp_path: Path, worktrees: Path, engine_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    inner = CommandProvider([sys.executable, "-c", "print('never')"], cwd=plain, worktree_dir=worktrees)
    async with engine_factory(EngineConfig(), Isolating(inner)) as engine:
        run = engine.start(WorkflowStartRequest(
            meta={"name": "isolated", "description": "one isolated agent"},
            script="return await agent('task')"))
        result = await run.result()
    assert result.stop_reason == "error" and result.error is not None
    assert "AGENT_FAILED" in result.error, result.error
    assert "WorktreeError" in result.error and f"{plain} is not inside one" in result.error
    assert list(worktrees.iterdir()) == []


@pytest.mark.anyio
async def test_folder_missing_from_the_commit_is_an_error(repo: Path, worktrees: Path) -> None:
    untracked = repo / "scratch"
    untracked.mkdir()
    (untracked / "notes.txt").write_text("not committed")
    with pytest.raises(WorktreeError, match="is not in commit"):
        await provider("print('never')", repo, worktrees, cwd=untracked).run(request())
    untracked.joinpath("notes.txt").unlink()
    untracked.rmdir()
    assert_nothing_left(repo, worktrees)
