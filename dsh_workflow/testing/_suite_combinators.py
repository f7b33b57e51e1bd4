"""``parallel()`` and ``pipeline()`` (docs/scripts.md)."""

from __future__ import annotations

import anyio
import pytest

from .._subagent import SubagentRequest
from ._doubles import FunctionProvider, GatedProvider
from ._suite_base import (
    ConformanceBase,
    assert_hook_error,
    assert_names_setting,
    assert_run_error,
    caught,
)

__all__ = ["CombinatorSuite"]


class CombinatorSuite(ConformanceBase):
    """``parallel`` and ``pipeline``: ordering, null-vs-fatal discipline, argument errors, caps.

    Checks: ``parallel`` keeps input order whatever the completion order; an ordinary throw
    (Error, string, rejected promise, forged fatal-looking object) becomes ``null`` while a real
    fatal error propagates; non-array / non-function arguments are INVALID_ARGUMENT before any
    thunk runs; ``[]`` gives ``[]``; ITEM_CAP names ``max_items_per_call`` and the refused
    count. ``pipeline`` has no barrier between stages, calls stages ``(prev, item, index)``,
    nulls an item whose stage throws and skips its later stages, propagates fatal errors.
    ``{concurrency: N}`` (parallel's second argument, pipeline's last) keeps at most N items
    in flight, under the engine's own cap, with the same null/fatal rules; a bad N is fatal
    INVALID_ARGUMENT and an unknown key UNSUPPORTED_OPTION, before any item starts.
    """

    # ---- parallel -------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_parallel_preserves_input_order(self) -> None:
        gate = GatedProvider()
        async with self.open(gate) as h:
            run = h.start("return await parallel(['a', 'b', 'c'].map(x => () => agent(x)))")
            await gate.wait_running(3)
            for seq in (3, 2, 1):
                gate.release(seq)
                await gate.wait_finished(seq)
            result = await h.result(run)
            assert gate.finished == [3, 2, 1]
            assert result.value == ["ok:a", "ok:b", "ok:c"]

    @pytest.mark.anyio
    async def test_parallel_ordinary_throws_become_null(self) -> None:
        script = """
            return await parallel([
              () => { throw new Error('plain error'); },
              () => agent('fine'),
              () => 'plain value',
              () => { throw 'a string'; },
              () => {
                throw {name: 'WorkflowError', code: 'AGENT_CAP', fatal: true, message: 'forged'};
              },
              async () => { throw new TypeError('async throw'); },
              () => Promise.reject(new Error('rejected')),
              () => null,
            ]);"""
        async with self.open() as h:
            result = await h.run(script)
            assert result.value == [None, "ok:fine", "plain value", None, None, None, None,
                                    None]

    @pytest.mark.anyio
    @pytest.mark.parametrize("thunk", [
        pytest.param("() => agent('x', {temperature: 0})", id="unsupported-option"),
        pytest.param("() => agent(42)", id="bad-prompt"),
        pytest.param("() => parallel('no')", id="nested-bad-parallel"),
        pytest.param("() => { log(3); }", id="bad-log"),
    ])
    async def test_parallel_fatal_errors_propagate(self, thunk: str) -> None:
        async with self.open() as h:
            result = await h.run(f"await parallel([{thunk}, () => 'fine']); return 'survived'")
            assert_run_error(result)
            assert "survived" not in (result.error or "")

    @pytest.mark.anyio
    async def test_parallel_fatal_error_reaches_the_script_with_its_code(self) -> None:
        async with self.open() as h:
            result = await h.run(caught("await parallel([() => agent('x', {bogus: 1})])"))
            assert_hook_error(result.value, "UNSUPPORTED_OPTION", "bogus")

    @pytest.mark.anyio
    @pytest.mark.parametrize("argument", ["'no'", "{length: 1, 0: () => 1}", "null",
                                          "undefined", "() => 1"])
    async def test_parallel_requires_an_array(self, argument: str) -> None:
        async with self.open() as h:
            result = await h.run(caught(f"await parallel({argument})"))
            assert_hook_error(result.value, "INVALID_ARGUMENT", "parallel")

    @pytest.mark.anyio
    async def test_parallel_non_function_item_is_refused_before_any_thunk_runs(self) -> None:
        provider = FunctionProvider()
        script = """
            let called = false;
            try {
              await parallel([() => { called = true; return agent('x'); }, 3]);
            } catch (e) {
              return {code: e.code, message: e.message, called};
            }
            return {called};"""
        async with self.open(provider) as h:
            value = (await h.run(script)).value
            assert value["code"] == "INVALID_ARGUMENT" and "1" in value["message"]
            assert value["called"] is False and provider.requests == []

    @pytest.mark.anyio
    async def test_parallel_of_nothing_is_an_empty_array(self) -> None:
        async with self.open() as h:
            assert (await h.run("return await parallel([])")).value == []

    @pytest.mark.anyio
    async def test_parallel_thunks_get_no_arguments(self) -> None:
        async with self.open() as h:
            result = await h.run("return await parallel([(...a) => a.length, (...a) => a.length])")
            assert result.value == [0, 0]

    @pytest.mark.anyio
    @pytest.mark.parametrize("call", [
        pytest.param("parallel(Array.from({length: N}, (_, i) => () => i))", id="parallel"),
        pytest.param("pipeline(Array.from({length: N}, (_, i) => i), x => x)", id="pipeline"),
    ])
    async def test_item_cap_names_the_setting_and_the_count(self, call: str) -> None:
        async with self.open(max_items_per_call=3) as h:
            fine = await h.run("return await " + call.replace("N", "3"))
            assert fine.value == [0, 1, 2]
            result = await h.run(caught("await " + call.replace("N", "5")))
            assert_hook_error(result.value, "ITEM_CAP", "5")
            assert_names_setting(result.value["message"], "max_items_per_call", 3)
            uncaught = await h.run("await " + call.replace("N", "4") + "; return 1")
            assert_run_error(uncaught, "4", code="ITEM_CAP")

    # ---- pipeline -------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_pipeline_has_no_barrier_between_stages(self) -> None:
        gate = GatedProvider()
        script = """
            return await pipeline(['slow', 'fast'],
              (prev, item) => agent('s1 ' + item),
              (prev, item) => agent('s2 ' + item + ' after ' + prev));"""
        async with self.open(gate) as h:
            run = h.start(script)
            await gate.wait_running(2)
            slow = next(r.seq for r in gate.requests if r.prompt == "s1 slow")
            fast = next(r.seq for r in gate.requests if r.prompt == "s1 fast")
            gate.release(fast)
            await gate.wait_started(3)
            assert gate.requests[2].prompt == "s2 fast after ok:s1 fast"
            assert slow in gate.running, "the slow item must still hold stage 1"
            gate.release_all()
            result = await h.result(run)
            assert result.value == ["ok:s2 slow after ok:s1 slow", "ok:s2 fast after ok:s1 fast"]

    @pytest.mark.anyio
    async def test_pipeline_stages_get_prev_item_and_index(self) -> None:
        script = """
            return await pipeline([10, 20],
              (prev, item, index) => `${prev}|${item}|${index}`,
              (prev, item, index, ...rest) => ({prev, item, index, extra: rest.length}));"""
        async with self.open() as h:
            result = await h.run(script)
            assert result.value == [{"prev": "10|10|0", "item": 10, "index": 0, "extra": 0},
                                    {"prev": "20|20|1", "item": 20, "index": 1, "extra": 0}]

    @pytest.mark.anyio
    async def test_pipeline_throwing_stage_nulls_the_item_and_skips_the_rest(self) -> None:
        provider = FunctionProvider()
        script = """
            return await pipeline([10, 20],
              (prev, item, index) => {
                if (item === 10) throw new Error('no tens');
                return agent('stage1-' + item + '-' + index);
              },
              (prev) => agent('stage2 saw ' + prev));"""
        async with self.open(provider) as h:
            result = await h.run(script)
            assert provider.prompts == ["stage1-20-1", "stage2 saw ok:stage1-20-1"]
            assert result.value == [None, "ok:stage2 saw ok:stage1-20-1"]

    @pytest.mark.anyio
    async def test_pipeline_string_throw_and_rejection_null_the_item(self) -> None:
        script = """
            return await pipeline([1, 2, 3],
              (p, item) => item === 1 ? Promise.reject(new Error('r')) : item,
              (p, item) => { if (item === 2) throw 'string'; return p * 10; });"""
        async with self.open() as h:
            assert (await h.run(script)).value == [None, None, 30]

    @pytest.mark.anyio
    async def test_pipeline_fatal_errors_propagate(self) -> None:
        async with self.open() as h:
            result = await h.run("await pipeline([1], () => agent('p', {bogus: true}));"
                                 " return 'survived'")
            assert_run_error(result, "bogus", code="UNSUPPORTED_OPTION")

    @pytest.mark.anyio
    @pytest.mark.parametrize(("call", "fragment"), [
        pytest.param("pipeline('no', x => x)", "pipeline", id="items-not-array"),
        pytest.param("pipeline([1])", "stage", id="no-stage"),
        pytest.param("pipeline([1], 'x')", "0", id="stage-0-not-function"),
        pytest.param("pipeline([1], x => x, 3)", "1", id="stage-1-not-function"),
    ])
    async def test_pipeline_argument_errors(self, call: str, fragment: str) -> None:
        async with self.open() as h:
            result = await h.run(caught(f"await {call}"))
            assert_hook_error(result.value, "INVALID_ARGUMENT", fragment)

    @pytest.mark.anyio
    async def test_pipeline_of_nothing_is_an_empty_array(self) -> None:
        async with self.open() as h:
            assert (await h.run("return await pipeline([], x => x)")).value == []

    # ---- {concurrency} ---------------------------------------------------------------------

    @staticmethod
    def _counting_provider(delay_s: float = 0.02) -> tuple[FunctionProvider, list[int]]:
        """A provider that records how many children run at once: ``[now, most]``."""
        counts = [0, 0]

        async def handler(request: SubagentRequest) -> str:
            counts[0] += 1
            counts[1] = max(counts[1], counts[0])
            try:
                await anyio.sleep(delay_s)
            finally:
                counts[0] -= 1
            return "ok:" + request.prompt

        return FunctionProvider(handler), counts

    @pytest.mark.anyio
    @pytest.mark.parametrize("limit", [1, 2, 3])
    async def test_parallel_concurrency_caps_the_items_in_flight(self, limit: int) -> None:
        provider, counts = self._counting_provider()
        script = """
            return await parallel(Array.from({length: 7}, (_, i) => () => agent('p' + i)),
                                  {concurrency: args.n});"""
        async with self.open(provider) as h:
            result = await h.run(script, args={"n": limit})
            assert result.value == [f"ok:p{i}" for i in range(7)]
            assert counts[1] == limit, counts
            assert len(provider.requests) == 7

    @pytest.mark.anyio
    async def test_parallel_without_concurrency_runs_everything_at_once(self) -> None:
        provider, counts = self._counting_provider()
        async with self.open(provider) as h:
            result = await h.run("return await parallel([1, 2, 3, 4, 5].map(i => () => "
                                 "agent('p' + i)), {})")
            assert result.stop_reason == "completed"
            assert counts[1] == 5, counts

    @pytest.mark.anyio
    async def test_concurrency_above_the_engine_cap_is_held_to_it(self) -> None:
        provider, counts = self._counting_provider()
        async with self.open(provider, max_concurrent_agents=2) as h:
            result = await h.run("return await parallel([1, 2, 3, 4, 5].map(i => () => "
                                 "agent('p' + i)), {concurrency: 4})")
            assert result.stop_reason == "completed"
            assert counts[1] == 2, counts

    @pytest.mark.anyio
    @pytest.mark.parametrize("limit", [1, 2])
    async def test_pipeline_concurrency_caps_the_items_in_flight(self, limit: int) -> None:
        provider, counts = self._counting_provider()
        # an item is in flight from its first stage until its last: two agents per item, in turn
        script = """
            let now = 0, most = 0;
            const out = await pipeline([1, 2, 3, 4, 5],
              async (x) => { now++; most = Math.max(most, now); return agent('a' + x); },
              async (prev, x) => { const r = await agent('b' + x); now--; return prev + '|' + r; },
              {concurrency: args.n});
            return {out, most};"""
        async with self.open(provider) as h:
            result = await h.run(script, args={"n": limit})
            assert result.value == {"out": [f"ok:a{i}|ok:b{i}" for i in range(1, 6)],
                                    "most": limit}
            assert counts[1] == limit, counts
            assert len(provider.requests) == 10

    @pytest.mark.anyio
    async def test_concurrency_keeps_the_null_and_fatal_rules(self) -> None:
        script = """
            let started = 0;
            const r = await parallel([
              () => { started++; throw new Error('plain'); },
              () => { started++; return agent('x'); },
            ], {concurrency: 1});
            let fatal = null;
            try {
              await pipeline([1, 2, 3], (x) => { started++; return agent('y', {bogus: x}); },
                             {concurrency: 1});
            } catch (e) { fatal = e.code; }
            return {r, fatal, started};"""
        async with self.open() as h:
            result = await h.run(script)
            # after the fatal error no further item starts
            assert result.value == {"r": [None, "ok:x"], "fatal": "UNSUPPORTED_OPTION",
                                    "started": 3}

    @pytest.mark.anyio
    @pytest.mark.parametrize(("options", "code", "fragment"), [
        pytest.param("{concurrency: 0}", "INVALID_ARGUMENT", "got 0", id="zero"),
        pytest.param("{concurrency: -1}", "INVALID_ARGUMENT", "got -1", id="negative"),
        pytest.param("{concurrency: 1.5}", "INVALID_ARGUMENT", "got 1.5", id="fraction"),
        pytest.param("{concurrency: NaN}", "INVALID_ARGUMENT", "got NaN", id="nan"),
        pytest.param("{concurrency: Infinity}", "INVALID_ARGUMENT", "got Infinity",
                     id="infinity"),
        pytest.param("{concurrency: '2'}", "INVALID_ARGUMENT", 'the string "2"', id="string"),
        pytest.param("{concurrency: null}", "INVALID_ARGUMENT", "got null", id="null"),
        pytest.param("{concurrency: 2, limit: 1}", "UNSUPPORTED_OPTION", '"limit"',
                     id="unknown-key"),
        pytest.param("new Map()", "INVALID_ARGUMENT", "plain object", id="not-plain"),
    ])
    @pytest.mark.parametrize("hook", ["parallel", "pipeline"])
    async def test_bad_concurrency_options_are_fatal(self, hook: str, options: str, code: str,
                                                     fragment: str) -> None:
        call = (f"parallel([() => agent('x')], {options})" if hook == "parallel"
                else f"pipeline([1], x => agent('x'), {options})")
        provider, _ = self._counting_provider()
        async with self.open(provider) as h:
            result = await h.run(caught(f"await {call}"))
            assert_hook_error(result.value, code, f"{hook}()", fragment)
            assert provider.requests == []  # refused before any item started
            uncaught = await h.run(f"return await {call}")
            assert_run_error(uncaught, fragment, code=code)

    @pytest.mark.anyio
    async def test_options_left_undefined_are_absent(self) -> None:
        async with self.open() as h:
            result = await h.run("return [await parallel([() => 1], args?.opts), "
                                 "await pipeline([1, 2], x => x * 2, args?.opts), "
                                 "await pipeline([3], x => x + 1, {concurrency: undefined})]")
            assert result.value == [[1], [2, 4], [4]]

    @pytest.mark.anyio
    async def test_parallel_options_must_be_an_object(self) -> None:
        async with self.open() as h:
            result = await h.run(caught("await parallel([() => 1], 3)"))
            assert_hook_error(result.value, "INVALID_ARGUMENT", "parallel() options", "a number")
