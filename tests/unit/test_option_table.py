"""One table of ``agent()`` options (SPEC §28): the runtime's check, the host's parse, ``check``'s
lint, the tool's description, the manual and the conformance kit all read ``_option_table.py``.

The proof that each reader reads it: a fresh interpreter adds a fake option to the table before
anything else of the package is loaded, and every reader then takes or lists it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import get_args

from dsh_workflow._agent_options import AgentOptions
from dsh_workflow._option_table import (
    AGENT_OPTIONS,
    EFFORTS,
    ISOLATIONS,
    agent_option_names,
)
from dsh_workflow._subagent import Effort, Isolation

REPO = Path(__file__).resolve().parents[2]

#: Runs in a fresh interpreter: the table gets a fake option first, then each reader is asked.
_PROBE = r"""
import json, sys

import dsh_workflow._option_table as table

table.AGENT_OPTIONS = (*table.AGENT_OPTIONS, table.AgentOption(
    "temperature", "temperature", "choice", ("warm", "cold"), described="how warm"))

import anyio

from dsh_workflow import EchoProvider, QuickJSEngine, WorkflowError, WorkflowStartRequest
from dsh_workflow._cli.lint import lint
from dsh_workflow._agent_options import SUPPORTED_OPTIONS, parse_agent_options
from dsh_workflow._tool.texts import DESCRIPTION
from dsh_workflow.testing import _suite_hooks

found = {}
parse_agent_options({"temperature": "warm", "label": "x"})  # accepted
for raw in ({"temperature": "hot"}, {"nonsense": 1}):
    try:
        parse_agent_options(raw)
    except WorkflowError as exc:
        found.setdefault("parse", []).append([exc.code.value, exc.message])
found["supported"] = list(SUPPORTED_OPTIONS)
found["kit"] = list(_suite_hooks.SUPPORTED_OPTIONS)
found["lint"] = [w.message for w in lint(
    "await agent('a', {temperature: 'warm'});\nawait agent('b', {temperature: 'hot'});\n")]
found["description"] = DESCRIPTION


async def run():
    script = ("let message = null;\n"
              "try { await agent('x', 5); } catch (e) { message = e.message; }\n"
              "return [message, await agent('y', {temperature: 'warm'})];")
    async with QuickJSEngine(provider=EchoProvider()) as engine:
        handle = engine.start(WorkflowStartRequest(meta={"name": "t", "description": "d"},
                                                   script=script))
        result = await handle.result()
        await handle.dispose()
    return [result.error, result.value]


found["runtime"] = anyio.run(run)
print(json.dumps(found))
"""


def test_every_reader_takes_an_option_added_to_the_table() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          timeout=120, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    # the host's parse: accepts it, checks its value, lists it among the supported ones
    bad_value, unknown = found["parse"]
    assert bad_value == ["INVALID_ARGUMENT",
                         'agent() option "temperature" must be one of "warm", "cold" (got "hot")']
    assert unknown[0] == "UNSUPPORTED_OPTION" and "failure, temperature)" in unknown[1]
    assert found["supported"][-1] == found["kit"][-1] == "temperature"
    # check's lint: the good literal passes, the bad one is named with the table's choices
    assert found["lint"] == ['agent() option "temperature" must be one of "warm", "cold" '
                             '(got "hot")']
    # the tool's description lists it with what the table says of it
    assert 'failure ("null", the default, or "throw"), temperature (how warm); any other key' \
        in found["description"]
    # the runtime names it when the options are not an object; the host accepts the call
    error, value = found["runtime"]
    assert error is None, error
    assert value[0].startswith("agent() options must be an object such as {label, phase, ")
    assert "failure, temperature} (got a number)" in value[0]
    assert isinstance(value[1], str)


def test_every_option_fills_a_field_of_the_parsed_options() -> None:
    """The parse fills ``AgentOptions`` from the table: no row without a field, no field
    without a row (a row without one would be accepted and then dropped)."""
    assert sorted(option.field for option in AGENT_OPTIONS) == \
        sorted(f.name for f in fields(AgentOptions))
    assert len(set(agent_option_names())) == len(AGENT_OPTIONS)


def test_the_choices_are_the_request_types() -> None:
    assert get_args(Effort) == EFFORTS
    assert get_args(Isolation) == ISOLATIONS
    for option in AGENT_OPTIONS:
        assert bool(option.choices) == (option.kind == "choice"), option.name
        assert not option.nonempty or option.kind == "name", option.name


def test_the_manual_lists_the_options_of_the_table() -> None:
    text = (REPO / "docs" / "scripts.md").read_text(encoding="utf-8")
    table = text[text.index("| `agent()` option |"):]
    table = table[:table.index("\n\n")]
    listed = tuple(re.findall(r"^\| `([^`]+)` \|", table, re.M))
    assert listed == agent_option_names()

