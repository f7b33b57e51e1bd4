"""The run viewer (README, "Run viewer"): `dsh-workflow ui` as a real process, pages loaded in a real
headless Chromium (Debian's `chromium`, driven by Playwright without a browser download).

Screenshots of every page a test loads are saved under the test's tmp folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dsh_workflow import Usage
from dsh_workflow._cli.ui import announce_viewer
from dsh_workflow._store import RunRecord, StoredEvent
from dsh_workflow._ui import beacon
from dsh_workflow._ui.summary import Counts, count_events, error_view, format_duration, run_row

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _viewer_runs import make_runs  # noqa: E402 - found through the sys.path entry above

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium"
                                         if os.path.exists("/usr/bin/chromium") else None)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install -y chromium)")


# -- a viewer process ------------------------------------------------------------------------


class Viewer:
    """``dsh-workflow ui --port 0`` on a store, as a child process."""

    def __init__(self, store: str) -> None:
        self.store = store
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dsh_workflow", "ui", "--store", store, "--port", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert self.process.stderr is not None
        line = self.process.stderr.readline()
        match = re.match(r"viewer: (http://127\.0\.0\.1:\d+)/", line)
        if match is None:
            self.stop()
            raise AssertionError(f"the viewer did not start: {line!r}")
        self.url = match.group(1)

    def stop(self, how: int = signal.SIGINT) -> int:
        if self.process.poll() is None:
            self.process.send_signal(how)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        assert self.process.stderr is not None
        self.process.stderr.close()
        return self.process.returncode


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str], dict[str, int]]:
    store = str(tmp_path_factory.mktemp("viewer") / "runs.sqlite3")
    return (store, *make_runs(store))


@pytest.fixture(scope="module")
def runs(made: tuple[str, dict[str, str], dict[str, int]]) -> tuple[str, dict[str, str]]:
    """The store file and its finished runs' ids by name."""
    return made[0], made[1]


@pytest.fixture(scope="module")
def viewer(runs: tuple[str, dict[str, str]]) -> Iterator[Viewer]:
    started = Viewer(runs[0])
    yield started
    assert started.stop() == 0
    assert not os.path.exists(beacon.beacon_path(runs[0])), "the viewer left its beacon"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, tmp_path: pathlib.Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("console", lambda message: errors.append(message.text)
              if message.type == "error" else None)
    yield opened
    opened.screenshot(path=str(tmp_path / "page.png"), full_page=True)
    context.close()
    assert errors == [], errors


def _ended(page: Any, timeout_s: float = 20) -> None:
    page.wait_for_selector('#run[data-live="ended"]', timeout=timeout_s * 1000)


def _chart(page: Any) -> dict[str, Any]:
    """What the timeline chart draws: bar count per dataset label, and its canvas size."""
    return page.evaluate("""() => {
        const chart = Chart.getChart(document.getElementById('timeline-canvas'));
        if (!chart) return null;
        const sets = {};
        for (const d of chart.data.datasets) sets[d.label] = d.data.length;
        return {sets, labels: chart.data.labels.length,
                width: chart.canvas.width, height: chart.canvas.height};
    }""")


# -- the run list ----------------------------------------------------------------------------


@needs_chromium
def test_the_list_shows_finished_runs_newest_first(
        viewer: Viewer, page: Any, runs: tuple[str, dict[str, str]],
        made: tuple[str, dict[str, str], dict[str, int]], tmp_path: pathlib.Path) -> None:
    page.goto(viewer.url + "/")
    rows = page.locator("tr.run")
    names = runs[1]
    ids = [rows.nth(i).get_attribute("data-id") for i in range(rows.count())]
    ids = [i for i in ids if i in names.values()]  # live runs of other tests may be there too
    assert ids == [names[n] for n in ("fanout-1000", "research-resumed", "throws",
                                      "bad-option", "research-report")]
    report = page.locator(f'tr.run[data-id="{names["research-report"]}"]')
    cells = [report.locator("td").nth(i).inner_text() for i in range(8)]
    assert cells[0].startswith("research-report")
    assert cells[1:5] == ["completed", "6", "0", str(made[2]["research-report"])]
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", cells[5])
    assert re.match(r"[\d.]+ (ms|s)", cells[6])
    assert cells[7] == "—"  # echo children have no cost
    resumed = page.locator(f'tr.run[data-id="{names["research-resumed"]}"] td')
    assert resumed.nth(3).inner_text() == "5"  # replayed
    page.screenshot(path=str(tmp_path / "list.png"), full_page=True)


@needs_chromium
def test_the_list_filters_by_status_and_name(viewer: Viewer, page: Any,
                                            runs: tuple[str, dict[str, str]]) -> None:
    page.goto(viewer.url + "/")
    page.select_option("#status-filter", "error")  # submits the form
    page.wait_for_url(re.compile(r"status=error"))
    statuses = page.locator("tr.run").evaluate_all("rows => rows.map(r => r.dataset.status)")
    assert statuses == ["error", "error"]
    page.select_option("#status-filter", "")
    page.wait_for_url(re.compile(r"status=(&|$)"))
    page.fill("#name-filter", "RESEARCH")  # case-insensitive, applied while typing
    page.wait_for_function("document.querySelectorAll('tr.run').length === 2")
    shown = set(page.locator("tr.run").evaluate_all("rows => rows.map(r => r.dataset.id)"))
    assert shown == {runs[1]["research-report"], runs[1]["research-resumed"]}
    page.fill("#name-filter", "no such run")
    page.wait_for_selector("tr.empty")


# -- a run page ------------------------------------------------------------------------------


@needs_chromium
def test_a_run_page_shows_tree_timeline_log_script_args_and_result(
        viewer: Viewer, page: Any, runs: tuple[str, dict[str, str]],
        tmp_path: pathlib.Path) -> None:
    page.goto(f"{viewer.url}/runs/{runs[1]['research-report']}")
    _ended(page)
    assert page.inner_text("#run-status") == "completed"
    assert page.is_hidden("#error-box")
    phases = page.locator("details.phase").evaluate_all("ds => ds.map(d => d.dataset.phase)")
    assert phases == ["research", "write"]
    research = page.locator('details.phase[data-phase="research"] tr.agent')
    assert research.count() == 4
    first = [research.nth(0).locator("td").nth(i).inner_text() for i in range(6)]
    assert first[:3] == ["1", "research alpha", "completed"]
    assert first[3] == "—"  # the events carry no model name yet
    assert int(first[4]) > 0
    assert re.match(r"\d+ ms|[\d.]+ s", first[5])
    assert page.inner_text("#agent-count") == "6"
    page.wait_for_function("document.getElementById('timeline').dataset.bars === '6'")
    assert _chart(page)["sets"] == {"completed": 6}
    assert page.locator("#log li").all_inner_texts()[0].endswith("collected 4 notes")
    script = page.locator("#script")
    assert "phase(\"research\")" in script.inner_text()
    assert script.locator(".hl span").count() > 20  # highlighted tokens
    assert json.loads(page.inner_text("#args")) == {"topics": 4}
    result = json.loads(page.inner_text("#result"))
    assert result["topics"] == 4 and result["review"].startswith("echo: review the draft")
    page.screenshot(path=str(tmp_path / "run.png"), full_page=False)


@needs_chromium
@pytest.mark.parametrize(("name", "code", "message"), [
    ("bad-option", "UNSUPPORTED_OPTION", 'agent() option "bogus" is not recognized'),
    ("throws", "uncaught script error", "Error: the script gave up"),
])
def test_a_failed_run_shows_its_error_and_code(viewer: Viewer, page: Any,
                                               runs: tuple[str, dict[str, str]],
                                               name: str, code: str, message: str) -> None:
    page.goto(f"{viewer.url}/runs/{runs[1][name]}")
    _ended(page)
    assert page.inner_text("#run-status") == "error"
    assert page.is_visible("#error-box")
    assert page.inner_text("#error-code") == code
    assert page.inner_text("#error-message").startswith(message)
    assert page.inner_text("#result").strip() == "null"


@needs_chromium
def test_replayed_agents_are_marked_in_tree_and_timeline(viewer: Viewer, page: Any,
                                                         runs: tuple[str, dict[str, str]]) -> None:
    page.goto(f"{viewer.url}/runs/{runs[1]['research-resumed']}")
    _ended(page)
    replayed = page.locator("tr.agent.replayed")
    assert replayed.count() == 5
    assert set(replayed.evaluate_all("rs => rs.map(r => r.dataset.status)")) == {"replayed"}
    assert page.locator("tr.agent:not(.replayed)").count() == 1
    assert page.inner_text("#replayed-count") == "5"
    assert page.inner_text("#agent-count") == "1"
    page.wait_for_function("document.getElementById('timeline').dataset.bars === '6'")
    assert _chart(page)["sets"] == {"completed": 1, "replayed": 5}


@needs_chromium
def test_a_thousand_agent_run_renders_within_seconds(viewer: Viewer, page: Any,
                                                     runs: tuple[str, dict[str, str]]) -> None:
    started = time.monotonic()
    page.goto(f"{viewer.url}/runs/{runs[1]['fanout-1000']}")
    page.wait_for_function("document.getElementById('timeline').dataset.bars === '1000' "
                           "&& document.querySelectorAll('tr.agent').length === 1000",
                           timeout=30_000)
    elapsed = time.monotonic() - started
    print(f"1000-agent run page rendered in {elapsed:.2f} s")
    assert elapsed < 10, f"rendering 1000 agents took {elapsed:.1f} s"
    assert page.locator('details.phase[data-phase="odd"] tr.agent').count() == 500
    # still responsive: a click toggles a phase at once
    page.click('details.phase[data-phase="even"] > summary', timeout=2_000)
    assert page.evaluate("document.querySelector('details.phase[data-phase=\"even\"]').open") \
        is False


# -- live updates ----------------------------------------------------------------------------


@needs_chromium
def test_a_live_run_grows_on_the_page_without_reloading(viewer: Viewer, page: Any,
                                                        runs: tuple[str, dict[str, str]],
                                                        tmp_path: pathlib.Path) -> None:
    agents = 16
    child = subprocess.Popen([sys.executable, str(HERE / "_viewer_runs.py"), "live", runs[0],
                              str(agents), "0.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        run_id = child.stdout.readline().strip()
        assert run_id, "the live run did not start"
        page.goto(viewer.url + "/")
        row = f'tr.run[data-id="{run_id}"]'
        assert page.locator(row).get_attribute("data-status") == "running"
        # its counts so far (the store totals them only at the end); the list refreshes itself
        page.wait_for_function(f"Number(document.querySelector('{row} td:nth-child(3)')"
                               ".textContent) > 0", timeout=5_000)
        page.goto(f"{viewer.url}/runs/{run_id}")
        page.evaluate("window.__sameDocument = true")
        assert page.inner_text("#run-status") == "running"
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 60
        while page.get_attribute("#run", "data-live") != "ended":
            assert time.monotonic() < deadline, f"the run did not end on the page: {seen}"
            count = int(page.inner_text("#agent-count"))
            bars = int(page.get_attribute("#timeline", "data-bars") or 0)
            if not seen or seen[-1] != (count, bars):
                seen.append((count, bars))
            if len(seen) == 3:
                page.screenshot(path=str(tmp_path / "live.png"))
            page.wait_for_timeout(150)
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    counts = [count for count, _ in seen]
    bars = [bar for _, bar in seen]
    assert len({c for c in counts if 0 < c < agents}) >= 2, seen  # grew in steps
    assert counts == sorted(counts) and bars == sorted(bars), seen
    assert len({b for b in bars if 0 < b < agents}) >= 2, seen
    assert page.evaluate("window.__sameDocument") is True  # never reloaded
    assert page.inner_text("#run-status") == "completed"
    assert page.inner_text("#agent-count") == str(agents)
    page.wait_for_function(f"document.getElementById('timeline').dataset.bars === '{agents}'")
    assert _chart(page)["sets"] == {"completed": agents}
    assert json.loads(page.inner_text("#result")) == {"steps": agents}
    assert len(page.locator("#log li").all_inner_texts()) == agents // 2


@needs_chromium
def test_a_live_thousand_agent_run_stays_responsive(viewer: Viewer, page: Any,
                                                    runs: tuple[str, dict[str, str]]) -> None:
    child = subprocess.Popen([sys.executable, str(HERE / "_viewer_runs.py"), "fanout", runs[0],
                              "1000", "0.4"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        run_id = child.stdout.readline().strip()
        page.goto(f"{viewer.url}/runs/{run_id}")
        summary = 'details.phase[data-phase="even"] > summary'
        page.wait_for_selector(summary)
        stalls: list[float] = []
        running_seen = 0
        deadline = time.monotonic() + 90
        while page.get_attribute("#run", "data-live") != "ended":
            assert time.monotonic() < deadline, "the run did not end on the page"
            asked = time.monotonic()
            running_seen = max(running_seen, page.locator('tr.agent[data-status="running"]')
                               .count())
            page.click(summary)  # the page answers input while events pour in
            stalls.append(time.monotonic() - asked)
            page.wait_for_timeout(100)
        assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    print(f"live 1000-agent run: {len(stalls)} probes, slowest {max(stalls):.2f} s, "
          f"at most {running_seen} rows running at once")
    assert running_seen > 10  # it was seen live, not only at the end
    assert max(stalls) < 3, stalls
    page.wait_for_function("document.getElementById('timeline').dataset.bars === '1000'")
    assert page.locator('tr.agent[data-status="completed"]').count() == 1000
    assert page.inner_text("#agent-count") == "1000"


@needs_chromium
def test_an_interrupted_run_shows_its_counts_and_ends_on_its_page(
        page: Any, tmp_path: pathlib.Path) -> None:
    store = str(tmp_path / "runs.sqlite3")
    child = subprocess.Popen([sys.executable, str(HERE / "_viewer_runs.py"), "live", store,
                              "40", "2.0"], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    run_id = child.stdout.readline().strip()
    time.sleep(1.0)  # in the middle of its first two agents
    child.kill()  # kill -9: the run never ends by itself
    child.wait()
    child.stdout.close()
    second = Viewer(store)
    try:
        page.goto(second.url + "/")
        row = page.locator(f'tr.run[data-id="{run_id}"]')
        assert row.get_attribute("data-status") == "interrupted"
        assert int(row.locator("td").nth(2).inner_text()) >= 2  # counted from its events
        page.goto(f"{second.url}/runs/{run_id}")
        _ended(page)
        assert page.inner_text("#run-status") == "interrupted"
        assert page.locator("tr.agent").count() >= 2
        # the agents it was running when it died are not shown as still running
        assert page.locator('tr.agent[data-status="running"]').count() == 0
        assert page.locator('tr.agent[data-status="interrupted"]').count() >= 1
        assert "running" not in _chart(page)["sets"]
    finally:
        assert second.stop() == 0


# -- the stream over plain HTTP --------------------------------------------------------------


def test_the_stream_continues_after_the_last_event_id(viewer: Viewer,
                                                      runs: tuple[str, dict[str, str]]) -> None:
    url = f"{viewer.url}/api/runs/{runs[1]['research-report']}/stream"
    whole = _messages(httpx.get(url, timeout=10).text)
    assert [kind for kind, _, _ in whole] == ["events", "end"]
    events = json.loads(whole[0][2])
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["data"] == {"event": "WorkflowStarted"}  # the run's info is left out
    assert whole[0][1] == str(len(events))
    rest = _messages(httpx.get(url, headers={"Last-Event-ID": "5"}, timeout=10).text)
    assert [e["seq"] for e in json.loads(rest[0][2])] == list(range(6, len(events) + 1))
    end = json.loads(whole[1][2])
    assert end["status"] == "completed" and end["error"] is None
    assert httpx.get(f"{viewer.url}/api/runs/nope/stream", timeout=10).status_code == 404
    assert httpx.get(f"{viewer.url}/runs/nope", timeout=10).status_code == 404
    assert httpx.get(f"{viewer.url}/?status=bogus", timeout=10).status_code == 400
    assert httpx.get(viewer.url.replace("127.0.0.1", "localhost") + "/",
                     timeout=10).status_code == 200
    foreign = httpx.get(viewer.url + "/", headers={"Host": "attacker.example"}, timeout=10)
    assert foreign.status_code == 400  # a rebound host name gets nothing


def _messages(text: str) -> list[tuple[str, str | None, str]]:
    found = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(": ")
            fields[key] = value
        if "event" in fields:
            found.append((fields["event"], fields.get("id"), fields.get("data", "")))
    return found


def test_assets_are_served_locally(viewer: Viewer, runs: tuple[str, dict[str, str]]) -> None:
    page = httpx.get(f"{viewer.url}/runs/{runs[1]['research-report']}", timeout=10).text
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert all(s.startswith("/") for s in sources), sources
    for source in sources:
        assert httpx.get(viewer.url + source, timeout=10).status_code == 200, source


# -- the beacon: the CLI finds the viewer of its store ----------------------------------------


def test_a_running_viewer_is_announced_for_its_store(viewer: Viewer,
                                                     runs: tuple[str, dict[str, str]]) -> None:
    lines: list[str] = []
    url = announce_viewer(runs[0], "some-run", lines.append)
    assert url == f"{viewer.url}/runs/some-run"
    assert lines == [f"viewer: {url}"]
    assert announce_viewer(runs[0] + ".other", "some-run", lines.append) is None
    assert announce_viewer(None, "some-run", lines.append) is None
    assert len(lines) == 1


def test_a_dead_viewers_beacon_is_ignored_and_removed(tmp_path: pathlib.Path) -> None:
    store = str(tmp_path / "runs.sqlite3")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    beacon.write_beacon(store, "http://127.0.0.1:1", pid=gone.pid)
    assert os.path.exists(beacon.beacon_path(store))
    assert announce_viewer(store, "x", lambda line: None) is None
    assert not os.path.exists(beacon.beacon_path(store))
    beacon.write_beacon(store, "http://127.0.0.1:2/")
    assert beacon.viewer_url(store, "x") == "http://127.0.0.1:2/runs/x"
    beacon.remove_beacon(store, pid=os.getpid() + 1)  # not ours: stays
    assert beacon.read_beacon(store) is not None
    beacon.remove_beacon(store)
    assert beacon.read_beacon(store) is None


def test_run_prints_the_viewer_address_of_its_run(viewer: Viewer, tmp_path: pathlib.Path,
                                                  runs: tuple[str, dict[str, str]]) -> None:
    help_text = subprocess.run([sys.executable, "-m", "dsh_workflow", "run", "--help"],
                               capture_output=True, text=True, check=True).stdout
    if "--store" not in help_text:
        pytest.skip("`run` records no store on this branch yet (README, 'Durable runs', command line)")
    script = tmp_path / "hello.js"
    script.write_text('export const meta = {name: "hello", description: "d"};\n'
                      'return await agent("hi");\n')
    done = subprocess.run([sys.executable, "-m", "dsh_workflow", "run", str(script),
                           "--store", runs[0]], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    match = re.search(r"viewer: (\S+)", done.stderr)
    assert match is not None, done.stderr
    assert match.group(1).startswith(viewer.url + "/runs/")
    assert httpx.get(match.group(1), timeout=10).status_code == 200


# -- the command's start errors --------------------------------------------------------------


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ui_stops_cleanly_and_removes_its_beacon(tmp_path: pathlib.Path, how: int,
                                                 runs: tuple[str, dict[str, str]]) -> None:
    store = str(tmp_path / "copy.sqlite3")
    shutil.copyfile(runs[0], store)
    second = Viewer(store)
    live = subprocess.Popen([sys.executable, str(HERE / "_viewer_runs.py"), "live", store, "2",
                             "30"], stdout=subprocess.PIPE, text=True)
    try:
        assert beacon.viewer_url(store, "r") == f"{second.url}/runs/r"
        assert live.stdout is not None
        run_id = live.stdout.readline().strip()
        # the stream of a running run stays open: it must not hold the viewer up
        with httpx.stream("GET", f"{second.url}/api/runs/{run_id}/stream",
                          timeout=10) as open_stream:
            assert open_stream.status_code == 200
            assert re.fullmatch(r"id: \d+", next(open_stream.iter_lines()))  # a first message
            started = time.monotonic()
            assert second.stop(how) == 0
        assert time.monotonic() - started < 10
    finally:
        second.stop()
        live.kill()
        live.wait()
        if live.stdout is not None:
            live.stdout.close()
    assert not os.path.exists(beacon.beacon_path(store))
    assert beacon.viewer_url(store, "r") is None


def test_ui_refuses_a_missing_or_foreign_store_and_a_busy_port(tmp_path: pathlib.Path,
                                                    runs: tuple[str, dict[str, str]]) -> None:
    missing = subprocess.run([sys.executable, "-m", "dsh_workflow", "ui", "--store",
                              str(tmp_path / "none.sqlite3")], capture_output=True, text=True,
                             check=False)
    assert missing.returncode == 2
    assert "no run store at" in missing.stderr
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database\n" * 100)
    wrong = subprocess.run([sys.executable, "-m", "dsh_workflow", "ui", "--store", str(foreign)],
                           capture_output=True, text=True, check=False)
    assert wrong.returncode == 2
    assert wrong.stderr.startswith("Error: run store ") and "Traceback" not in wrong.stderr
    assert not os.path.exists(beacon.beacon_path(str(foreign)))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = subprocess.run([sys.executable, "-m", "dsh_workflow", "ui", "--store", runs[0],
                                "--port", str(port)], capture_output=True, text=True,
                               check=False)
    assert taken.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr


# -- pieces ----------------------------------------------------------------------------------


def test_the_vendored_chart_library_is_the_pinned_one() -> None:
    folder = pathlib.Path(beacon.__file__).parent / "static" / "vendor"
    pinned = json.loads((folder / "PINNED.json").read_text())
    for name, digest in pinned["files"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
    assert f"Chart.js v{pinned['version']}" in (folder / "chart.umd.min.js").read_text()[:200]


def _record(result: dict[str, Any] | None) -> RunRecord:
    return RunRecord(id="r", meta={}, script="", created_at=0.0, status="error", result=result)


@pytest.mark.parametrize(("result", "expected"), [
    (None, None),
    ({"error": None}, None),
    ({"error": "TIMEOUT: the run took too long"}, ("TIMEOUT", "the run took too long")),
    ({"error": "Error: x"}, (None, "Error: x")),
    ({"error": "NOT_A_CODE: x"}, (None, "NOT_A_CODE: x")),
    ({"error": "AGENT_CAP: y", "error_code": "AGENT_CAP"}, ("AGENT_CAP", "y")),
])
def test_error_view_splits_the_code(result: dict[str, Any] | None,
                                    expected: tuple[str | None, str] | None) -> None:
    view = error_view(_record(result))
    assert (None if view is None else (view.code, view.message)) == expected


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0123, "12 ms"), (3.21, "3.2 s"), (125, "2 min 05 s"), (7380, "2 h 03 min")])
def test_durations_read_naturally(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_counts_so_far_come_from_the_events() -> None:
    data = [{"event": "WorkflowStarted"}, {"event": "AgentReplayed", "seq": 1, "label": "a"},
            {"event": "AgentStarted", "seq": 2, "label": "b"},
            {"event": "AgentStarted", "seq": 3, "label": "c"},
            {"event": "AgentEnded", "seq": 2, "label": "b", "outcome": "completed",
             "usage": {"input_tokens": 3, "output_tokens": 4}},
            {"event": "AgentEnded", "seq": 3, "label": "c", "outcome": "cancelled",
             "usage": None}]
    events = [StoredEvent(run_id="r", seq=i, at=float(i), data=d) for i, d in enumerate(data, 1)]
    assert count_events(events) == Counts(agents=2, replayed=1, tokens=7, unpriced=1)
    priced = [*data[:4], {"event": "AgentEnded", "seq": 3, "label": "c", "outcome": "completed",
                          "usage": {"input_tokens": 1, "output_tokens": 1, "cost_usd": 0.25}}]
    events = [StoredEvent(run_id="r", seq=i, at=float(i), data=d) for i, d in enumerate(priced, 1)]
    assert count_events(events) == Counts(agents=2, replayed=1, tokens=2, cost_usd=0.25)


def test_the_run_row_shows_the_cost_and_marks_a_lower_bound() -> None:
    record = RunRecord(id="r", meta={"name": "n"}, script="", created_at=1.0, ended_at=2.0,
                       status="completed", result={"stop_reason": "completed",
                                                   "agents_unpriced": 1},
                       usage=Usage(input_tokens=5, output_tokens=5, cost_usd=0.5))
    assert run_row(record).cost == "$0.5000+"
    free = record.model_copy(update={"usage": Usage(input_tokens=5, output_tokens=5)})
    assert run_row(free).cost == "—"


# -- cost in money (README, "Cost in money") ----------------------------------------------------


@needs_chromium
def test_the_list_and_the_run_page_show_a_runs_cost(page: Any, tmp_path: pathlib.Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text("import json, sys\nprompt = sys.stdin.read()\n"
                     "usage = {'input_tokens': 10, 'output_tokens': 5}\n"
                     "if prompt.startswith('cost:'):\n    usage['cost_usd'] = float(prompt[5:])\n"
                     "sys.stderr.write('dsh-workflow-usage: ' + json.dumps(usage) + '\\n')\n"
                     "print('ok')\n")
    script = tmp_path / "wf.js"
    script.write_text("export const meta = {name: 'priced', description: 'costs'};\n"
                      "return [await agent('cost:0.125'), await agent('cost:0.5'), "
                      "await agent('free')];\n")
    store = str(tmp_path / "runs.sqlite3")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(HERE.parents[1]), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "dsh_workflow", "run", str(script), "--store",
                           store, "--provider", "command", "--command",
                           f"{sys.executable} {agent}"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    served = Viewer(store)
    try:
        page.goto(served.url + "/")
        row = page.locator("tr.run").first
        assert row.locator("td").nth(7).inner_text() == "$0.6250+"  # one child unpriced
        page.goto(served.url + row.locator("a").first.get_attribute("href"))
        _ended(page)
        assert page.inner_text("#cost-count") == "$0.6250+"
    finally:
        assert served.stop() == 0
