"""Claude Code's ``agent()`` options, agent definitions, model aliases, misuse positions (§16)."""

from __future__ import annotations

import json
import re

import pytest

from .._agents import AgentRegistry
from .._subagent import AgentDefinition
from ._doubles import FunctionProvider
from ._suite_base import ConformanceBase, assert_hook_error, assert_run_error, caught

__all__ = ["CompatSuite"]

REVIEWER = AgentDefinition(name="code-reviewer", description="Reviews diffs",
                           system_prompt="You review code for bugs.", model="sonnet",
                           tools=("Read", "Grep"))
PLANNER = AgentDefinition(name="planner", description="Plans work",
                          system_prompt="You plan.")


def _registry() -> AgentRegistry:
    return AgentRegistry.from_definitions([REVIEWER, PLANNER])


def _mentions_position(message: str, line: int, column: int | None) -> bool:
    """``message`` names ``line`` and ``column`` (None: any column on that line)."""
    wanted = r"\d+" if column is None else str(column)
    return bool(re.search(rf"line\s*{line}\D{{1,12}}col(umn)?\s*{wanted}\b", message))


class CompatSuite(ConformanceBase):
    """Claude Code compatibility of ``agent()``.

    Checks: ``effort``, ``agentType`` and ``isolation`` reach the provider on the request
    (None when absent or null); bad values are fatal ``INVALID_ARGUMENT`` naming the allowed
    values and never reach the provider; without a registry an agent type passes through with
    no definition; with one (``agents=``) the definition travels on the request, its model
    applies only when the call names none, and an unknown type is fatal ``INVALID_ARGUMENT``
    listing the known types; ``model_aliases`` map a call's and a definition's model; a
    misused hook names the script line and column of the offending call, whether the runtime
    or the host refuses it.
    """

    @pytest.mark.anyio
    async def test_compat_options_reach_the_provider(self) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            result = await h.run(
                "return await agent('a', {effort: 'high', agentType: 'explorer', "
                "isolation: 'worktree', label: 'L'})")
            assert result.value == "ok:a", result
        [request] = provider.requests
        assert (request.effort, request.agent_type, request.isolation, request.agent) == \
            ("high", "explorer", "worktree", None)
        assert request.label == "L"

    @pytest.mark.anyio
    async def test_compat_meta_as_claude_code_writes_it_runs_with_warnings(self) -> None:
        """SPEC §26: an unknown meta key is kept and a string phase is its title, each named
        first in the result's warnings; no global is enumerable (no host value shows)."""
        meta = {"name": "n", "description": "d", "examples": ["e"], "phases": ["Review"]}
        async with self.open() as h:
            result = await h.run("phase('Review'); return Object.keys(globalThis)", meta=meta)
        assert result.stop_reason == "completed" and result.value == [], result
        assert result.warnings[:2] == (
            "meta.examples is not a recognized field: kept, not used",
            "meta.phases[0] is a string: taken as the phase's title"), result.warnings

    @pytest.mark.anyio
    @pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh", "max"])
    async def test_compat_every_effort_is_accepted(self, effort: str) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            result = await h.run(f"return await agent('a', {{effort: {json.dumps(effort)}}})")
            assert result.stop_reason == "completed", result
        assert [r.effort for r in provider.requests] == [effort]

    @pytest.mark.anyio
    async def test_compat_absent_or_null_options_are_none(self) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            result = await h.run("return [await agent('a'), await agent('b', "
                                 "{effort: null, agentType: undefined, isolation: null})]")
            assert result.stop_reason == "completed", result
        for request in provider.requests:
            assert (request.effort, request.agent_type, request.isolation, request.agent) == \
                (None, None, None, None)

    @pytest.mark.anyio
    @pytest.mark.parametrize(("option", "allowed"), [
        ("effort: 'extreme'", ['"low"', '"medium"', '"high"', '"max"']),
        ("effort: 3", ['"low"', '"max"']),
        ("isolation: 'container'", ['"worktree"']),
        ("isolation: true", ['"worktree"']),
        ("agentType: 42", ["string"]),
        ("agentType: ''", ["non-empty"]),
    ])
    async def test_compat_bad_values_are_fatal_naming_the_allowed_values(
            self, option: str, allowed: list[str]) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            result = await h.run(caught(f"await agent('x', {{{option}}})"))
            assert_hook_error(result.value, "INVALID_ARGUMENT", option.split(":")[0], *allowed)
            uncaught = await h.run(f"await agent('x', {{{option}}}); return 1")
            assert_run_error(uncaught, *allowed, code="INVALID_ARGUMENT")
        assert provider.requests == []

    @pytest.mark.anyio
    async def test_compat_registry_puts_the_definition_on_the_request(self) -> None:
        provider = FunctionProvider()
        async with self.open(provider, agents=_registry()) as h:
            result = await h.run(
                "return [await agent('a', {agentType: 'code-reviewer'}), "
                "await agent('b', {agentType: 'code-reviewer', model: 'opus'}), "
                "await agent('c', {agentType: 'planner'}), "
                "await agent('d', {agentType: 'general-purpose'}), await agent('e')]")
            assert result.value == ["ok:a", "ok:b", "ok:c", "ok:d", "ok:e"], result
        a, b, c, d, e = sorted(provider.requests, key=lambda r: r.seq)
        assert a.agent == REVIEWER and a.agent_type == "code-reviewer"
        assert a.agent.system_prompt == "You review code for bugs."
        assert a.model == "sonnet"  # the definition's model, the call named none
        assert b.model == "opus" and b.agent == REVIEWER  # the call's own model wins
        assert c.agent == PLANNER and c.model is None
        assert d.agent is not None and d.agent.name == "general-purpose"
        assert d.agent.system_prompt == ""
        assert e.agent is None and e.agent_type is None

    @pytest.mark.anyio
    async def test_compat_unknown_agent_type_is_fatal_listing_known_types(self) -> None:
        provider = FunctionProvider()
        async with self.open(provider, agents=_registry()) as h:
            result = await h.run(caught("await agent('x', {agentType: 'nobody'})"))
            assert_hook_error(result.value, "INVALID_ARGUMENT", "nobody", "code-reviewer",
                              "planner", "general-purpose")
            uncaught = await h.run("await agent('x', {agentType: 'nobody'}); return 1")
            assert_run_error(uncaught, "nobody", "code-reviewer", code="INVALID_ARGUMENT")
        assert provider.requests == []

    @pytest.mark.anyio
    async def test_compat_model_aliases_map_call_and_definition_models(self) -> None:
        provider = FunctionProvider()
        aliases = {"sonnet": "model-s", "haiku": "model-h"}
        async with self.open(provider, agents=_registry(), model_aliases=aliases) as h:
            result = await h.run(
                "return [await agent('a', {model: 'haiku'}), "
                "await agent('b', {agentType: 'code-reviewer'}), "
                "await agent('c', {model: 'exact-name'}), await agent('d')]")
            assert result.stop_reason == "completed", result
        models = [r.model for r in sorted(provider.requests, key=lambda r: r.seq)]
        assert models == ["model-h", "model-s", "exact-name", None]

    @pytest.mark.anyio
    @pytest.mark.parametrize(("statement", "code", "line", "column"), [
        # refused by the host, after the call returned to the runtime
        ("const a = 1;\n  await agent('x', {temperature: 0});", "UNSUPPORTED_OPTION", 2, 9),
        ("\n\nawait   agent('x', {effort: 'extreme'});", "INVALID_ARGUMENT", 3, 9),
        ("await agent('x', {schema: {type: 'string'}});", "UNSUPPORTED_SCHEMA", 1, 7),
        ("const f = () => subagent('x', {isolation: 'none'});\nawait f();",
         "INVALID_ARGUMENT", 1, 17),
        ("await parallel([1].map(() => () => agent('x', {effort: 'x'})));",
         "INVALID_ARGUMENT", 1, 36),
        # the call spans lines: its position is where it starts, not where its arguments end
        ("const s = {type: 'string'};\nawait agent(\n  'x',\n  {label: 'a', schema: s},\n);",
         "UNSUPPORTED_SCHEMA", 2, 7),
        ("const t = 0;\nconst r = await subagent('x', {model: 'm', temperature: t});",
         "UNSUPPORTED_OPTION", 2, 17),
        (("const n = 'x';\nawait Promise.all([1].map((i) =>\n  agent(`p ${i}`, {\n"
          "    label: n, effort: n })));"), "INVALID_ARGUMENT", 3, 3),
        ("const s = {type: 'string'};\nawait agent('smile :) (or not',\n  {schema: s});",
         "UNSUPPORTED_SCHEMA", 2, 7),
        ("await Reflect.apply(agent, null, ['x', {effort: 'x'}]);", "INVALID_ARGUMENT", 1, None),
        # refused by the runtime, before anything reached the host
        ("\n  await agent(42);", "INVALID_ARGUMENT", 2, 9),
        ("await agent('x', 'opts');", "INVALID_ARGUMENT", 1, 7),
        ("const n = 3;\nawait parallel('no');", "INVALID_ARGUMENT", 2, 7),
        ("await pipeline([1], 5);", "INVALID_ARGUMENT", 1, 7),
    ])
    async def test_compat_hook_misuse_names_line_and_column(
            self, statement: str, code: str, line: int, column: int | None) -> None:
        async with self.open() as h:
            # uncaught, the run's error names it; caught, the script's error message does
            result = await h.run(statement + "\nreturn 1")
            error = assert_run_error(result, code=code)
            assert _mentions_position(error, line, column), (line, column, error)
            seen = await h.run(caught(statement))
            assert_hook_error(seen.value, code)
            # caught() wraps the statement in `try {` on its own line: one line further down
            assert _mentions_position(seen.value["message"], line + 1, column), seen.value

    @pytest.mark.anyio
    async def test_compat_unknown_agent_type_names_line_and_column(self) -> None:
        async with self.open(agents=_registry()) as h:
            result = await h.run("log('a');\n\n    await agent('x', {agentType: 'ghost'});")
            error = assert_run_error(result, "ghost", code="INVALID_ARGUMENT")
            assert _mentions_position(error, 3, 11), error

    @pytest.mark.anyio
    async def test_compat_item_cap_names_line_and_column(self) -> None:
        async with self.open(max_items_per_call=2) as h:
            result = await h.run("const xs = [1, 2, 3].map(() => () => 1);\nawait parallel(xs);")
            error = assert_run_error(result, code="ITEM_CAP")
            assert _mentions_position(error, 2, 7), error

    @pytest.mark.anyio
    async def test_compat_position_survives_a_script_without_stack_traces(self) -> None:
        async with self.open() as h:
            result = await h.run(
                "Error.stackTraceLimit = 0;\nconst before = Error.stackTraceLimit;\n"
                "await agent('fine', {label: 'a'});\n"
                "if (Error.stackTraceLimit !== before) return 'changed';\n"
                "await Reflect.apply(agent, null, ['x', {temperature: 1}]);")
            error = assert_run_error(result, code="UNSUPPORTED_OPTION")
            assert re.search(r"\(line 5, column \d+\)", error), error

    @pytest.mark.anyio
    async def test_compat_script_stack_limit_is_left_as_the_script_set_it(self) -> None:
        async with self.open() as h:
            result = await h.run(
                "Error.stackTraceLimit = 7;\nawait agent('a', {label: 'x'});\n"
                "try { await agent('b', {bogus: 1}); } catch (e) {}\n"
                "return Error.stackTraceLimit;")
            assert result.value == 7, result
