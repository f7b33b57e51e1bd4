"""Hostile text at the command line (SPEC §24), with real processes and a real store file: a
lone surrogate never crashes `run`, `runs`, `show`, `logs` or `show --agent` (it becomes U+FFFD
with a warning), and escape sequences from scripts, children and stores reach the terminal
escaped (``\\x1b``), never as the raw ESC byte."""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import sys
import urllib.parse
from pathlib import Path

import anyio
import httpx
import pytest
from _support import cli_command, cli_env, run_cli

from dsh_workflow import (
    EngineConfig,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    WorkflowStartRequest,
)
from dsh_workflow._text import escape_controls, valid_data, valid_text

TITLE = "\x1b]0;pwned\x07"  # retitles the window
FORGED = "\x1b[2K\rcompleted"  # erases the line and writes a fake end
CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"  # writes the clipboard
C1 = "\x9b31m"  # CSI as one C1 character


def cli(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """The command as a real process; its output as bytes (nothing decoded for it)."""
    return run_cli(*argv, cwd=cwd, binary=True)


def assert_clean(output: bytes) -> str:
    """``output`` is UTF-8, holds no raw control but newline and tab, and no traceback."""
    text = output.decode("utf-8")  # raises on a surrogate written raw
    raw = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
    assert raw == [], (raw, text)
    assert "Traceback" not in text, text
    return text


# ---- the one function ------------------------------------------------------------------------


def test_escape_controls_shows_every_control_escaped() -> None:
    assert escape_controls(TITLE + FORGED) == "\\x1b]0;pwned\\x07\\x1b[2K\\x0dcompleted"
    assert escape_controls("a\tb\nc\x00\x7f\x85\x9f") == "a\tb\nc\\x00\\u007f\\u0085\\u009f"
    assert escape_controls("plain ✓ \U0001f600") == "plain ✓ \U0001f600"
    assert escape_controls("half \ud83d") == "half \ufffd"
    # the escaped form of a JSON string's control is still valid JSON
    assert json.loads(escape_controls(json.dumps("\x7f\x9b", ensure_ascii=False))) == "\x7f\x9b"


def test_valid_text_joins_pairs_and_replaces_halves() -> None:
    assert valid_text("\ud83d\ude00") == "\U0001f600"
    assert valid_text("a\ud83d") == "a\ufffd" and valid_text("\udc00b") == "\ufffdb"
    same = "nothing to do ✓"
    assert valid_text(same) is same
    value, notes = valid_data({"items": [1, 2, "x\ud83d"], "ok": "y", "odd key": ["\udc00"]},
                              "return value")
    assert value == {"items": [1, 2, "x\ufffd"], "ok": "y", "odd key": ["\ufffd"]}
    assert sorted(notes) == ['return value.items[2]: a lone surrogate became U+FFFD',
                             'return value["odd key"][0]: a lone surrogate became U+FFFD']
    untouched = {"a": [1, {"b": "c"}]}
    assert valid_data(untouched, "v") == (untouched, []) and valid_data(untouched, "v")[0] \
        is untouched


# ---- run ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["quickjs", "subprocess"])
def test_run_of_a_hostile_script_completes_escaped_and_valid(tmp_path: Path, engine: str) -> None:
    if engine == "subprocess" and sys.platform != "linux":
        pytest.skip("the subprocess engine's sandbox is Linux-only")
    script = tmp_path / "hostile.js"
    script.write_text(
        "export const meta = {name: 'hostile', description: 'hostile text'};\n"
        f"log({json.dumps(TITLE)}); log({json.dumps(FORGED)}); log('half \\ud83d');\n"
        f"phase({json.dumps(CLIPBOARD)});\n"
        f"await agent({json.dumps(C1 + ' child')}, {{label: {json.dumps(TITLE)}}});\n"
        "return {items: [1, 2, '\\ud83d'], title: " + json.dumps(TITLE) + "};\n")
    events = tmp_path / "events.jsonl"
    done = cli("run", script, "--engine", engine, "--store", tmp_path / "runs.sqlite3",
               "--events", events, cwd=tmp_path)
    out, err = assert_clean(done.stdout), assert_clean(done.stderr)
    assert done.returncode == 0, err
    assert json.loads(out) == {"items": [1, 2, "\ufffd"], "title": TITLE}  # JSON escapes it
    assert "\\x1b]0;pwned\\x07" in err and "\\x1b[2K\\x0dcompleted" in err
    assert "warning: return value.items[2]: a lone surrogate became U+FFFD" in err
    assert "half \ufffd" in err
    for line in events.read_bytes().decode("utf-8").splitlines():  # every line valid
        json.loads(line)


def test_the_live_panel_shows_hostile_text_escaped(tmp_path: Path) -> None:
    """The live panel (rich, forced as on a terminal) draws with escape sequences of its own;
    the script's name, phase, log lines and labels in it are escaped."""
    script = tmp_path / "panel.js"
    script.write_text(
        "export const meta = {name: 'panel" + TITLE.encode("unicode_escape").decode()
        + "', description: 'd'};\n"
        f"phase({json.dumps(TITLE)}); log({json.dumps(FORGED + C1)});\n"
        f"await agent('x', {{label: {json.dumps(CLIPBOARD)}}});\nreturn 1;\n")
    done = subprocess.run(cli_command("run", script, "--no-store"),
                          cwd=tmp_path, capture_output=True, timeout=120,
                          env={**cli_env(), "FORCE_COLOR": "1", "TERM": "xterm", "COLUMNS": "160"})
    assert done.returncode == 0, done.stderr
    err = done.stderr.decode("utf-8")
    assert "\x1b[" in err  # the panel's own drawing
    # (a carriage return may be the panel's own; the forged one shows as \x0d below)
    assert "\x1b]" not in err and "\x07" not in err and "\x9b" not in err
    assert "panel\\x1b]0;pwned\\x07" in err and "\\x1b[2K\\x0dcompleted\\u009b31m" in err


# ---- a stored run with hostile text -------------------------------------------------------------


class _HostileProvider:
    """Answers with a lone surrogate and escape sequences; fails the child whose prompt says
    so with a message holding both."""

    async def run(self, request: SubagentRequest) -> SubagentResult:
        if "fail" in request.prompt:
            return SubagentResult(stop_reason="error", error=f"broke \ud83d {TITLE}{FORGED}")
        return SubagentResult(text=f"answer \ud83d {TITLE}{CLIPBOARD}")


async def _stored_run(store_path: Path) -> str:
    async with SQLiteRunStore(store_path) as store, \
            QuickJSEngine(EngineConfig(), provider=_HostileProvider(), store=store) as engine:
        run = engine.start(WorkflowStartRequest(
            meta={"name": "stored", "description": "hostile answers"},
            script="const a = await agent('ok'); const b = await agent('fail');\n"
                   "return [a, b];"))
        result = await run.result()
        await run.dispose()
        assert result.stop_reason == "completed", result.error  # one child failed, no fault
        assert result.value[1] is None and result.agents_failed == 1
        # an older release's record: events and a meta holding what UTF-8 cannot hold
        await store.create_run("old", meta={"name": "old \ud83d" + TITLE, "description": "d"},
                               script="log('\\ud83d')")
        await store.append_events("old", [{"event": "LogEmitted",
                                            "message": "x \ud83d" + FORGED}])
        await store.finish_run("old", status="completed",
                               result={"value": ["\ud83d", TITLE], "stop_reason": "completed"})
        return run.id


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "runs.sqlite3"
    return path, anyio.run(_stored_run, path)


def test_runs_show_logs_and_show_agent_of_hostile_stored_text(
        tmp_path: Path, stored: tuple[Path, str]) -> None:
    path, run_id = stored
    for argv in (["runs"], ["show", run_id], ["logs", run_id], ["show", run_id, "--agent", "1"],
                 ["show", run_id, "--agent", "2"], ["show", "old"], ["logs", "old"],
                 ["runs", "--json"], ["show", "old", "--json"]):
        done = cli(*argv, "--store", path, cwd=tmp_path)
        out, err = assert_clean(done.stdout), assert_clean(done.stderr)
        assert done.returncode == 0, (argv, err)
        if argv[-1] == "--json":
            json.loads(out)
        if argv[:1] == ["show"] and "--agent" in argv:
            assert "\\x1b]0;pwned\\x07" in out, out
        if argv == ["show", run_id, "--agent", "1"]:
            assert "answer \ufffd" in out
            assert "warning: standard output: a lone surrogate became U+FFFD" in err
        if argv == ["show", run_id, "--agent", "2"]:
            assert "broke \ufffd" in out  # the failure kept its record and its reason
        if argv == ["logs", "old"]:
            assert "x \ufffd\\x1b[2K\\x0dcompleted" in out


def test_the_viewer_serves_hostile_stored_text(tmp_path: Path, stored: tuple[Path, str]) -> None:
    """Every page and answer of `ui` about such runs is 200 and valid UTF-8 (U+FFFD)."""
    path, run_id = stored
    viewer = subprocess.Popen(cli_command("ui", "--store", str(path),
                               "--port", "0"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, env={k: v for k, v in cli_env().items()
                                              if k != "DSH_WORKFLOW_TOKEN"})
    try:
        assert viewer.stderr is not None
        found = re.match(r"viewer: (http://127\.0\.0\.1:\d+)/\?token=(\S+)  ",
                         viewer.stderr.readline())
        assert found is not None
        with httpx.Client(base_url=found.group(1), timeout=30) as client:
            entered = client.get("/", params={"token": urllib.parse.unquote(found.group(2))})
            assert entered.status_code == 200
            paths = ["/", "/runs-table", f"/runs/{run_id}", "/runs/old",
                     f"/api/runs/{run_id}/calls/1", f"/api/runs/{run_id}/calls/2",
                     f"/api/runs/{run_id}/calls/1/texts/text",
                     *(f"/api/runs/old/text/{part}" for part in ("value", "result", "meta")),
                     "/api/runs/old/stream", f"/api/runs/{run_id}/stream"]
            for where in paths:
                with client.stream("GET", where) as response:
                    assert response.status_code == 200, where
                    body = b"".join(itertools.islice(response.iter_bytes(), 50))
                    body.decode("utf-8")  # valid UTF-8 (a raw surrogate cannot be encoded)
                    if where.endswith(("/calls/1", "/texts/text")):
                        assert "answer \ufffd" in body.decode("utf-8")
    finally:
        viewer.send_signal(signal.SIGINT)
        viewer.wait(timeout=15)
        assert viewer.stderr is not None
        viewer.stderr.close()
