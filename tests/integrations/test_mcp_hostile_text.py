"""The stdio MCP server against hostile text (SPEC §24), with the official ``mcp`` client: a
script returning, logging or naming a phase with a lone surrogate (half an emoji) gets its
answer with U+FFFD and a warning naming where, and the connection keeps serving."""

from __future__ import annotations

import json
import os
import sys

import pytest

mcp = pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402 - after the skip

pytestmark = pytest.mark.anyio

META = {"name": "half-emoji", "description": "returns half an emoji"}
SCRIPT = """phase("phase \\ud83d");
log("log \\ud83d");
const echoed = await agent("prompt \\ud83d");
return {half: "\\ud83d", items: [1, 2, "x\\udc00"], echoed};"""


def _text(result: object) -> str:
    content = result.content  # type: ignore[attr-defined]  # a CallToolResult
    return "".join(part.text for part in content if part.type == "text")


@pytest.mark.parametrize("engine", ["quickjs", "subprocess"])
async def test_a_lone_surrogate_neither_kills_the_connection_nor_the_answer(engine: str) -> None:
    if engine == "subprocess" and sys.platform != "linux":
        pytest.skip("the subprocess engine's sandbox is Linux-only")
    notes: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "dsh_workflow", "mcp", "--engine", engine],
                                   env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        first = await session.call_tool("workflow", {"meta": META, "script": SCRIPT},
                                        progress_callback=on_progress)
        assert not first.is_error, _text(first)
        text = _text(first)
        value = json.JSONDecoder().raw_decode(text.split("Return value:\n", 1)[1])[0]
        assert value == {"half": "\ufffd", "items": [1, 2, "x\ufffd"],
                         "echoed": "echo: prompt \ufffd"}
        assert "return value.half: a lone surrogate became U+FFFD" in text
        assert "return value.items[2]: a lone surrogate became U+FFFD" in text
        assert any("phase \ufffd" in note for note in notes), notes
        second = await session.call_tool("workflow", {"meta": META, "script": "return 'ok'"})
        assert not second.is_error and _text(second).endswith('"ok"')
