"""A broken row is an error, not a crash (docs/durable-runs.md): the command line in real processes,
and the viewer's pages, over a real store file with corrupt rows written by ``sqlite3``.

``runs`` lists the rest and marks each broken run with what is wrong; ``show``, ``logs`` and
``resume`` of a broken run exit 2 with one ``Error:`` line naming the run; no traceback ever."""

from __future__ import annotations

import html
import json
from pathlib import Path

import anyio
import pytest
from _broken_store import BROKEN_EVENTS, BROKEN_JOURNAL, CORRUPTIONS, GOOD, make_store
from _support import run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("broken") / "runs.sqlite3"
    anyio.run(make_store, path)
    return path


def test_runs_lists_the_rest_and_marks_each_broken_run(store: Path, tmp_path: Path) -> None:
    done = run_cli("runs", "--store", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    for run_id in (*GOOD, BROKEN_EVENTS, BROKEN_JOURNAL):
        [row] = [line for line in lines if line.startswith(run_id + " ")]
        assert " completed " in row
    for run_id in CORRUPTIONS:
        [row] = [line for line in lines if line.startswith(run_id + " ")]
        assert " broken " in row
        assert any(line.startswith(f"run {run_id} is broken: its ") for line in lines), lines
    listed = run_cli("runs", "--json", "--store", store, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    runs = {run["id"]: run for run in json.loads(listed.stdout)}
    assert runs["bad-meta"]["status"] == "broken" and "meta" in runs["bad-meta"]["problem"]
    assert runs["good-1"]["status"] == "completed" and "problem" not in runs["good-1"]
    only = run_cli("runs", "--status", "broken", "--json", "--store", store, cwd=tmp_path)
    assert {run["id"] for run in json.loads(only.stdout)} == set(CORRUPTIONS)


@pytest.mark.parametrize("command", [["show"], ["show", "--json"], ["logs"], ["resume"],
                                     ["save"]])
@pytest.mark.parametrize("run_id", ["bad-meta", "bad-status", "blob-script"])
def test_a_command_aimed_at_a_broken_run_exits_2_naming_it(
        store: Path, tmp_path: Path, command: list[str], run_id: str) -> None:
    done = run_cli(*command, run_id, "--store", store, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("Error: ") and f"run {run_id!r} is broken: its " in line


def test_broken_events_and_journal_are_named_too(store: Path, tmp_path: Path) -> None:
    for argv in (["logs", BROKEN_EVENTS], ["show", BROKEN_EVENTS]):
        done = run_cli(*argv, "--store", store, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"run {BROKEN_EVENTS!r} is broken" in done.stderr
    done = run_cli("resume", BROKEN_JOURNAL, "--store", store, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert f"run {BROKEN_JOURNAL!r} has a broken journal: its journal entry agent 1 is not valid JSON" in line
    good = run_cli("show", "good-2", "--store", store, cwd=tmp_path)  # the others still read
    assert good.returncode == 0 and "status:      completed" in good.stdout, good.stderr


def test_the_viewer_lists_broken_runs_and_says_what_is_wrong(store: Path) -> None:
    from starlette.testclient import TestClient

    from dsh_workflow._ui.app import create_app

    app = create_app(str(store), token="a-test-token", port=80)
    with TestClient(app, base_url="http://127.0.0.1",
                    headers={"Authorization": "Bearer a-test-token"}) as client:
        for url in ("/", "/runs-table", "/?status=broken"):
            page = client.get(url)
            assert page.status_code == 200, (url, page.text)
            for run_id in CORRUPTIONS:
                assert f'data-id="{run_id}" data-status="broken"' in page.text
        assert 'data-id="good-1" data-status="completed"' in client.get("/").text
        broken = client.get("/runs/bad-meta")
        assert broken.status_code == 200
        assert "broken" in broken.text and "its meta is not valid JSON" in broken.text
        events_page = client.get(f"/runs/{BROKEN_EVENTS}")  # its events cannot be read
        assert events_page.status_code == 200
        assert f"run {BROKEN_EVENTS!r} is broken: its events" in html.unescape(events_page.text)
        assert client.get("/api/runs/bad-meta/stream").status_code == 409
        # a run whose events cannot be read: its stream ends as broken and says why
        stream = client.get(f"/api/runs/{BROKEN_EVENTS}/stream")
        assert stream.status_code == 200
        [end] = [line for line in stream.text.splitlines() if line.startswith("data: {")]
        payload = json.loads(end.removeprefix("data: "))
        assert payload["status"] == "broken"
        assert f"run {BROKEN_EVENTS!r} is broken" in payload["error"]["message"]
