"""WorkflowLibrary: saved workflows found by meta.name on a search path (docs/embedding.md, "Saved
workflows and `workflow()`")."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from dsh_workflow import WorkflowLibrary
from dsh_workflow._library import read_regular_text, read_workflow_file


def saved(folder: Path, file: str, name: str, body: str = "return 1",
          description: str = "a saved workflow") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(f"export const meta = {{ name: '{name}', description: '{description}' }};\n"
                    + body, "utf-8")
    return path


def test_found_by_meta_name_not_file_name(tmp_path: Path) -> None:
    saved(tmp_path / "a", "whatever.js", "review-all")
    library = WorkflowLibrary([tmp_path / "a"])
    found = library.get("review-all")
    assert found is not None and found.path.name == "whatever.js"
    assert library.get("whatever") is None
    assert library.names() == ["review-all"]


def test_first_hit_wins_across_folders_and_missing_folders_are_empty(tmp_path: Path) -> None:
    saved(tmp_path / "project", "x.js", "shared", description="project copy")
    saved(tmp_path / "user", "x.js", "shared", description="user copy")
    saved(tmp_path / "user", "y.js", "user-only")
    library = WorkflowLibrary([tmp_path / "missing", tmp_path / "project", tmp_path / "user"])
    shared = library.get("shared")
    assert shared is not None and shared.description == "project copy"
    assert library.names() == ["shared", "user-only"]
    assert library.problems == []


def test_broken_files_are_reported_with_path_and_reason(tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    saved(folder, "good.js", "good")
    (folder / "no-meta.js").write_text("return 1", "utf-8")
    (folder / "bad-literal.js").write_text("export const meta = { name: x };\nreturn 1", "utf-8")
    saved(folder, "bad-body.js", "bad-body", body="return (")
    (folder / "bad-meta.js").write_text("export const meta = { name: '' };\nreturn 1", "utf-8")
    (folder / "notes.txt").write_text("not a workflow", "utf-8")
    library = WorkflowLibrary([folder])
    assert library.names() == ["good"]
    reasons = {p.path.name: p.reason for p in library.problems}
    assert set(reasons) == {"no-meta.js", "bad-literal.js", "bad-body.js", "bad-meta.js"}
    assert "export const meta" in reasons["no-meta.js"]
    assert "meta block" in reasons["bad-literal.js"]
    assert "line" in reasons["bad-body.js"]
    assert "description" in reasons["bad-meta.js"]


def test_default_search_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "project"
    saved(project / ".claude" / "workflows", "a.js", "from-claude-project")
    saved(project / ".dsh-workflow" / "workflows", "a.js", "dup", description="project")
    saved(home / ".config" / "dsh-workflow" / "workflows", "b.js", "dup", description="user")
    saved(home / ".claude" / "workflows", "c.js", "from-claude-user")
    library = WorkflowLibrary.default(cwd=project)
    assert library.paths == [project / ".dsh-workflow" / "workflows",
                             project / ".claude" / "workflows",
                             home / ".config" / "dsh-workflow" / "workflows",
                             home / ".claude" / "workflows"]
    assert library.names() == ["dup", "from-claude-project", "from-claude-user"]
    dup = library.get("dup")
    assert dup is not None and dup.description == "project"


def test_script_paths_stay_inside_the_workflow_folders(tmp_path: Path) -> None:
    base = tmp_path / "scripts"
    saved(base / "sub", "helper.js", "helper")
    outside = saved(tmp_path / "elsewhere", "secret.js", "secret")
    (base / "data.txt").write_text("text", "utf-8")
    library = WorkflowLibrary([tmp_path / "lib"], base_dir=base)
    assert library.resolve_script_path("sub/helper.js").name == "helper"
    for bad in [str(outside), "../elsewhere/secret.js", "data.txt", "missing.js"]:
        with pytest.raises(ValueError):
            library.resolve_script_path(bad)


def test_script_path_refusals_do_not_tell_which_host_paths_exist(tmp_path: Path) -> None:
    """A missing path, an existing file outside the folders, a symlink out of them and a file
    that is not .js get the same text (with the path as given), so a script cannot probe the
    host's files."""
    base = tmp_path / "scripts"
    saved(base, "ok.js", "ok")
    outside = saved(tmp_path / "elsewhere", "secret.js", "secret")
    (base / "link.js").symlink_to(outside)
    (base / "notes.txt").write_text("text", "utf-8")
    library = WorkflowLibrary([tmp_path / "lib"], base_dir=base)
    texts: dict[str, str] = {}
    for name, target in {"exists-outside": str(outside),
                         "missing-outside": str(tmp_path / "elsewhere" / "nothing.js"),
                         "missing-dir": str(tmp_path / "nowhere" / "x.js"),
                         "relative-outside": "../elsewhere/secret.js",
                         "relative-missing": "../elsewhere/nothing.js",
                         "missing-inside": "missing.js", "symlink-out": "link.js",
                         "not-js": "notes.txt"}.items():
        with pytest.raises(ValueError) as caught:
            library.resolve_script_path(target)
        texts[name] = str(caught.value).replace(repr(target), "<path>")
    assert set(texts.values()) == {"<path> is not a .js file inside the workflow folders"}, texts


def _bounded(call: Any, seconds: float = 10) -> Any:
    """``call()`` in a daemon thread: a call that blocks fails the test instead of hanging it."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(("ok", call()))
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome.append(("raised", exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the call blocked"
    kind, value = outcome[0]
    if kind == "raised":
        raise value
    return value


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_fifos_sockets_and_devices_named_js_are_skipped_never_opened_blocking(
        tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    saved(folder, "good.js", "good")
    os.mkfifo(folder / "pipe.js")
    (folder / "dev.js").symlink_to(os.devnull)
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(folder / "sock.js"))
        (folder / "dir.js").mkdir()
        library = _bounded(lambda: WorkflowLibrary([folder]))
    finally:
        listener.close()
    assert library.names() == ["good"]
    problems = {problem.path.name: problem.reason for problem in library.problems}
    assert set(problems) == {"pipe.js", "dev.js", "sock.js"}, problems
    assert all("not a regular file" in reason for reason in problems.values()), problems
    with pytest.raises(ValueError, match="not a regular file"):
        _bounded(lambda: read_workflow_file(folder / "pipe.js"))  # no stat-first guard here
    with pytest.raises(ValueError, match="not a regular file"):
        _bounded(lambda: read_regular_text(folder / "pipe.js"))
    for name in ("pipe.js", "dev.js", "dir.js"):
        with pytest.raises(ValueError, match=r"is not a \.js file inside the workflow folders"):
            _bounded(lambda name=name: library.resolve_script_path(name))


def test_read_regular_text_keeps_read_text_semantics(tmp_path: Path) -> None:
    path = tmp_path / "a.js"
    path.write_bytes(b"one\r\ntwo\rthree\n\xc3\xa9")
    assert read_regular_text(path) == path.read_text("utf-8") == "one\ntwo\nthree\né"
    with pytest.raises(ValueError, match="larger than 4 bytes"):
        read_regular_text(path, max_bytes=4)
    path.write_bytes(b"\xff")
    with pytest.raises(ValueError, match="cannot be read"):
        read_regular_text(path)
    with pytest.raises(ValueError, match="cannot be read"):
        read_regular_text(tmp_path / "missing.js")


def test_a_script_path_resolves_against_the_project_root_first(tmp_path: Path) -> None:
    """SPEC §26: ``workflow({scriptPath: '.claude/workflows/research.js'})`` from a script in
    another folder finds the project's file, as Claude Code does; a path only the calling
    script's folder has still resolves there."""
    project = tmp_path / "project"
    saved(project / ".claude" / "workflows", "research.js", "research")
    saved(project / "scripts" / ".claude" / "workflows", "research.js", "shadowed")
    saved(project / "scripts", "local.js", "local")
    library = WorkflowLibrary.default(cwd=project, base_dir=project / "scripts")
    assert library.project_root == project
    assert library.resolve_script_path(".claude/workflows/research.js").name == "research"
    assert library.resolve_script_path("local.js").name == "local"
    with pytest.raises(ValueError, match=r"is not a \.js file inside the workflow folders"):
        library.resolve_script_path("missing.js")
