"""The run viewer (docs/viewer.md): `dsh-workflow ui` as a real process, pages loaded in a real
headless Chromium (Debian's `chromium`, driven by Playwright without a browser download).

Screenshots of every page a test loads are saved under the test's tmp folder.
"""

from __future__ import annotations

import contextlib
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
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _support import run_beside_playwright, store_has_call, wait_until

from dsh_workflow import Usage
from dsh_workflow._cli.announce import announce_viewer
from dsh_workflow._store import RunRecord
from dsh_workflow._ui import beacon
from dsh_workflow._ui.summary import error_view, format_duration, run_row

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
    """``dsh-workflow ui --port 0`` on a store, as a child process (its token is made at start
    and read from the address it prints)."""

    def __init__(self, store: str, *options: str, env: dict[str, str] | None = None) -> None:
        self.store = store
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dsh_workflow", "ui", "--store", store, "--port", "0",
             *options],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=env if env is not None else _env_without_token())
        assert self.process.stderr is not None
        line = self.process.stderr.readline()
        match = re.match(r"viewer: (http://127\.0\.0\.1:(\d+))/\?token=(\S+)  ", line)
        if match is None:
            self.stop()
            raise AssertionError(f"the viewer did not start: {line!r}")
        self.url = match.group(1)
        self.port = int(match.group(2))
        self.token = urllib.parse.unquote(match.group(3))
    def enter(self, page: Any) -> None:
        """Open the printed address in ``page``: the viewer sets its cookie, and the page takes
        the token out of its address."""
        response = page.goto(f"{self.url}/?token={urllib.parse.quote(self.token, safe='')}")
        assert response is not None and response.status == 200
        page.wait_for_url(self.url + "/")

    @contextlib.contextmanager
    def client(self) -> Iterator[httpx.Client]:
        """An HTTP client holding the viewer's cookie (got the way a browser gets it)."""
        with httpx.Client(base_url=self.url, timeout=10) as client:
            entered = client.get("/", params={"token": self.token})
            assert entered.status_code == 200 and "set-cookie" in entered.headers
            yield client

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


def _env_without_token() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "DSH_WORKFLOW_TOKEN"}


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


def _chart(page: Any) -> Any:
    """What the timeline chart draws: bar count per dataset label, and its canvas size (a JSON
    object; None where no chart is drawn)."""
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
    viewer.enter(page)
    page.goto(viewer.url + "/")
    rows = page.locator("tr.run")
    names = runs[1]
    ids = [rows.nth(i).get_attribute("data-id") for i in range(rows.count())]
    ids = [i for i in ids if i in names.values()]  # live runs of other tests may be there too
    assert ids == [names[n] for n in ("fanout-1000", "research-resumed", "throws",
                                      "bad-option", "research-report")]
    report = page.locator(f'tr.run[data-id="{names["research-report"]}"]')
    cells = [report.locator("td").nth(i).inner_text() for i in range(9)]
    assert cells[0].startswith("research-report")
    assert cells[1:6] == ["completed", "6", "0", "0", str(made[2]["research-report"])]
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", cells[6])
    assert re.match(r"[\d.]+ (ms|s)", cells[7])
    assert cells[8] == "unpriced"  # echo children report tokens but no cost: never $0.0000
    resumed = page.locator(f'tr.run[data-id="{names["research-resumed"]}"] td')
    assert resumed.nth(3).inner_text() == "5"  # replayed
    page.screenshot(path=str(tmp_path / "list.png"), full_page=True)


@needs_chromium
def test_the_list_filters_by_status_and_name(viewer: Viewer, page: Any,
                                            runs: tuple[str, dict[str, str]]) -> None:
    viewer.enter(page)
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
    viewer.enter(page)
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
    ("throws", "SCRIPT_ERROR", "Error: the script gave up"),
])
def test_a_failed_run_shows_its_error_and_code(viewer: Viewer, page: Any,
                                               runs: tuple[str, dict[str, str]],
                                               name: str, code: str, message: str) -> None:
    viewer.enter(page)
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
    viewer.enter(page)
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
    viewer.enter(page)
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
        viewer.enter(page)
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
            drawn = int(page.get_attribute("#timeline", "data-bars") or 0)
            if not seen or seen[-1] != (count, drawn):
                seen.append((count, drawn))
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
        viewer.enter(page)
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
    # in the middle of its first two agents (each takes 2 s)
    wait_until(lambda: store_has_call(pathlib.Path(store), 2), what="the second agent to start")
    child.kill()  # kill -9: the run never ends by itself
    child.wait()
    child.stdout.close()
    second = Viewer(store)
    try:
        second.enter(page)
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
    url = f"/api/runs/{runs[1]['research-report']}/stream"
    with viewer.client() as http:
        _check_the_stream(viewer, http, url)


def _check_the_stream(viewer: Viewer, http: httpx.Client, url: str) -> None:
    whole = _messages(http.get(url).text)
    assert [kind for kind, _, _ in whole] == ["events", "end"]
    events = json.loads(whole[0][2])
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["data"] == {"event": "WorkflowStarted"}  # the run's info is left out
    assert whole[0][1] == str(len(events))
    rest = _messages(http.get(url, headers={"Last-Event-ID": "5"}).text)
    assert [e["seq"] for e in json.loads(rest[0][2])] == list(range(6, len(events) + 1))
    end = json.loads(whole[1][2])
    assert end["status"] == "completed" and end["error"] is None
    assert http.get("/api/runs/nope/stream").status_code == 404
    assert http.get("/runs/nope").status_code == 404
    assert http.get("/?status=bogus").status_code == 400
    assert httpx.get(viewer.url.replace("127.0.0.1", "localhost") + "/",
                     params={"token": viewer.token}, timeout=10).status_code == 200
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
    with viewer.client() as http:
        page = http.get(f"/runs/{runs[1]['research-report']}").text
        sources = re.findall(r'(?:src|href)="([^"]+)"', page)
        assert all(s.startswith("/") for s in sources), sources
        for source in sources:
            assert http.get(source).status_code == 200, source
    assets = [s for s in sources if s.startswith("/static/")]
    assert len(assets) >= 3, sources
    for source in assets:  # they hold no data: served without the token
        assert httpx.get(viewer.url + source, timeout=10).status_code == 200, source


# -- the beacon: the CLI finds the viewer of its store ----------------------------------------


def test_a_running_viewer_is_announced_for_its_store(viewer: Viewer,
                                                     runs: tuple[str, dict[str, str]]) -> None:
    lines: list[str] = []
    url = announce_viewer(runs[0], "some-run", lines.append)
    assert url == f"{viewer.url}/runs/some-run?token={urllib.parse.quote(viewer.token, safe='')}"
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
        pytest.skip("`run` records no store on this branch yet (docs/durable-runs.md, command line)")
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
    # the link works as printed: the page, and the viewer's cookie for the next ones
    opened = httpx.get(match.group(1), timeout=10)
    assert opened.status_code == 200 and "set-cookie" in opened.headers
    assert httpx.get(match.group(1).split("?")[0], timeout=10).status_code == 401


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
        assert beacon.viewer_url(store, "r") == f"{second.url}/runs/r?token={second.token}"
        assert live.stdout is not None
        run_id = live.stdout.readline().strip()
        # the stream of a running run stays open: it must not hold the viewer up
        with second.client() as http, \
                http.stream("GET", f"/api/runs/{run_id}/stream") as open_stream:
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


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ui_stopped_the_moment_it_prints_its_address_stops_cleanly(
        tmp_path: pathlib.Path, how: int, runs: tuple[str, dict[str, str]]) -> None:
    """The address is printed only once the viewer serves with its signal handlers in place:
    a signal sent the moment it is read stops the viewer at once, beacon removed."""
    store = str(tmp_path / "copy.sqlite3")
    shutil.copyfile(runs[0], store)
    for _ in range(3):
        viewer = Viewer(store)
        started = time.monotonic()
        assert viewer.stop(how) == 0
        assert time.monotonic() - started < 10
        assert not os.path.exists(beacon.beacon_path(store))


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
    # a failed result stored without a code is the script's own error (SPEC §26)
    ({"error": "Error: x"}, ("SCRIPT_ERROR", "Error: x")),
    ({"error": "NOT_A_CODE: x"}, ("SCRIPT_ERROR", "NOT_A_CODE: x")),
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


def test_a_run_page_lists_the_return_values_warnings(tmp_path: pathlib.Path) -> None:
    import anyio

    from dsh_workflow import (
        EchoProvider,
        EngineConfig,
        QuickJSEngine,
        SQLiteRunStore,
        WorkflowStartRequest,
    )

    store_path = str(tmp_path / "runs.sqlite3")
    script = "const a = agent('x'); return {items: [1, undefined], pending: a, tag: '<b>'};"

    async def record() -> tuple[str, str]:
        async with SQLiteRunStore(store_path) as store, \
                QuickJSEngine(EngineConfig(), provider=EchoProvider(), store=store) as engine:
            lossy = engine.start(WorkflowStartRequest(
                meta={"name": "lossy", "description": "returns a lossy value"}, script=script))
            clean = engine.start(WorkflowStartRequest(
                meta={"name": "clean", "description": "returns JSON"}, script="return 1"))
            assert (await lossy.result()).warnings
            await clean.result()
            return lossy.id, clean.id

    # In a thread of its own: the browser tests before this one leave an event loop running
    # on the main thread.
    ids: list[tuple[str, str]] = []
    worker = threading.Thread(target=lambda: ids.append(anyio.run(record)))
    worker.start()
    worker.join()
    [(lossy_id, clean_id)] = ids
    viewer = Viewer(store_path)
    try:
        with viewer.client() as http:
            page = http.get(f"/runs/{lossy_id}").text
            clean = http.get(f"/runs/{clean_id}").text
        box = page[page.index('<div id="warnings-box"'):]
        box = box[:box.index("</ul>")]
        assert "hidden" not in box.split(">", 1)[0]
        assert re.findall(r"<li>(.*?)</li>", box) == [
            "return value.items[1]: undefined became null",
            "return value.pending: a Promise became {} (missing await?)"]
        assert '<div id="warnings-box" hidden>' in clean
    finally:
        viewer.stop()


# -- access: only the holder of the viewer's token reads anything (SECURITY.md) -------------


def _data_paths(runs: tuple[str, dict[str, str]]) -> list[str]:
    run_id = runs[1]["research-report"]
    return ["/", "/?status=completed", "/runs-table", f"/runs/{run_id}",
            f"/api/runs/{run_id}/stream", "/runs/nope"]


def test_without_the_token_nothing_is_read(viewer: Viewer,
                                           runs: tuple[str, dict[str, str]]) -> None:
    wrong = "x" + viewer.token[1:]
    from dsh_workflow._ui.auth import cookie_name, cookie_value

    attempts: list[dict[str, Any]] = [
        {},
        {"params": {"token": wrong}},
        {"params": {"token": ""}},
        {"headers": {"Authorization": f"Bearer {wrong}"}},
        {"headers": {"Authorization": f"Basic {viewer.token}"}},
        {"cookies": {cookie_name(viewer.port): cookie_value(wrong)}},
        {"cookies": {cookie_name(viewer.port): viewer.token}},  # the token is not the cookie
        {"cookies": {cookie_name(viewer.port + 1): cookie_value(viewer.token)}},  # another port's
    ]
    for attempt in attempts:
        with httpx.Client(base_url=viewer.url, timeout=10, cookies=attempt.get("cookies")) as http:
            for path in _data_paths(runs):
                refused = http.get(path, params=attempt.get("params"),
                                   headers=attempt.get("headers"))
                assert refused.status_code == 401, (attempt, path)
                assert "set-cookie" not in refused.headers
                assert "research" not in refused.text and "WorkflowStarted" not in refused.text


def test_the_token_in_the_address_becomes_an_httponly_strict_cookie(
        viewer: Viewer, runs: tuple[str, dict[str, str]]) -> None:
    with httpx.Client(base_url=viewer.url, timeout=10) as http:
        entered = http.get("/", params={"status": "completed", "token": viewer.token,
                                        "name": "research"})
        assert entered.status_code == 200  # the printed link opens its page at once
        assert runs[1]["research-report"] in entered.text  # filtered as asked
        assert runs[1]["throws"] not in entered.text
        assert entered.headers["referrer-policy"] == "no-referrer"
        cookie = entered.headers["set-cookie"]
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/"} <= attributes, cookie
        assert viewer.token not in cookie  # the cookie is derived from it, not the token
        for path in _data_paths(runs)[:-1]:  # the cookie alone opens every page
            assert http.get(path).status_code == 200, path
        # beside other applications' cookies on 127.0.0.1, however odd they are
        (value,) = [c.value for c in http.cookies.jar if c.name.startswith("dsh_workflow")]
        name = f"dsh_workflow_viewer_{viewer.port}"
        messy = f'app={{"a": "b, c"}}; bad\\cookie; {name}={value}; x="1'
        assert httpx.get(viewer.url + "/runs-table", headers={"Cookie": messy},
                         timeout=10).status_code == 200
        assert runs[1]["research-report"] in http.get("/runs-table").text
        assert http.get("/runs/nope").status_code == 404
    # a script may send the token as a bearer header instead
    bearer = httpx.get(viewer.url + "/runs-table", timeout=10,
                       headers={"Authorization": f"Bearer {viewer.token}"})
    assert bearer.status_code == 200 and runs[1]["research-report"] in bearer.text
    # a run page's address with the token opens the run page itself, and sets the cookie
    run_page = f"/runs/{runs[1]['throws']}"
    with httpx.Client(base_url=viewer.url, timeout=10) as http:
        entered = http.get(run_page, params={"token": viewer.token})
        assert entered.status_code == 200 and "the script gave up" in entered.text
        assert http.get(run_page).status_code == 200


def test_state_changing_requests_need_the_viewers_own_origin(viewer: Viewer) -> None:
    own = viewer.url
    with viewer.client() as http:
        for origin in (None, "http://attacker.example", "null",
                       f"http://127.0.0.1:{viewer.port + 1}", own.replace("http:", "https:")):
            headers = {} if origin is None else {"Origin": origin}
            for path in ("/", "/runs-table", "/api/runs/x/cancel"):
                refused = http.post(path, headers=headers)
                assert refused.status_code == 403, (origin, path)
        # from its own origin the guard lets the request through (no POST route yet: 405)
        assert http.post("/", headers={"Origin": own}).status_code == 405
    # its own origin without the token is still refused
    assert httpx.post(own + "/", headers={"Origin": own}, timeout=10).status_code == 401


def test_the_beacon_is_owner_only_and_carries_the_token(
        tmp_path: pathlib.Path, runs: tuple[str, dict[str, str]]) -> None:
    store = str(tmp_path / "copy.sqlite3")
    shutil.copyfile(runs[0], store)
    stale = beacon.beacon_path(store)
    with open(stale, "w") as file:  # an old, world-readable beacon of a dead viewer
        file.write('{"url": "http://127.0.0.1:1", "pid": 1, "store": "elsewhere"}')
    os.chmod(stale, 0o644)
    previous = os.umask(0)  # a permissive umask must not widen the file
    try:
        second = Viewer(store)
    finally:
        os.umask(previous)
    try:
        assert os.stat(stale).st_mode & 0o777 == 0o600
        with open(stale) as file:
            assert json.load(file)["token"] == second.token
        link = announce_viewer(store, "some-run", lambda line: None)
        assert link == f"{second.url}/runs/some-run?token={second.token}"
        assert [n for n in os.listdir(tmp_path) if n.startswith(".ui-")] == []
    finally:
        assert second.stop() == 0


@pytest.mark.parametrize("how", ["option", "environment"])
def test_the_viewers_token_can_be_chosen(tmp_path: pathlib.Path, how: str,
                                         runs: tuple[str, dict[str, str]]) -> None:
    chosen = "my-viewer-token_42"
    store = str(tmp_path / "copy.sqlite3")  # the module's viewer keeps its own store's beacon
    shutil.copyfile(runs[0], store)
    env = _env_without_token()
    options: tuple[str, ...] = ()
    if how == "option":
        options = ("--token", chosen)
        env["DSH_WORKFLOW_TOKEN"] = "not-this-one"
    else:
        env["DSH_WORKFLOW_TOKEN"] = chosen
    second = Viewer(store, *options, env=env)
    try:
        assert second.token == chosen
        with second.client() as http:
            assert http.get("/runs-table").status_code == 200
        assert httpx.get(second.url + "/", params={"token": "not-this-one"},
                         timeout=10).status_code == 401
    finally:
        assert second.stop() == 0


def test_each_viewer_start_makes_a_new_token(runs: tuple[str, dict[str, str]],
                                             tmp_path: pathlib.Path) -> None:
    store = str(tmp_path / "copy.sqlite3")
    shutil.copyfile(runs[0], store)
    tokens = []
    for _ in range(2):
        started = Viewer(store)
        tokens.append(started.token)
        assert started.stop() == 0
    assert tokens[0] != tokens[1] and min(len(t) for t in tokens) >= 40


@needs_chromium
def test_the_browser_keeps_the_token_out_of_the_address_and_the_script(
        viewer: Viewer, browser: Any, runs: tuple[str, dict[str, str]]) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        viewer.enter(page)  # lands on the list, the token gone from the address
        assert page.locator("tr.run").count() >= 5
        assert page.evaluate("document.cookie") == ""  # HttpOnly: the page's script cannot read it
        (cookie,) = [c for c in context.cookies() if c["name"].startswith("dsh_workflow_viewer_")]
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
        assert viewer.token not in page.evaluate("location.href")
        page.goto(f"{viewer.url}/runs/{runs[1]['research-report']}")  # the cookie alone
        _ended(page)
        assert page.inner_text("#run-status") == "completed"
        page.go_back()  # the history keeps the list's address without the token
        assert page.url == viewer.url + "/"
    finally:
        context.close()
    stranger = browser.new_context()
    try:
        response = stranger.new_page().goto(viewer.url + "/")
        assert response is not None and response.status == 401
    finally:
        stranger.close()


# -- bounded work per request ------------------------------------------------------------------


def _record_runs(store: str, *, result_value: Any) -> list[str]:
    """Record one completed run straight into ``store``, its result's value
    ``result_value``; returns its id (in a list)."""
    from dsh_workflow import SQLiteRunStore

    async def write() -> list[str]:
        run_id = f"big-{time.monotonic_ns()}"
        async with SQLiteRunStore(store) as opened:
            await opened.create_run(run_id, meta={"name": "big", "description": "d"},
                                    script="return 1")
            await opened.finish_run(run_id, status="completed", result={
                "value": result_value, "error": None, "stop_reason": "completed"})
        return [run_id]

    return run_beside_playwright(write)


def _json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def test_a_five_megabyte_result_is_folded_and_fetched_in_bounded_chunks(
        tmp_path: pathlib.Path) -> None:
    from dsh_workflow._ui.summary import CHUNK_CHARS, SHOWN_CHARS

    store = str(tmp_path / "big.sqlite3")
    value = {"rows": [{"i": i, "text": "x" * 90} for i in range(50_000)]}  # ~5.5 MB of JSON
    text = _json_text(value)
    assert len(text) > 5_000_000
    (run_id,) = _record_runs(store, result_value=value)
    big = Viewer(store)
    try:
        with big.client() as http:
            started = time.monotonic()
            page = http.get(f"/runs/{run_id}")
            elapsed = time.monotonic() - started
            assert page.status_code == 200
            print(f"5 MB result page: {len(page.content)} bytes in {elapsed:.2f} s")
            assert len(page.content) < 1_000_000 and elapsed < 8
            assert 'Showing the first <span class="fold-shown">64000</span> characters' in page.text
            # the end message of the stream is bounded too, and left out when asked
            ended = _messages(http.get(f"/api/runs/{run_id}/stream").text)[-1]
            assert ended[0] == "end" and len(ended[2]) < 1_000_000
            payload = json.loads(ended[2])
            assert payload["value"]["shown"] == SHOWN_CHARS and payload["value"]["folded"]
            quiet = _messages(http.get(f"/api/runs/{run_id}/stream?result=0").text)[-1]
            assert json.loads(quiet[2])["value"] is None and len(quiet[2]) < 10_000
            # the rest of the text, one bounded chunk per request
            chunks, offset = [], 0
            while True:
                part = http.get(f"/api/runs/{run_id}/text/value", params={"offset": offset})
                assert part.status_code == 200
                assert int(part.headers["x-total-chars"]) == len(text)
                assert len(part.text) <= CHUNK_CHARS
                if not part.text:
                    break
                chunks.append(part.text)
                offset = int(part.headers["x-next-offset"])
            assert "".join(chunks) == text
            assert http.get(f"/api/runs/{run_id}/text/nope").status_code == 404
            assert http.get(f"/api/runs/{run_id}/text/value?offset=x").status_code == 400
            assert http.get("/api/runs/nope/text/value").status_code == 404
        # and the whole of it is behind the token like everything else
        assert httpx.get(f"{big.url}/api/runs/{run_id}/text/value", timeout=10
                         ).status_code == 401
    finally:
        assert big.stop() == 0


@needs_chromium
def test_show_more_unfolds_a_big_result_on_the_page(tmp_path: pathlib.Path, page: Any) -> None:
    store = str(tmp_path / "big.sqlite3")
    value = [f"line {i} " + "y" * 40 for i in range(10_000)]  # ~600 kB of JSON
    (run_id,) = _record_runs(store, result_value=value)
    big = Viewer(store)
    try:
        big.enter(page)
        page.goto(f"{big.url}/runs/{run_id}")
        _ended(page)
        fold = 'p.folded[data-for="result"]'
        assert page.is_visible(fold)
        clicks = 0
        while page.is_visible(fold):
            before = page.get_attribute(fold, "data-next")
            page.click(f"{fold} button.show-more")
            page.wait_for_function(f"document.querySelector('{fold}').dataset.next !== "
                                   f"'{before}'")
            clicks += 1
            assert clicks < 10
        assert clicks >= 2
        assert json.loads(page.inner_text("#result")) == value
    finally:
        assert big.stop() == 0


@pytest.mark.parametrize("after", ["abc", "1.5", "9223372036854775808",
                                   "99999999999999999999999999", "0x10", "1e3", "١٢"])
def test_a_malformed_after_is_400(viewer: Viewer, runs: tuple[str, dict[str, str]],
                                  after: str) -> None:
    url = f"/api/runs/{runs[1]['research-report']}/stream"
    with viewer.client() as http:
        assert http.get(url, params={"after": after}).status_code == 400
        assert http.get(url, headers={b"Last-Event-ID": after.encode()}
                        ).status_code == 400


def test_after_in_range_is_served(viewer: Viewer, runs: tuple[str, dict[str, str]]) -> None:
    url = f"/api/runs/{runs[1]['research-report']}/stream"
    with viewer.client() as http:
        for after in ("9223372036854775807", "-3", "0"):
            answered = http.get(url, params={"after": after})
            assert answered.status_code == 200 and "event: end" in answered.text


@needs_chromium
def test_list_refreshes_never_overlap(viewer: Viewer, page: Any) -> None:
    # every refresh answers only after 3 s (longer than the 2 s period)
    page.add_init_script("""
        window.__inflight = 0; window.__most = 0; window.__calls = 0;
        const original = window.fetch.bind(window);
        window.fetch = async (...args) => {
            window.__calls++; window.__inflight++;
            window.__most = Math.max(window.__most, window.__inflight);
            try {
                await new Promise(resolve => setTimeout(resolve, 3000));
                return await original(...args);
            } finally { window.__inflight--; }
        };""")
    viewer.enter(page)
    page.fill("#name-filter", "res")  # typing during a refresh asks for one more, not two
    page.wait_for_timeout(9_000)
    assert page.evaluate("window.__calls") >= 2
    assert page.evaluate("window.__most") == 1


def _unfinished_runs(store: str, runs: int, agents: int, first_seq: int = 1) -> list[str]:
    """Add ``agents`` started-and-ended agents to each of ``runs`` running runs of ``store``
    (made on the first call, named ``live-N``); returns their ids."""
    from dsh_workflow import SQLiteRunStore

    async def write() -> list[str]:
        ids = [f"live-{n}" for n in range(runs)]
        async with SQLiteRunStore(store) as opened:
            for run_id in ids:
                if first_seq == 1:
                    await opened.create_run(run_id, meta={"name": run_id, "description": "d"},
                                            script="return 1")
                batch: list[dict[str, Any]] = []
                for seq in range(first_seq, first_seq + agents):
                    batch.append({"event": "AgentStarted", "seq": seq, "label": f"a{seq}"})
                    batch.append({"event": "AgentEnded", "seq": seq, "label": f"a{seq}",
                                  "outcome": "completed",
                                  "usage": {"input_tokens": 1, "output_tokens": 2}})
                await opened.append_events(run_id, batch)
        return ids

    return run_beside_playwright(write)


def _list_counts(http: httpx.Client) -> dict[str, tuple[str, int, int]]:
    table = http.get("/runs-table")
    assert table.status_code == 200
    found = {}
    for run_id, status, agents, tokens in re.findall(
            r'<tr class="run" data-id="([^"]+)" data-status="([^"]+)">.*?'
            r'<td class="num">(\d+)</td>\s*<td class="num">\d+</td>\s*'
            r'<td class="num failed">[^<]*(?:<span[^>]*>[^<]*</span>)?</td>\s*<td class="num">(\d+)</td>',
            table.text, re.S):
        found[run_id] = (status, int(agents), int(tokens))
    return found


def test_the_list_counts_many_unfinished_runs_and_then_only_what_is_new(
        tmp_path: pathlib.Path) -> None:
    store = str(tmp_path / "live.sqlite3")
    ids = _unfinished_runs(store, runs=8, agents=2_000)  # 32,000 events in all
    listing = Viewer(store)
    try:
        with listing.client() as http:
            counts = _list_counts(http)
            assert {run_id: counts[run_id][1:] for run_id in ids} == \
                {run_id: (2_000, 6_000) for run_id in ids}
            assert {counts[run_id][0] for run_id in ids} <= {"running", "interrupted"}
            _unfinished_runs(store, runs=8, agents=5, first_seq=2_001)
            counts = _list_counts(http)
            assert {counts[run_id][1] for run_id in ids} == {2_005}
            assert {counts[run_id][2] for run_id in ids} == {6_015}
    finally:
        assert listing.stop() == 0


def test_the_run_row_shows_the_cost_and_marks_a_lower_bound() -> None:
    record = RunRecord(id="r", meta={"name": "n"}, script="", created_at=1.0, ended_at=2.0,
                       status="completed", result={"stop_reason": "completed",
                                                   "agents_unpriced": 1},
                       usage=Usage(input_tokens=5, output_tokens=5, cost_usd=0.5))
    assert run_row(record).cost == "$0.5000+"
    unknown = record.model_copy(update={"usage": Usage(input_tokens=5, output_tokens=5)})
    assert run_row(unknown).cost == "unpriced"  # spend of unknown cost, never $0.0000
    nothing = record.model_copy(update={"usage": Usage(), "result": {"stop_reason": "completed"}})
    assert run_row(nothing).cost == "—"


# -- cost in money (docs/embedding.md, "Cost in money") ----------------------------------------------------


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
        served.enter(page)
        row = page.locator("tr.run").first
        assert row.locator("td").nth(8).inner_text() == "$0.6250+"  # one child unpriced
        page.goto(served.url + row.locator("a").first.get_attribute("href"))
        _ended(page)
        assert page.inner_text("#cost-count") == "$0.6250+"
        # a run none of whose spend could be priced reads "unpriced", never $0.0000
        script.write_text("export const meta = {name: 'unpriced', description: 'costs'};\n"
                          "return [await agent('free'), await agent('free')];\n")
        again = subprocess.run([sys.executable, "-m", "dsh_workflow", "run", str(script),
                                "--store", store, "--provider", "command", "--command",
                                f"{sys.executable} {agent}"], env=env, capture_output=True,
                               text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        page.goto(served.url)
        row = page.locator("tr.run").first
        assert row.locator("td").nth(8).inner_text() == "unpriced"
        page.goto(served.url + row.locator("a").first.get_attribute("href"))
        _ended(page)
        assert page.inner_text("#cost-count") == "unpriced"
    finally:
        assert served.stop() == 0
