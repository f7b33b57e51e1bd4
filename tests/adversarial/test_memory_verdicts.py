"""Out of memory inside the runtime's own work ends the run with the memory verdict, on both
engines (issue 25): a nested ``parallel`` fan-out that runs out of memory in the combinators'
bookkeeping must not leave the run waiting on its barrier while children are in flight, and a
thrown value whose rendering runs out of memory is reported as the memory limit, not as
"could not be rendered as text"."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from _support import both_engines

from dsh_workflow import EngineConfig, WorkflowResult, WorkflowStartRequest
from dsh_workflow._errors import SCRIPT_FAILED
from dsh_workflow.testing import FunctionProvider, HangingProvider

pytestmark = pytest.mark.anyio

META = {"name": "memory", "description": "memory verdicts"}
ENGINES = both_engines()
MIB = 1024 * 1024


def config(mib: int) -> EngineConfig:
    return EngineConfig(memory_limit_bytes=mib * MIB, stack_limit_bytes=256 * 1024,
                        slice_cpu_limit_s=2.0, dispose_grace_s=0.5, max_total_agents=100_000,
                        max_concurrent_agents=4)


async def run(factory: Any, script: str, cfg: EngineConfig, provider: Any,
              seconds: float = 20) -> tuple[WorkflowResult, float]:
    async with factory(cfg, provider) as engine:
        started = time.monotonic()
        handle = engine.start(WorkflowStartRequest(meta=META, script=script))
        with anyio.fail_after(seconds):
            result = await handle.result()
        elapsed = time.monotonic() - started
        await handle.dispose()
    return result, elapsed


def assert_memory(result: WorkflowResult, mib: int) -> None:
    assert result.stop_reason == "error", result
    assert result.error_code == "RESOURCE_LIMIT", result.error
    assert result.error is not None and f"memory_limit_bytes={mib * MIB}" in result.error
    assert "could not be rendered" not in result.error


FAN_OUT = """
const outer = [];
for (let i = 0; i < 4096; i++) {
  outer.push(() => parallel(Array.from({length: 4096}, (_, j) => () => agent('p' + i + '-' + j))));
}
return await parallel(outer);
"""


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize("mib", [8, 16, 32])
async def test_a_nested_fan_out_out_of_memory_ends_with_the_memory_verdict(
        factory: Any, mib: int) -> None:
    # The children never answer: only the memory verdict can end the run.
    result, elapsed = await run(factory, FAN_OUT, config(mib), HangingProvider())
    assert_memory(result, mib)
    assert elapsed < 15


@pytest.mark.parametrize("factory", ENGINES)
async def test_an_item_out_of_memory_rejects_the_barrier_instead_of_a_null_slot(
        factory: Any) -> None:
    # the item's own frame holds what it allocated, so the heap has room again once it threw.
    # It fills the heap in 256 KiB pieces: the allocation that fails leaves room for the
    # engine's error object whatever the runtime's own heap layout is. (A failure leaving less
    # room than that throws a bare null, which no script can tell from `throw null`: the known
    # residual of SECURITY.md, whose verdict would then hang on the layout.)
    script = """
    try {
      const r = await parallel([
        () => { const a = []; for (;;) a.push('x'.repeat(262144) + a.length); },
        () => agent('sibling'),
      ]);
      return ['not rejected', r];
    } catch (e) {
      return ['rejected', e instanceof InternalError, e.message];
    }"""
    result, _ = await run(factory, script, config(16),
                          FunctionProvider(lambda request: "ok:" + request.prompt))
    assert result.stop_reason == "completed", result.error
    assert result.value == ["rejected", True, "out of memory"]
    # an ordinary throw, and a script-made look-alike, still null the slot
    ordinary, _ = await run(factory, """
        return await parallel([() => { throw new InternalError('out of memory'); },
                               () => { throw null; }, () => agent('a')]);""",
                            config(16), FunctionProvider(lambda request: "ok:" + request.prompt))
    assert ordinary.value == [None, None, "ok:a"], ordinary.error


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize("thrown", [
    "new Error('x'.repeat(7 * 1024 * 1024))",
    "'x'.repeat(6 * 1024 * 1024)",
    "{message: 'x'.repeat(6 * 1024 * 1024)}",
])
async def test_a_thrown_value_whose_rendering_runs_out_of_memory_names_memory(
        factory: Any, thrown: str) -> None:
    result, elapsed = await run(factory, f"throw {thrown};", config(16), HangingProvider())
    assert_memory(result, 16)
    assert elapsed < 15


#: Fill the heap until allocation fails, leave a little room, queue one promise job, stall. An
#: interrupt met while the heap is full cannot make its error and surfaces as an out-of-memory
#: the script's own ``catch`` swallows; the stretch's CPU is then judged after the next promise
#: job. So the verdict is the stretch's CPU against ``slice_cpu_limit_s``: on a busy machine
#: the same fill can cost more CPU than on a quiet one, which is why the attack corpus's
#: ``bomb-memory-inside-agent`` gives its fill a slice far above what it costs (issue 36, 10).
FILL_THEN_STALL = """
const filler = [];
for (const size of [262144, 16384, 1024]) {
  try { for (;;) filler.push('f'.repeat(size) + filler.length); } catch (e) { /* full */ }
}
for (let i = 0; i < 8; i++) filler.pop();
await null;
filler.length = 0;
await new Promise(() => {});
"""


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize(("slice_s", "code", "text"), [
    (0.005, "RESOURCE_LIMIT", "slice_cpu_limit_s=0.005"),
    (5.0, SCRIPT_FAILED, "nothing will ever settle"),
], ids=["over-its-slice", "within-its-slice"])
async def test_a_full_heap_fill_is_judged_by_its_cpu_not_by_load(factory: Any, slice_s: float,
                                                                  code: str, text: str) -> None:
    cfg = EngineConfig(memory_limit_bytes=16 * MIB, stack_limit_bytes=256 * 1024,
                       slice_cpu_limit_s=slice_s, dispose_grace_s=0.5)
    for _ in range(2):  # the same verdict every time: nothing here depends on timing
        result, _ = await run(factory, FILL_THEN_STALL, cfg, FunctionProvider())
        assert result.stop_reason == "error" and result.error_code == code, result
        assert result.error is not None and text in result.error, result.error
