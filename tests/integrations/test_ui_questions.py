"""The viewer answers a run's questions (docs/viewer.md, "Answering questions"): the run page of
a waiting or running run shows its open questions with a form each; answers are posted behind
the token and the Origin check; an invalid one is refused with the reason and the question
stays open; the process running the run picks an answer up within half a second; a parked
run's answer is recorded for its continuation. ``dsh-workflow ui`` and the run as real
processes, real HTTP, and the form in headless Chromium."""

from __future__ import annotations

import json
import pathlib
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _support import run_beside_playwright, wait_until

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_ui_control import CHROMIUM, CHROMIUM_FLAGS, Viewer, _context  # noqa: E402

from dsh_workflow import SQLiteRunStore  # noqa: E402

#: How long the running process may take to see an answer the viewer recorded: its control
#: poll's half second, plus the time to deliver it.
PICKUP_S = 0.5 + 0.5


class AskingRun:
    """``_question_runs.py MODE STORE`` as a child process."""

    def __init__(self, mode: str, store: str) -> None:
        self.process = subprocess.Popen([sys.executable, str(HERE / "_question_runs.py"), mode,
                                         store], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.id = self.process.stdout.readline().strip()
        assert self.id, "the run did not start"

    def line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture
def store(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "runs.sqlite3")


@pytest.fixture
def viewer(store: str) -> Iterator[Any]:
    lazy = _LazyViewer(store)  # started once a run has made the store
    try:
        yield lazy
    finally:
        lazy.stop()


class _LazyViewer:
    """A viewer started on first use (after the run has made the store)."""

    def __init__(self, store: str) -> None:
        self.store = store
        self.viewer: Viewer | None = None

    def __getattr__(self, name: str) -> Any:
        if self.viewer is None:
            self.viewer = Viewer(self.store)
        return getattr(self.viewer, name)

    def stop(self) -> None:
        if self.viewer is not None:
            self.viewer.stop()
            self.viewer = None


def _wait_open(view: Any, run_id: str, qid: str) -> str:
    """The run's page once it shows question ``qid`` open."""
    def shown() -> str | None:
        page = view.get(f"/runs/{run_id}")
        assert page.status_code == 200, page.text
        return str(page.text) if f'data-qid="{qid}"' in page.text else None

    # each look asks the viewer: at most twenty a second
    return wait_until(shown, what=f"question {qid} on the run's page", timeout=60,
                      interval=0.05)


def _post(view: Any, run_id: str, qid: str, *, data: dict[str, Any] | None = None,
          body: Any = None, token: bool = True, origin: bool = True) -> httpx.Response:
    headers = {"Origin": view.url} if origin else {}
    if token:
        headers["Authorization"] = f"Bearer {view.params['token']}"
    path = f"{view.url}/api/runs/{run_id}/questions/{qid}"
    if body is not None:
        return httpx.post(path, json=body, headers=headers, timeout=10)
    return httpx.post(path, data=data, headers=headers, timeout=10)


def _records(store: str, run_id: str) -> list[Any]:
    async def read() -> list[Any]:
        async with SQLiteRunStore(store) as opened:
            return await opened.question_records(run_id)
    return run_beside_playwright(read)


def test_a_running_run_is_answered_from_its_page(store: str, viewer: Any) -> None:
    run = AskingRun("waiting", store)
    try:
        page = _wait_open(viewer, run.id, "q1")
        assert "Ship it?" in page and 'value="approve"' in page and 'value="reject"' in page
        assert "to &lt;b&gt;production&lt;/b&gt;" in page  # the script's text stays text
        # Without the token nothing is read or written; without the viewer's Origin, 403.
        assert _post(viewer, run.id, "q1", data={"decision": "approve"},
                     token=False).status_code == 401
        assert _post(viewer, run.id, "q1", data={"decision": "approve"},
                     origin=False).status_code == 403
        refused = _post(viewer, run.id, "q1", data={"decision": "maybe"})
        assert refused.status_code == 400 and "decision=approve" in refused.text
        assert 'data-qid="q1"' in viewer.get(f"/runs/{run.id}").text  # still open
        assert _post(viewer, run.id, "q9", data={"decision": "approve"}).status_code == 404

        posted = time.time()
        done = _post(viewer, run.id, "q1", data={"decision": "approve"})
        assert done.status_code == 303 and done.headers["location"].endswith("#questions")
        heard = run.line().split()
        assert heard[:3] == ["answered", "q1", "viewer"]
        assert float(heard[3]) - posted < PICKUP_S, float(heard[3]) - posted
        again = _post(viewer, run.id, "q1", data={"decision": "reject"})
        assert again.status_code == 409 and "already answered" in again.text

        page = _wait_open(viewer, run.id, "q2")
        assert 'type="radio" name="choice" value="green"' in page
        wrong = _post(viewer, run.id, "q2", data={"choice": "purple"})
        assert wrong.status_code == 400 and "purple" in wrong.text
        assert _post(viewer, run.id, "q2", data={"choice": "green"}).status_code == 303
        assert run.line().startswith("answered q2 viewer")

        page = _wait_open(viewer, run.id, "q3")
        assert 'type="checkbox" name="choice" value="L"' in page
        assert _post(viewer, run.id, "q3", data={"choice": ["S", "L"]}).status_code == 303
        assert run.line().startswith("answered q3 viewer")

        page = _wait_open(viewer, run.id, "q4")
        assert 'name="json"' in page and "&#34;minimum&#34;: 1" in page  # the schema shown
        bad = _post(viewer, run.id, "q4", body={"value": {"n": 0}})
        assert bad.status_code == 400 and bad.json()["answered"] is False
        assert "/n" in bad.json()["error"]
        assert _post(viewer, run.id, "q4", data={"json": "{n: 2}"}).status_code == 400
        good = _post(viewer, run.id, "q4", body={"value": {"n": 2}})
        assert good.status_code == 200 and good.json() == {"answered": True, "qid": "q4",
                                                           "status": "running"}
        assert run.line().startswith("answered q4 viewer")

        _wait_open(viewer, run.id, "q5")
        assert _post(viewer, run.id, "q5", data={"text": "  "}).status_code == 400
        assert _post(viewer, run.id, "q5", data={"text": "ship it\r\nsoon"}).status_code == 303
        assert run.line().startswith("answered q5 viewer")
        result = json.loads(run.line())
    finally:
        run.close()
        viewer.stop()
    assert result["stop_reason"] == "completed", result
    assert result["value"] == {"ship": True, "colour": "green", "sizes": ["S", "L"],
                               "count": {"n": 2}, "note": "ship it\nsoon"}
    assert {r.by for r in _records(store, run.id)} == {"viewer"}


def test_a_parked_runs_answer_is_recorded_and_the_page_says_how_to_continue(
        store: str, viewer: Any) -> None:
    run = AskingRun("parked", store)
    try:
        assert json.loads(run.line())["stop_reason"] == "waiting"
        run.process.wait(timeout=30)
        page = _wait_open(viewer, run.id, "q1")
        assert f"dsh-workflow answer {run.id}" in page and "parked" in page
        done = _post(viewer, run.id, "q1", data={"decision": "reject"})
        assert done.status_code == 303
        page = viewer.get(done.headers["location"]).text
        assert "Answer to q1 recorded" in page and 'data-qid="q1"' not in page
        assert f"dsh-workflow answer {run.id}" in page
    finally:
        run.close()
        viewer.stop()
    first = _records(store, run.id)[0]
    assert first.answered and first.answer is False and first.by == "viewer"


def test_a_finished_runs_page_has_no_form_and_its_questions_take_no_answer(
        store: str, viewer: Any) -> None:
    run = AskingRun("parked", store)
    try:
        run.line()
        run.process.wait(timeout=30)
    finally:
        run.close()

    with sqlite3.connect(store) as conn:  # as a run ended otherwise is recorded
        conn.execute("UPDATE runs SET status = 'cancelled' WHERE id = ?", (run.id,))
    try:
        page = viewer.get(f"/runs/{run.id}").text
        assert 'data-qid="q1"' not in page
        refused = _post(viewer, run.id, "q1", data={"decision": "approve"})
        assert refused.status_code == 409 and "cancelled" in refused.text
    finally:
        viewer.stop()


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")
def test_the_form_answers_in_a_browser(store: str, viewer: Any, tmp_path: pathlib.Path) -> None:
    from playwright.sync_api import sync_playwright

    run = AskingRun("waiting", store)
    try:
        _wait_open(viewer, run.id, "q1")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            try:
                context = _context(browser, viewer.viewer)
                page = context.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda error: errors.append(str(error)))
                page.goto(f"{viewer.url}/runs/{run.id}")
                page.click('form[data-qid="q1"] button[value="approve"]')
                page.wait_for_selector("#answered-note")
                assert run.line().startswith("answered q1 viewer")
                # the next question is on the page, or arrives on the live page, which then
                # says to reload
                page.wait_for_selector('form[data-qid="q2"], #questions-changed:not([hidden])',
                                       timeout=20_000)
                page.goto(f"{viewer.url}/runs/{run.id}")
                page.check('form[data-qid="q2"] input[value="blue"]')
                page.check('form[data-qid="q2"] input[value="red"]')  # radio: red only
                page.evaluate("""() => { const i = document.querySelector(
                    'form[data-qid="q2"] input[value="red"]'); i.value = "purple"; }""")
                page.click('form[data-qid="q2"] button[type="submit"]')
                refusal = page.wait_for_selector('form[data-qid="q2"] .q-refused')
                assert "purple" in refusal.inner_text()  # the reason; the question open
                page.check('form[data-qid="q2"] input[value="blue"]')
                page.click('form[data-qid="q2"] button[type="submit"]')
                page.wait_for_selector("#answered-note")
                assert run.line().startswith("answered q2 viewer")
                page.screenshot(path=str(tmp_path / "questions.png"), full_page=True)
                assert errors == [], errors
            finally:
                browser.close()
    finally:
        run.close()
        viewer.stop()
