"""The whole result, everywhere (SPEC §23), as real processes: `dsh-workflow run` prints its
viewer link on one unbroken line in a narrow terminal and a final line that is no green check
when children failed; the viewer (`dsh-workflow ui`, over HTTP with its token) has a Failed
column on its run list and failed and cancelled counts on the run page; a cancel from the
viewer names its origin."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _support import run_beside_playwright, wait_until

from dsh_workflow import SQLiteRunStore

REPO = Path(__file__).resolve().parents[2]
META = "export const meta = { name: 'outcomes', description: 'failed and cancelled' };\n"
#: A command agent: "bad" fails (exit 3), "slow" sleeps, anything else answers.
AGENT = ("import sys, time; p = sys.stdin.read(); "
         "time.sleep(60) if p.startswith('slow') else None; "
         "sys.exit(print('quota exhausted', file=sys.stderr) or 3) if p.startswith('bad') "
         "else print('ok ' + p)")
COMMAND = ["--provider", "command", "--command", f"{sys.executable} -c \"{AGENT}\""]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DSH_WORKFLOW_"))
           and k not in ("COLUMNS", "FORCE_COLOR", "NO_COLOR", "TERM")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


class Viewer:
    """``dsh-workflow ui --port 0`` on a store, as a child process; its token is read from the
    address it prints."""

    def __init__(self, store: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dsh_workflow", "ui", "--store", str(store), "--port", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
        assert self.process.stderr is not None
        line = self.process.stderr.readline()
        match = re.match(r"viewer: (http://127\.0\.0\.1:\d+)/\?token=(\S+)", line)
        if match is None:
            self.stop()
            raise AssertionError(f"the viewer did not start: {line!r}")
        self.url = match.group(1)
        self.token = urllib.parse.unquote(match.group(2))

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, headers={"Authorization": f"Bearer {self.token}"},
                         timeout=10)

    def post(self, path: str) -> httpx.Response:
        return httpx.post(self.url + path, timeout=10, headers={
            "Authorization": f"Bearer {self.token}", "Origin": self.url})

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        assert self.process.stderr is not None
        self.process.stderr.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new, empty store file (the viewer serves only a store that exists)."""
    path = tmp_path_factory.mktemp("outcomes") / "runs.sqlite3"

    async def create() -> None:
        async with SQLiteRunStore(path):
            pass

    run_beside_playwright(create)
    return path


@pytest.fixture(scope="module")
def viewer(store: Path) -> Iterator[Viewer]:
    started = Viewer(store)
    yield started
    started.stop()


def _run(store: Path, script: Path, *extra: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dsh_workflow", "run", str(script), "--store", str(store),
         *COMMAND, *extra], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, encoding="utf-8", env=_env(**env))


@pytest.fixture(scope="module")
def finished(store: Path, viewer: Viewer, tmp_path_factory: pytest.TempPathFactory,
             ) -> tuple[str, str]:
    """A run in a narrow terminal (rich's live panel, 40 columns) that completed with one
    child failed and one cancelled (still running when the script returned): its run id and
    its stderr without terminal codes."""
    script = tmp_path_factory.mktemp("script") / "s.js"
    script.write_text(META + "agent('slow'); await agent('bad'); return 1\n", encoding="utf-8")
    child = _run(store, script, "--json", FORCE_COLOR="1", TERM="xterm-256color", COLUMNS="40")
    out, err = child.communicate(timeout=90)
    assert child.returncode == 0, err
    result = json.loads(out)
    assert (result["agents_failed"], result["agents_cancelled"]) == (1, 1)
    return result["run_id"], ANSI.sub("", err).replace("\r", "\n")


def test_the_viewer_link_is_one_unbroken_line_in_a_narrow_terminal(
        finished: tuple[str, str], viewer: Viewer) -> None:
    run_id, err = finished
    quoted = urllib.parse.quote(viewer.token, safe="")
    link = f"{viewer.url}/runs/{run_id}?token={quoted}"
    assert len(link) > 40  # wider than the terminal: rich would have broken it
    assert f"viewer: {link}" in err.splitlines(), err


def test_the_final_line_is_a_warning_with_the_counts_when_children_failed(
        finished: tuple[str, str]) -> None:
    _, err = finished
    final = next(line for line in err.splitlines() if line.startswith(("✔", "⚠", "■", "✖")))
    assert final.startswith("⚠ outcomes completed"), final
    assert "1 failed, 1 cancelled" in " ".join(err.split())  # the panel may fold the line


def test_the_run_list_has_a_failed_column(finished: tuple[str, str], viewer: Viewer) -> None:
    run_id, _ = finished
    for path in ("/", "/runs-table"):
        page = viewer.get(path)
        assert page.status_code == 200
        if path == "/":
            headers = re.findall(r"<th[^>]*>([^<]+)</th>", page.text)
            assert headers[headers.index("Replayed") + 1] == "Failed"
        row = re.search(rf'<tr class="run" data-id="{run_id}".*?</tr>', page.text, re.S)
        assert row is not None
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
        assert cells[4].startswith("1") and "+1 cancelled" in cells[4], cells


def test_the_run_page_counts_failed_and_cancelled(finished: tuple[str, str],
                                                  viewer: Viewer) -> None:
    run_id, _ = finished
    page = viewer.get(f"/runs/{run_id}")
    assert page.status_code == 200
    assert '<dd id="failed-count">1</dd>' in page.text
    assert '<dd id="cancelled-count">1</dd>' in page.text


def test_a_cancel_from_the_viewer_names_its_origin(store: Path, viewer: Viewer,
                                                   tmp_path: Path) -> None:
    script = tmp_path / "slow.js"
    script.write_text(META + "return await agent('slow')\n", encoding="utf-8")
    child = _run(store, script, "--json")
    try:
        def running() -> str | None:
            listed = viewer.get("/runs-table").text
            found = re.search(r'data-id="([^"]+)" data-status="running"', listed)
            return found.group(1) if found else None

        # each look asks the viewer: at most ten a second
        run_id = wait_until(running, what="the run to start", timeout=30, interval=0.1)
        assert viewer.post(f"/api/runs/{run_id}/cancel").status_code == 202
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    result = json.loads(out)
    assert result["stop_reason"] == "cancelled"
    assert result["error"] == "workflow run cancelled: cancelled from the viewer"
    assert (result["agents_failed"], result["agents_cancelled"]) == (0, 1)
    assert result["failures"] == [{"seq": 1, "label": result["failures"][0]["label"],
                                   "kind": "cancelled", "cause": None,
                                   "message": "cancelled from the viewer"}]


def test_runs_and_show_count_cancelled_apart(finished: tuple[str, str], store: Path) -> None:
    run_id, _ = finished

    def cli(*argv: str) -> str:
        done = subprocess.run([sys.executable, "-m", "dsh_workflow", *argv, "--store",
                               str(store)], cwd=REPO, capture_output=True, text=True,
                              encoding="utf-8", env=_env(), timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = {run["id"]: run for run in json.loads(cli("runs", "--json"))}
    assert (listed[run_id]["agents_failed"], listed[run_id]["agents_cancelled"]) == (1, 1)
    table = cli("runs").splitlines()
    header = table[0].split()
    row = next(line.split() for line in table if line.startswith(run_id))
    assert row[header.index("FAILED")] == "1" and row[header.index("CANCELLED")] == "1"
    assert "agents:      2 started, 1 failed, 1 cancelled, 0 replayed" in cli("show", run_id)
    assert "[done] completed in" in cli("logs", run_id)
    assert "1 failed, 1 cancelled" in cli("logs", run_id)
