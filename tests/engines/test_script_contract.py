"""The script contract's fourth edition (SPEC §26), on both engines and both backends: one
clock (no ``performance``) and no host value on ``globalThis``; the script's own error has its code
``SCRIPT_ERROR``; unknown meta keys and string phases run, warned about in the result; an ES
``import`` is named at start."""

from __future__ import annotations

from typing import Any

import pytest
from _support import EngineFactory, both_engines

from dsh_workflow import (
    EngineConfig,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowResult,
    WorkflowStartRequest,
)
from dsh_workflow.testing import FunctionProvider

META = {"name": "contract", "description": "the fourth edition"}
ENGINES = both_engines()


async def _run(factory: EngineFactory, script: str, meta: dict[str, Any] = META) -> WorkflowResult:
    async with factory(EngineConfig(), FunctionProvider(lambda r: f"did {r.prompt}")) as engine:
        run = engine.start(WorkflowStartRequest(meta=meta, script=script))
        result = await run.result()
        await run.dispose()
    return result


@pytest.mark.anyio
@pytest.mark.parametrize("factory", ENGINES)
async def test_no_host_value_is_enumerable_on_globalThis(factory: Any) -> None:
    """One clock (SPEC §26): QuickJS's performance (the host's clock, unjournaled) is absent;
    no global is enumerable, so returning globalThis shows nothing."""
    result = await _run(factory, """
        return {keys: Object.keys(globalThis), whole: globalThis,
                performance: typeof performance, own: 'performance' in globalThis};""")
    assert result.stop_reason == "completed", result
    assert result.value == {"keys": [], "whole": {}, "performance": "undefined", "own": False}


@pytest.mark.anyio
@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize("script", ['throw new Error("stop")', "throw 'plain'",
                                    "await new Promise(() => {})", "null.x"])
async def test_the_script_own_error_is_script_error(factory: Any, script: str) -> None:
    result = await _run(factory, script)
    assert result.stop_reason == "error" and result.error_code == WorkflowErrorCode.SCRIPT_ERROR
    assert result.error is not None and not result.error.startswith("RESULT_UNSERIALIZABLE")


@pytest.mark.anyio
@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize("script", ["return 10n", "const a = {}; a.a = a; return a"])
async def test_a_value_json_cannot_hold_stays_result_unserializable(factory: Any,
                                                                   script: str) -> None:
    result = await _run(factory, script)
    assert result.error_code == WorkflowErrorCode.RESULT_UNSERIALIZABLE, result


@pytest.mark.anyio
@pytest.mark.parametrize("factory", ENGINES)
async def test_unknown_meta_keys_and_string_phases_run_with_warnings(factory: Any) -> None:
    meta = {**META, "examples": ["contract on a repo"], "phases": ["Review", "Judge"]}
    done = await _run(factory, "phase('Review'); return await agent('x', {effort: 'xhigh'})",
                      meta)
    assert done.stop_reason == "completed" and done.value == "did x"
    expected = ("meta.examples is not a recognized field: kept, not used",
                "meta.phases[0] is a string: taken as the phase's title",
                "meta.phases[1] is a string: taken as the phase's title")
    assert done.warnings == expected
    failed = await _run(factory, "return [undefined]; ", meta)
    assert failed.warnings[:3] == expected and len(failed.warnings) == 4  # then the lossy step
    thrown = await _run(factory, "throw new Error('no')", meta)
    assert thrown.warnings == expected  # whatever the run's end


@pytest.mark.anyio
@pytest.mark.parametrize("factory", ENGINES)
async def test_an_es_import_is_named_at_start(factory: Any) -> None:
    async with factory(EngineConfig(), FunctionProvider(lambda r: "x")) as engine:
        with pytest.raises(WorkflowError) as caught:
            engine.start(WorkflowStartRequest(
                meta=META, script="import { rank } from './rank.js';\nreturn rank();"))
    assert caught.value.code == WorkflowErrorCode.SCRIPT_PARSE
    assert "ES `import` statement" in caught.value.message
    assert "`import { rank } from './rank.js';`" in caught.value.message
