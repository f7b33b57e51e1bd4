"""A run's questions asked on a real terminal (a pty; docs/cli.md, "Questions on a terminal"):
choices as a numbered list, several numbers for ``multiple``, a checkpoint as y/n, a schema as
JSON on one line; a bad reply says why and asks again; the live panel stays still while a
question is on screen. Plus :func:`parse_reply`'s rules over open-ended input."""

from __future__ import annotations

import json
import os
import pty
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import Question
from dsh_workflow._cli.asking import parse_reply, prompt_text
from dsh_workflow._questions import check_answer

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """export const meta = { name: 'asking', description: 'asks a person' };
phase('Pick');
await agent('warm up');
const color = await ask('Which colour?', {choices: ['red', 'green', 'blue']});
const sizes = await ask('Which sizes?', {choices: ['S', 'M', 'L'], multiple: true});
const ship = await checkpoint('Ship it?', {details: 'to production'});
const count = await ask('How many?', {schema: {type: 'object',
  properties: {n: {type: 'integer'}}, required: ['n']}});
const note = await ask('Any note?');
return {color, sizes, ship, count, note};
"""


class Terminal:
    """A CLI process whose stdin, stdout and stderr are one pty."""

    def __init__(self, argv: list[str], cwd: Path, store: Path) -> None:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENAI_", "DSH_WORKFLOW_"))
               and k not in ("COLUMNS", "FORCE_COLOR", "NO_COLOR")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env.update(TERM="xterm-256color", COLUMNS="100", LINES="40",
                   DSH_WORKFLOW_STORE=str(store))
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen([sys.executable, "-m", "dsh_workflow", *argv], cwd=cwd,
                                        env=env, stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        self.output = ""

    def read(self, wait: float) -> str:
        """What arrives within ``wait`` seconds (appended to :attr:`output` too)."""
        got = b""
        end = time.monotonic() + wait
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.master], [], [], left)
            if not ready:
                break
            try:
                chunk = os.read(self.master, 65_536)
            except OSError:  # the process ended and closed the pty
                break
            if not chunk:
                break
            got += chunk
        text = got.decode("utf-8", "replace")
        self.output += text
        return text

    def expect(self, marker: str, *, count: int = 1, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.output.count(marker) < count:
            assert time.monotonic() < deadline, self.output
            assert self.process.poll() is None or self.read(0.2), self.output
            self.read(0.1)

    def send(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def close(self) -> int:
        try:
            deadline = time.monotonic() + 60
            while self.process.poll() is None and time.monotonic() < deadline:
                self.read(0.2)
            self.read(0.2)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            os.close(self.master)
        return self.process.returncode


def test_the_terminal_asks_each_question_and_asks_again_on_a_bad_reply(tmp_path: Path) -> None:
    script = tmp_path / "asking.js"
    script.write_text(SCRIPT, encoding="utf-8")
    store = tmp_path / "runs.sqlite3"
    term = Terminal(["run", str(script)], tmp_path, store)
    try:
        term.expect("(a number) > ")
        assert "1) red" in term.output and "3) blue" in term.output
        # The live panel (drawn while the run started) stays still under the prompt: its
        # clock would redraw it every 0.1 s.
        assert term.read(0.8) == ""
        term.send("7")
        term.expect("type a number from 1 to 3; try again > ")
        term.send("2")
        term.expect("(numbers, separated by commas or spaces) > ")
        term.send("1, 3")
        term.expect("to production")
        term.expect("[y/N] ")
        term.send("maybe")
        term.expect("type y (approve) or n (reject); try again > ")
        term.send("y")
        term.expect("How many?")
        term.expect(") > ", count=3)
        term.send('{"n": "four"}')
        term.expect("; try again > ", count=3)
        assert "/n" in term.output.rsplit("How many?", 1)[1]  # the pointer of what is wrong
        term.send('{"n": 4}')
        term.expect("Any note?")
        term.send("  keep it short ")
    finally:
        code = term.close()
    assert code == 0, term.output
    tail = term.output.rsplit("Any note?", 1)[1].replace("\r\n", "\n")
    start = tail.index("\n{")
    value = json.loads(tail[start:tail.index("\n}", start) + 2])
    assert value == {"color": "green", "sizes": ["S", "L"], "ship": True, "count": {"n": 4},
                     "note": "  keep it short "}
    with sqlite3.connect(store) as conn:
        by = {row[0] for row in conn.execute("SELECT answered_by FROM questions")}
    assert by == {"terminal"}


def test_an_empty_reply_takes_the_default(tmp_path: Path) -> None:
    script = tmp_path / "default.js"
    script.write_text("export const meta = {name: 'd', description: 'defaults'};\n"
                      "const ok = await checkpoint('Go on?');\n"
                      "const pick = await ask('Which?', {choices: ['a', 'b'], default: 'b'});\n"
                      "return {ok, pick};\n", encoding="utf-8")
    term = Terminal(["run", str(script)], tmp_path, tmp_path / "runs.sqlite3")
    try:
        term.expect("[y/N] ")
        term.send("")
        term.expect('empty for the default "b"')
        term.send("")
    finally:
        code = term.close()
    assert code == 0, term.output
    assert '"ok": false' in term.output and '"pick": "b"' in term.output


def test_answer_continues_a_parked_run_and_asks_the_rest_on_the_terminal(
        tmp_path: Path) -> None:
    script = tmp_path / "parks.js"
    script.write_text("export const meta = {name: 'p', description: 'parks, then asks'};\n"
                      "const ok = await checkpoint('Go on?');\n"
                      "const pick = await ask('Which?', {choices: ['a', 'b']});\n"
                      "return {ok, pick};\n", encoding="utf-8")
    store = tmp_path / "runs.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_WORKFLOW_")}
    env.update(DSH_WORKFLOW_STORE=str(store),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    parked = subprocess.run([sys.executable, "-m", "dsh_workflow", "run", str(script)],
                            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=120, check=False)
    assert parked.returncode == 75, parked.stderr  # no terminal: it parks
    with sqlite3.connect(store) as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    term = Terminal(["answer", run_id, "q1", "--approve"], tmp_path, store)
    try:
        term.expect("(a number) > ")
        term.send("2")
    finally:
        code = term.close()
    assert code == 0, term.output
    assert '"ok": true' in term.output and '"pick": "b"' in term.output


def test_a_closed_terminal_input_parks_the_run(tmp_path: Path) -> None:
    script = tmp_path / "eof.js"
    script.write_text("export const meta = {name: 'e', description: 'end of input'};\n"
                      "return await checkpoint('Go on?');\n", encoding="utf-8")
    term = Terminal(["run", str(script)], tmp_path, tmp_path / "runs.sqlite3")
    try:
        term.expect("[y/N] ")
        os.write(term.master, b"\x04")  # Ctrl-D: end of input
    finally:
        code = term.close()
    assert code == 75, term.output
    assert "dsh-workflow answer" in term.output and "Traceback" not in term.output


def _question(**fields: object) -> Question:
    values: dict[str, object] = {"qid": "q1", "seq": 0, "kind": "ask", "question": "?"}
    values.update(fields)
    return Question(**values)  # type: ignore[arg-type]


CHOICES = st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs")),
                           min_size=1, max_size=8), min_size=1, max_size=9, unique=True)


@given(CHOICES, st.data())
def test_numbers_pick_the_choices_they_show(choices: list[str], data: st.DataObject) -> None:
    question = _question(choices=tuple(choices), multiple=True,
                         schema={"type": "array", "items": {"enum": choices}, "uniqueItems": True})
    picked = data.draw(st.lists(st.integers(1, len(choices)), min_size=1, unique=True))
    reply = ", ".join(str(n) for n in picked)
    assert parse_reply(question, reply) == [choices[n - 1] for n in picked]
    assert check_answer(question, parse_reply(question, reply))
    for n, choice in enumerate(choices, 1):
        assert f"{n}) " in prompt_text(question)
        single = _question(choices=tuple(choices), schema={"enum": choices})
        assert parse_reply(single, str(n)) == choice


def _picks(text: str) -> bool:
    reply = text.strip()
    return reply in ("", "x", "y", "z") or (reply.isascii() and reply.isdigit()
                                             and 1 <= int(reply) <= 3)


@given(st.integers().filter(lambda n: n < 1 or n > 3)
       | st.text().filter(lambda t: not _picks(t)))
def test_a_reply_that_picks_nothing_is_refused(reply: object) -> None:
    question = _question(choices=("x", "y", "z"), schema={"enum": ["x", "y", "z"]})
    with pytest.raises(ValueError, match="type a number from 1 to 3"):
        parse_reply(question, str(reply))


def test_a_schema_reply_is_json_and_a_checkpoint_y_or_n() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    question = _question(schema=schema)
    assert parse_reply(question, ' {"n": 1} ') == {"n": 1}
    with pytest.raises(ValueError, match="JSON on one line"):
        parse_reply(question, "{n: 1}")
    checkpoint = _question(kind="checkpoint", schema={"type": "boolean"}, default=False,
                           has_default=True)
    assert parse_reply(checkpoint, "YES") is True and parse_reply(checkpoint, "n") is False
    assert parse_reply(checkpoint, "") is False
    assert "\x1b" not in prompt_text(_question(question="evil \x1b[2J"))
