"""The viewer's run page under control (docs/durable-runs.md, "Runs under control"): the server-rendered first
paint, phases without agents left out, columns aligned across phases, failure reasons in the
tree and the timeline, each agent's detail (bounded, with "load more"), the model each agent ran
on, and the Cancel button — `dsh-workflow ui` as a real process, pages in headless Chromium.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from _support import wait_until

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _control_runs import make_runs  # noqa: E402 - found through the sys.path entry above

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium"
                                         if os.path.exists("/usr/bin/chromium") else None)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install -y chromium)")


class Viewer:
    """``dsh-workflow ui --port 0`` on a store, as a child process. ``url`` is its base address;
    ``entry`` the address it printed (with its token, when it has one)."""

    def __init__(self, store: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dsh_workflow", "ui", "--store", store, "--port", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert self.process.stderr is not None
        line = self.process.stderr.readline()
        match = re.match(r"viewer: (http://127\.0\.0\.1:\d+)(/\S*)?", line)
        if match is None:
            self.stop()
            raise AssertionError(f"the viewer did not start: {line!r}")
        self.url = match.group(1)
        self.entry = self.url + (match.group(2) or "/")
        token = parse_qs(urlsplit(self.entry).query).get("token")
        self.params = {"token": token[0]} if token else {}

    def _headers(self, headers: dict[str, str] | None) -> dict[str, str]:
        token = self.params.get("token")
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        return {**auth, **(headers or {})}

    def get(self, path: str, params: dict[str, str] | None = None,
            headers: dict[str, str] | None = None) -> httpx.Response:
        return httpx.get(self.url + path, params=params, headers=self._headers(headers),
                         timeout=10)

    def post(self, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
        return httpx.post(self.url + path, headers=self._headers(headers), timeout=10)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        assert self.process.stderr is not None
        self.process.stderr.close()
        return self.process.returncode


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    store = str(tmp_path_factory.mktemp("control-viewer") / "runs.sqlite3")
    return store, make_runs(store)


@pytest.fixture(scope="module")
def viewer(runs: tuple[str, dict[str, str]]) -> Iterator[Viewer]:
    started = Viewer(runs[0])
    yield started
    assert started.stop() == 0


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


def _context(browser: Any, viewer: Viewer, **options: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **options)
    if viewer.params:  # let the viewer set its cookie first
        first = context.new_page()
        first.goto(viewer.entry)
        first.close()
    return context


@pytest.fixture
def page(browser: Any, viewer: Viewer, tmp_path: pathlib.Path) -> Iterator[Any]:
    context = _context(browser, viewer)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("console", lambda message: errors.append(message.text)
              if message.type == "error" else None)
    yield opened
    opened.screenshot(path=str(tmp_path / "page.png"), full_page=True)
    context.close()
    assert errors == [], errors


def _ended(page: Any) -> None:
    page.wait_for_selector('#run[data-live="ended"]', timeout=20_000)


def _cells(row: Any) -> list[str]:
    return [row.locator("td").nth(i).inner_text() for i in range(row.locator("td").count())]


# -- the first paint ---------------------------------------------------------------------------


def test_the_first_paint_is_rendered_by_the_server(viewer: Viewer,
                                                   runs: tuple[str, dict[str, str]]) -> None:
    html = viewer.get(f"/runs/{runs[1]['mixed']}").text
    assert re.search(r'id="agent-count">3<', html)  # not a 0 for the script to fix
    assert re.search(r'id="token-count">[1-9]\d*<', html)
    assert len(re.findall(r'<tr class="agent', html)) == 3
    assert re.findall(r'<details class="phase" open data-phase="([^"]+)"', html) == [
        "gather", "check"]
    assert "<li><span class=\"at\">+" in html and "done</li>" in html
    assert "No agents yet." not in html


@needs_chromium
def test_without_its_script_the_page_still_shows_the_run(browser: Any, viewer: Viewer,
                                                         runs: tuple[str, dict[str, str]]) -> None:
    context = _context(browser, viewer, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{viewer.url}/runs/{runs[1]['mixed']}")
        assert page.inner_text("#agent-count") == "3"
        assert page.locator("tr.agent").count() == 3
        assert page.locator("#log li").count() == 1
    finally:
        context.close()


@needs_chromium
def test_phases_without_agents_have_no_table_and_columns_line_up(
        viewer: Viewer, page: Any, runs: tuple[str, dict[str, str]]) -> None:
    page.goto(f"{viewer.url}/runs/{runs[1]['mixed']}")
    _ended(page)
    titles = page.locator("details.phase").evaluate_all("ds => ds.map(d => d.dataset.phase)")
    assert titles == ["gather", "check"]  # "warm up", "nothing here", "the end" had no agents
    lefts = page.evaluate("""() => Array.from(document.querySelectorAll('details.phase table'))
        .map(t => Array.from(t.querySelectorAll('th')).map(th => Math.round(th.getBoundingClientRect().left)))""")
    assert len(lefts) == 2 and lefts[0] == lefts[1], lefts
    assert page.inner_text("#agent-count") == "3"  # the script kept the server's numbers


@needs_chromium
def test_the_model_column_shows_the_model_each_agent_ran_on(
        viewer: Viewer, page: Any, runs: tuple[str, dict[str, str]]) -> None:
    page.goto(f"{viewer.url}/runs/{runs[1]['mixed']}")
    _ended(page)
    models = page.locator("tr.agent td.model").all_inner_texts()
    assert models == ["special-model", "house-model", "house-model"]


@needs_chromium
def test_failure_reasons_show_in_the_tree_and_the_timeline(
        viewer: Viewer, page: Any, runs: tuple[str, dict[str, str]]) -> None:
    page.goto(f"{viewer.url}/runs/{runs[1]['reasons']}")
    _ended(page)
    failed = page.locator('tr.agent[data-status="failed"]')
    reason = failed.locator("td.reason")
    assert reason.inner_text().startswith("invalid: /number: 'INV-12' does not match")
    assert "INV-" in (reason.get_attribute("title") or "")
    assert page.locator('tr.agent[data-status="completed"] td.reason').inner_text() == ""
    page.wait_for_function("document.getElementById('timeline').dataset.bars === '2'")
    tooltip = page.evaluate("""() => {
        const chart = Chart.getChart(document.getElementById('timeline-canvas'));
        for (const set of chart.data.datasets) for (const point of set.data)
            if (point.agent.status === 'failed')
                return chart.options.plugins.tooltip.callbacks.label({raw: point});
    }""")
    assert isinstance(tooltip, list) and tooltip[0].startswith("failed")
    assert tooltip[1].startswith("invalid: /number: 'INV-12'")
    # the same run's failed row on the mixed run: its reason comes from the call's record
    page.goto(f"{viewer.url}/runs/{runs[1]['mixed']}")
    _ended(page)
    bad = page.locator('tr.agent[data-status="failed"] td.reason').inner_text()
    assert bad, "a failed agent shows a reason"


# -- the agent detail ------------------------------------------------------------------------


@needs_chromium
def test_an_agent_row_opens_its_detail_with_long_texts_in_pieces(
        viewer: Viewer, page: Any, runs: tuple[str, dict[str, str]]) -> None:
    page.goto(f"{viewer.url}/runs/{runs[1]['mixed']}")
    _ended(page)
    assert page.is_hidden("#agent-detail")
    page.click('tr.agent[data-seq="2"] td.label')
    page.wait_for_selector('#agent-detail[data-loaded="2"]')
    assert "long prompt" in page.inner_text("#detail-title")
    facts = page.inner_text("#detail-facts")
    assert "completed" in facts and "house-model" in facts and "$0.0021" in facts
    prompt = page.locator('#detail-texts .text[data-name="prompt"] pre')
    assert len(prompt.inner_text()) == 8000  # the first piece only
    more = page.locator('#detail-texts .text[data-name="prompt"] button.more')
    assert "more characters" in more.inner_text()
    for _ in range(5):  # two more pieces of 8,000 characters at most
        if not more.count():
            break
        more.click()  # disabled until its piece arrived, then enabled again or removed
        page.wait_for_function(
            "!document.querySelector('#detail-texts .text[data-name=\"prompt\"] "
            "button.more[disabled]')")
    assert len(prompt.inner_text()) == len("second question ") + 20000
    answer = page.locator('#detail-texts .text[data-name="text"] pre').inner_text()
    assert answer.startswith("echo: second question yyy")
    page.click('tr.agent[data-seq="3"] td.label')
    page.wait_for_selector('#agent-detail[data-loaded="3"]')
    assert page.is_visible("#detail-failure")
    assert '"maxLength": 2' in page.inner_text('#detail-texts .text[data-name="schema"] pre')
    page.click("#detail-close")
    assert page.is_hidden("#agent-detail")


def test_the_detail_is_bounded_per_request(viewer: Viewer,
                                           runs: tuple[str, dict[str, str]]) -> None:
    base = f"/api/runs/{runs[1]['mixed']}/calls"
    whole = viewer.get(f"{base}/2")
    assert whole.status_code == 200 and len(whole.content) < 20_000
    texts = whole.json()["texts"]
    assert texts["prompt"]["total"] == 20016 and texts["prompt"]["next"] == 8000
    rest = viewer.get(f"{base}/2/texts/prompt", params={"offset": "16000"})
    assert rest.json()["text"] == "y" * 4016 and rest.json()["next"] is None
    assert viewer.get(f"{base}/1").json()["model"] == "special-model"
    assert viewer.get(f"{base}/9").status_code == 404
    assert viewer.get(f"{base}/x").status_code == 400
    assert viewer.get(f"{base}/2/texts/secrets").status_code == 400
    assert viewer.get(f"{base}/2/texts/prompt",
                      params={"offset": "z"}).status_code == 400
    assert viewer.get("/api/runs/nope/calls/1").status_code == 404


# -- cancel ----------------------------------------------------------------------------------


def _slow_run(store: str, seconds: float) -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen([sys.executable, str(HERE / "_control_runs.py"), "slow", store,
                              str(seconds)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    run_id = child.stdout.readline().strip()
    assert run_id, "the slow run did not start"
    return child, run_id


@needs_chromium
def test_the_cancel_button_cancels_a_run_of_another_process(
        viewer: Viewer, page: Any, runs: tuple[str, dict[str, str]]) -> None:
    child, run_id = _slow_run(runs[0], 60)
    try:
        page.goto(f"{viewer.url}/runs/{run_id}")
        assert page.inner_text("#run-status") == "running"
        clicked = time.monotonic()
        page.click("#cancel-run")
        page.wait_for_function("document.getElementById('run-status').textContent "
                               "=== 'cancelled'", timeout=10_000)
        assert time.monotonic() - clicked < 5
        assert child.stdout is not None
        ended = json.loads(child.stdout.readline())
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert ended["stop_reason"] == "cancelled"
    assert "cancelled from the viewer" in ended["error"]
    _ended(page)
    assert page.locator("#cancel-run").count() == 0
    assert page.locator('tr.agent[data-status="cancelled"]').count() == 2


def test_cancel_needs_the_viewers_own_origin(viewer: Viewer,
                                            runs: tuple[str, dict[str, str]]) -> None:
    child, run_id = _slow_run(runs[0], 60)
    try:
        path = f"/api/runs/{run_id}/cancel"
        assert viewer.post(path).status_code == 403  # no Origin
        assert viewer.post(path, headers={"Origin": "http://evil.example"}).status_code == 403
        assert viewer.get(path).status_code == 405
        assert viewer.get(f"/runs/{run_id}").status_code == 200
        assert child.poll() is None  # still running: nothing was cancelled
        done = viewer.post(path, headers={"Origin": viewer.url})
        assert done.status_code == 202 and done.json()["requested"] is True
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    finished = viewer.post(f"/api/runs/{runs[1]['mixed']}/cancel",
                           headers={"Origin": viewer.url})
    assert finished.status_code == 409 and finished.json()["status"] == "completed"
    assert viewer.post("/api/runs/nope/cancel",
                       headers={"Origin": viewer.url}).status_code == 404


# -- the same, live ----------------------------------------------------------------------------


class Manual:
    """A running run whose events the test writes (a child process owns it)."""

    def __init__(self, store: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "_control_runs.py"), "manual", store],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.run_id = self.process.stdout.readline().strip()
        assert self.run_id.startswith("manual-")

    def send(self, *events: dict[str, Any]) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(list(events)) + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "ok"

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            if self.process.stdout is not None:
                self.process.stdout.close()


@needs_chromium
def test_live_events_keep_the_same_rules(viewer: Viewer, page: Any,
                                         runs: tuple[str, dict[str, str]]) -> None:
    manual = Manual(runs[0])
    try:
        manual.send({"event": "WorkflowStarted"}, {"event": "PhaseStarted", "title": "first"},
                    {"event": "AgentStarted", "seq": 1, "label": "a", "phase": "first"})
        page.goto(f"{viewer.url}/runs/{manual.run_id}")
        assert page.inner_text("#agent-count") == "1"  # server-rendered, then live
        assert page.locator("tr.agent").count() == 1
        manual.send({"event": "PhaseStarted", "title": "idle"},
                    {"event": "PhaseStarted", "title": "second"},
                    {"event": "AgentStarted", "seq": 2, "label": "b", "phase": "second",
                     "model": "own-model"},
                    {"event": "AgentEnded", "seq": 1, "label": "a", "phase": "first",
                     "outcome": "timeout", "usage": None,
                     "error": {"kind": "timeout", "message": "ran past agent_timeout_s=3",
                               "details": []}},
                    {"event": "AgentEnded", "seq": 2, "label": "b", "phase": "second",
                     "outcome": "failed", "usage": {"input_tokens": 2, "output_tokens": 3},
                     "error": {"kind": "provider", "message": "401 Incorrect API key",
                               "details": ["status 401"]}})
        page.wait_for_function("document.querySelectorAll('tr.agent').length === 2 && "
                               "document.querySelector('tr.agent[data-seq=\"2\"]')"
                               ".dataset.status === 'failed'", timeout=10_000)
        titles = page.locator("details.phase").evaluate_all("ds => ds.map(d => d.dataset.phase)")
        assert titles == ["first", "second"]  # "idle" started no agent
        reasons = page.locator("tr.agent td.reason").all_inner_texts()
        assert reasons == ["timeout: ran past agent_timeout_s=3",
                           "provider: 401 Incorrect API key (status 401)"]
        models = page.locator("tr.agent td.model").all_inner_texts()
        assert models == ["live-default", "own-model"]  # the provider's default, the call's
        lefts = page.evaluate("""() => Array.from(document.querySelectorAll('details.phase table'))
            .map(t => Array.from(t.querySelectorAll('th')).map(th => Math.round(th.getBoundingClientRect().left)))""")
        assert lefts[0] == lefts[1], lefts
        page.wait_for_function("document.getElementById('timeline').dataset.bars === '2'")
        tooltip = page.evaluate("""() => {
            const chart = Chart.getChart(document.getElementById('timeline-canvas'));
            for (const set of chart.data.datasets) for (const point of set.data)
                if (point.agent.seq === 2)
                    return chart.options.plugins.tooltip.callbacks.label({raw: point});
        }""")
        assert tooltip[1] == "provider: 401 Incorrect API key (status 401)"
        assert page.inner_text("#token-count") == "5"
    finally:
        manual.close()
    _ended(page)
    assert page.inner_text("#run-status") == "completed"


def test_the_detail_of_an_unended_call_of_a_killed_run_reads_interrupted(
        viewer: Viewer, runs: tuple[str, dict[str, str]]) -> None:
    child, run_id = _slow_run(runs[0], 60)
    try:
        base = f"/api/runs/{run_id}/calls/1"
        # written once open for 0.2 s; each look asks the viewer: at most ten a second
        wait_until(lambda: viewer.get(base).status_code == 200,
                   what="the open call's detail", timeout=20, interval=0.1)
        assert viewer.get(base).json()["outcome"] is None  # still running
    finally:
        child.kill()  # kill -9: the run never ends by itself
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    detail = viewer.get(base).json()
    assert detail["outcome"] == "interrupted"
    assert detail["texts"]["prompt"]["text"] == "slow 1"
