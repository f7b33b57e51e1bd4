"""The run store's files are owner-only (docs/durable-runs.md; SECURITY.md): the database, its
WAL/SHM files, its owners' folder and lock files, whatever the umask and whether or not the
store's folder already existed. Real processes with a real ``umask 022``, real files, ``stat``."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _support import REPO, run_cli

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")

#: Opens a store under umask 022, creates a run, and reports the modes of every file of the
#: store while it is open (the WAL and SHM files exist only then).
_OPEN_AND_STAT = """
import json, os, stat, sys
import anyio
from dsh_workflow import SQLiteRunStore

path = sys.argv[1]
os.umask(0o022)

def mode(p):
    return oct(stat.S_IMODE(os.stat(p).st_mode)) if os.path.exists(p) else None

async def main():
    async with SQLiteRunStore(path) as store:
        await store.create_run("r1", meta={"name": "n"}, script="return 1")
        await store.append_events("r1", [{"event": "X"}])
        owners = path + "-owners"
        locks = sorted(os.listdir(owners))
        print(json.dumps({
            "db": mode(path), "wal": mode(path + "-wal"), "shm": mode(path + "-shm"),
            "owners": mode(owners), "locks": [mode(os.path.join(owners, n)) for n in locks],
            "folder": mode(os.path.dirname(path))}))

anyio.run(main)
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_WORKFLOW_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _modes_while_open(path: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _OPEN_AND_STAT, str(path)], env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]  # the child prints an object


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_store_in_an_existing_folder_is_owner_only_under_umask_022(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    modes = _modes_while_open(folder / "runs.sqlite3")
    assert modes["db"] == "0o600"
    assert modes["wal"] == "0o600" and modes["shm"] == "0o600"  # SQLite copies the db's mode
    assert modes["owners"] == "0o700"
    assert modes["locks"] == ["0o600"]
    assert modes["folder"] == "0o755"  # a folder the store did not create is left alone


def test_an_existing_store_with_wide_modes_is_tightened(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    old = os.umask(0o022)
    try:
        conn = sqlite3.connect(path)  # what an older release left: 0644 files
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.close()
        os.makedirs(str(path) + "-owners", mode=0o755)
    finally:
        os.umask(old)
    os.chmod(path, 0o644)
    os.chmod(str(path) + "-owners", 0o755)
    (tmp_path / "runs.sqlite3-wal").touch(mode=0o644)
    os.chmod(tmp_path / "runs.sqlite3-wal", 0o644)
    # Another program's database is refused, but its modes are still never left wide: the
    # file is refused after it was tightened (opening it is what shows whose it is).
    done = subprocess.run([sys.executable, "-c", _OPEN_AND_STAT, str(path)], env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "another program" in done.stderr
    assert _mode(path) == 0o600
    fresh = tmp_path / "mine.sqlite3"
    sqlite3.connect(fresh).close()
    os.chmod(fresh, 0o664)
    os.makedirs(str(fresh) + "-owners", mode=0o755)
    os.chmod(str(fresh) + "-owners", 0o755)
    modes = _modes_while_open(fresh)
    assert (modes["db"], modes["wal"], modes["shm"], modes["owners"]) == (
        "0o600", "0o600", "0o600", "0o700")


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, cwd=cwd, umask=0o022)


SCRIPT = ("export const meta = { name: 'private', description: 'a private run' };\n"
          "return await agent('hello');\n")


def test_the_command_line_creates_an_owner_only_store_in_an_existing_folder(
        tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    os.chmod(folder, 0o755)
    (folder / "s.js").write_text(SCRIPT, encoding="utf-8")
    store = folder / "runs.sqlite3"
    done = _cli("run", "s.js", "-q", "--store", str(store), cwd=folder)
    assert done.returncode == 0, done.stderr
    assert _mode(store) == 0o600
    for side in ("-wal", "-shm"):
        if Path(str(store) + side).exists():
            assert _mode(Path(str(store) + side)) == 0o600
    assert _mode(Path(str(store) + "-owners")) == 0o700
    # the default store: its folder is created owner-only, its file too
    done = _cli("run", "s.js", "-q", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert _mode(folder / ".dsh-workflow") == 0o700
    assert _mode(folder / ".dsh-workflow" / "runs.sqlite3") == 0o600
