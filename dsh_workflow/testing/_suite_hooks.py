"""``agent()``/``subagent()`` and the narration hooks (docs/providers.md and docs/scripts.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .._events import AgentEnded, AgentStarted, LogEmitted, PhaseStarted
from .._option_table import agent_option_names
from .._subagent import SubagentRequest, SubagentResult
from ._doubles import FailingProvider, FunctionProvider
from ._suite_base import ConformanceBase, assert_hook_error, assert_run_error, caught

__all__ = ["AgentSuite", "NarrationSuite"]

#: The agent() options an engine lists when it refuses an unknown one (the one table).
SUPPORTED_OPTIONS = agent_option_names()
FILES_SCHEMA = {"type": "object", "properties": {"files": {"type": "array",
                                                           "items": {"type": "string"}}},
                "required": ["files"]}


def _structured(value: Any) -> FunctionProvider:
    return FunctionProvider(lambda request: SubagentResult(structured=value))


class AgentSuite(ConformanceBase):
    """``agent()``: results, failures, option rules, labels and the request a provider sees.

    Checks: text and schema results; an invalid, missing or non-completed child result is
    ``null`` with outcome ``failed``; a raising provider is a fatal, catchable ``AGENT_FAILED``
    that kills the run through ``parallel``/``pipeline``; every option rule
    (``UNSUPPORTED_OPTION`` listing the supported options, ``INVALID_ARGUMENT``,
    ``UNSUPPORTED_SCHEMA`` listing every violation); ``undefined`` options dropped; the default
    and explicit label and phase; model/provider/parent/run_id/seq reaching the provider; the
    per-run provider route; each failed child's reason and ``failure: "throw"``.
    """

    @pytest.mark.anyio
    async def test_agent_resolves_to_the_child_text(self) -> None:
        provider = FunctionProvider(lambda request: f"answer to {request.prompt}")
        async with self.open(provider) as h:
            run = h.start("return await agent('the question')")
            result = await h.result(run)
            assert (result.stop_reason, result.value, result.agents_started) == \
                ("completed", "answer to the question", 1)
            ends = h.events_of(run, AgentEnded)
            assert [(e.seq, e.outcome) for e in ends] == [(1, "completed")]

    @pytest.mark.anyio
    async def test_agent_subagent_is_an_alias(self) -> None:
        async with self.open() as h:
            result = await h.run("return [await subagent('a'), await agent('b')]")
            assert result.value == ["ok:a", "ok:b"] and result.agents_started == 2

    @pytest.mark.anyio
    async def test_agent_schema_result_is_the_validated_object(self) -> None:
        provider = _structured({"files": ["x.ts", "y.ts"]})
        script = ("const r = await agent('list files', {schema: " + json.dumps(FILES_SCHEMA)
                  + "});\nreturn {first: r.files[0], count: r.files.length};")
        async with self.open(provider) as h:
            result = await h.run(script)
            assert result.value == {"first": "x.ts", "count": 2}
            assert provider.requests[0].schema == FILES_SCHEMA

    @pytest.mark.anyio
    async def test_agent_rich_schema_keywords_are_accepted(self) -> None:
        schema = {"type": "object", "$defs": {"N": {"type": "integer", "minimum": 0}},
                  "properties": {"s": {"type": ["string", "null"], "pattern": "^a"},
                                 "e": {"enum": [1, 2]}, "n": {"$ref": "#/$defs/N"},
                                 "u": {"anyOf": [{"type": "string"}, {"type": "number"}]}},
                  "required": ["s", "n"]}
        value = {"s": "abc", "e": 2, "n": 4, "u": 1.5}
        async with self.open(_structured(value)) as h:
            result = await h.run(f"return await agent('x', {{schema: {json.dumps(schema)}}})")
            assert result.value == value

    @pytest.mark.anyio
    @pytest.mark.parametrize("value", [
        pytest.param({"files": "not a list"}, id="wrong-type"),
        pytest.param({}, id="missing-required"),
        pytest.param({"files": [1, 2]}, id="wrong-item-type"),
        pytest.param(None, id="missing"),
        pytest.param(["files"], id="not-an-object"),
    ])
    async def test_agent_invalid_structured_value_is_null_and_failed(self, value: Any) -> None:
        async with self.open(_structured(value)) as h:
            run = h.start(f"return {{r: await agent('x', {{schema: {json.dumps(FILES_SCHEMA)}}}),"
                          " after: 'continued'}")
            result = await h.result(run)
            assert result.value == {"r": None, "after": "continued"}
            assert [e.outcome for e in h.events_of(run, AgentEnded)] == ["failed"]

    @pytest.mark.anyio
    async def test_agent_schema_keywords_are_enforced(self) -> None:
        schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3},
                                                   "id": {"type": "string", "pattern": "^x-"}},
                  "required": ["n", "id"]}
        replies = iter([{"n": 2, "id": "x-1"}, {"n": 3, "id": "y-1"}, {"n": 3, "id": "x-1"}])
        provider = FunctionProvider(lambda request: SubagentResult(structured=next(replies)))
        script = (f"const s = {json.dumps(schema)};\n"
                  "return [await agent('a', {schema: s}), await agent('b', {schema: s}),"
                  " await agent('c', {schema: s})]")
        async with self.open(provider) as h:
            result = await h.run(script)
            assert result.value == [None, None, {"n": 3, "id": "x-1"}]

    @pytest.mark.anyio
    @pytest.mark.parametrize("stop_reason", ["error", "max_tokens", "refusal", "aborted"])
    async def test_agent_non_completed_child_is_null_and_failed(self, stop_reason: str) -> None:
        def handler(request: SubagentRequest) -> SubagentResult | str:
            if request.prompt == "bad":
                return SubagentResult(stop_reason=stop_reason, text="partial", error="it broke")
            return "fine"

        async with self.open(FunctionProvider(handler)) as h:
            run = h.start("return await parallel([() => agent('bad'), () => agent('good')])")
            result = await h.result(run)
            assert result.value == [None, "fine"]
            outcomes = {e.seq: e.outcome for e in h.events_of(run, AgentEnded)}
            assert outcomes == {1: "failed", 2: "completed"}

    @pytest.mark.anyio
    async def test_agent_provider_raising_is_a_fatal_catchable_agent_failed(self) -> None:
        async with self.open(FailingProvider()) as h:
            run = h.start(caught("await agent('x')"))
            result = await h.result(run)
            assert result.stop_reason == "completed"
            assert_hook_error(result.value, "AGENT_FAILED", "provider exploded")
            assert [e.outcome for e in h.events_of(run, AgentEnded)] == ["failed"]
            assert result.agents_started == 1

    @pytest.mark.anyio
    @pytest.mark.parametrize("script", [
        pytest.param("await parallel([() => agent('x'), () => 'fine']); return 'survived'",
                     id="parallel"),
        pytest.param("await pipeline([1, 2], (p) => agent('item ' + p)); return 'survived'",
                     id="pipeline"),
        pytest.param("await agent('x'); return 'survived'", id="direct"),
    ])
    async def test_agent_provider_raising_kills_the_run(self, script: str) -> None:
        async with self.open(FailingProvider()) as h:
            run = h.start(script)
            result = await h.result(run)
            assert_run_error(result, "provider exploded", code="AGENT_FAILED")
            assert {e.outcome for e in h.events_of(run, AgentEnded)} == {"failed"}

    @pytest.mark.anyio
    @pytest.mark.parametrize("option", ["temperature: 0", "maxTurns: 3", "agent_type: 'coder'",
                                        "bogus: true", "Label: 'x'"])
    async def test_agent_unsupported_option_lists_supported_options(self, option: str) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            result = await h.run(caught(f"await agent('x', {{label: 'ok', {option}}})"))
            key = option.split(":")[0]
            assert_hook_error(result.value, "UNSUPPORTED_OPTION", key, *SUPPORTED_OPTIONS)
            assert provider.requests == []

    @pytest.mark.anyio
    async def test_agent_unsupported_option_uncaught_fails_the_run(self) -> None:
        async with self.open() as h:
            result = await h.run("await agent('x', {temperature: 0}); return 1")
            assert_run_error(result, "temperature", code="UNSUPPORTED_OPTION")

    @pytest.mark.anyio
    @pytest.mark.parametrize("option", ["label: 3", "phase: true", "model: {}",
                                        "provider: ['openai']"])
    async def test_agent_string_options_must_be_strings(self, option: str) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            result = await h.run(caught(f"await agent('x', {{{option}}})"))
            assert_hook_error(result.value, "INVALID_ARGUMENT", option.split(":")[0])
            assert provider.requests == []

    @pytest.mark.anyio
    @pytest.mark.parametrize("options", ["'opts'", "[1]", "42", "null", "() => 1", "true"])
    async def test_agent_options_must_be_an_object(self, options: str) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            result = await h.run(caught(f"await agent('x', {options})"))
            assert_hook_error(result.value, "INVALID_ARGUMENT", "object")
            assert provider.requests == []

    @pytest.mark.anyio
    async def test_agent_option_getter_that_throws_is_invalid_argument(self) -> None:
        script = caught("await agent('x', {get label() { throw new Error('read failed') }})")
        async with self.open() as h:
            assert_hook_error((await h.run(script)).value, "INVALID_ARGUMENT", "read failed")

    @pytest.mark.anyio
    @pytest.mark.parametrize("prompt", ["42", "''", "undefined", "null", "{text: 'x'}"])
    async def test_agent_prompt_must_be_a_non_empty_string(self, prompt: str) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            result = await h.run(caught(f"await agent({prompt})"))
            assert_hook_error(result.value, "INVALID_ARGUMENT", "prompt")
            assert provider.requests == []

    @pytest.mark.anyio
    @pytest.mark.parametrize(("schema", "fragments"), [
        pytest.param({"type": "object", "properties": {"a": {"type": "nope"}}}, ["nope"],
                     id="bad-type-keyword"),
        pytest.param({"type": "array", "items": {"type": "string"}}, ["object"],
                     id="array-rooted"),
        pytest.param({"properties": {"a": {"type": "string"}}}, ["object"], id="no-root-type"),
        pytest.param("string", ["object"], id="not-a-schema-object"),
        pytest.param({"type": "object", "properties": {"a": {"$ref": "https://example.com/s"}}},
                     ["$ref"], id="remote-ref"),
        pytest.param({"type": "object", "required": 3}, ["required"], id="bad-required"),
    ])
    async def test_agent_bad_schema_is_unsupported_schema(self, schema: Any,
                                                          fragments: list[str]) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            result = await h.run(caught(f"await agent('x', {{schema: {json.dumps(schema)}}})"))
            assert_hook_error(result.value, "UNSUPPORTED_SCHEMA", *fragments)
            assert provider.requests == []

    @pytest.mark.anyio
    async def test_agent_schema_error_lists_every_violation(self) -> None:
        schema = {"type": "object", "properties": {"a": {"type": "nope"},
                                                   "b": {"minimum": "three"}}}
        async with self.open() as h:
            result = await h.run(caught(f"await agent('x', {{schema: {json.dumps(schema)}}})"))
            assert_hook_error(result.value, "UNSUPPORTED_SCHEMA", "properties.a", "properties.b")

    @pytest.mark.anyio
    async def test_agent_undefined_options_are_dropped(self) -> None:
        provider = FunctionProvider()
        script = ("const r = await agent('x', {model: undefined, provider: args.p, label: 'L',"
                  " phase: undefined, schema: undefined});\nreturn r")
        async with self.open(provider) as h:
            result = await h.run(script, args={})
            assert result.value == "ok:x"
            request = provider.requests[0]
            assert (request.model, request.provider, request.label, request.schema) == \
                (None, None, "L", None)

    @pytest.mark.anyio
    async def test_agent_default_label_is_the_first_line(self) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            run = h.start("await agent('first line\\nsecond line'); return 1")
            await h.result(run)
            assert provider.requests[0].label == "first line"
            assert [e.label for e in h.events_of(run, AgentStarted)] == ["first line"]

    @pytest.mark.anyio
    @pytest.mark.parametrize(("length", "expected_length"), [(48, 48), (49, 48), (200, 48),
                                                             (10, 10)])
    async def test_agent_default_label_is_cut_to_48_characters(self, length: int,
                                                               expected_length: int) -> None:
        prompt = "".join(chr(ord("a") + i % 26) for i in range(length))
        provider = FunctionProvider()
        async with self.open(provider) as h:
            await h.run(f"await agent({json.dumps(prompt + chr(10) + 'more')}); return 1")
            label = provider.requests[0].label
            assert len(label) == expected_length
            if length > 48:
                assert label == prompt[:47] + "…"
            else:
                assert label == prompt

    @pytest.mark.anyio
    async def test_agent_explicit_label_and_phase_win_over_the_current_phase(self) -> None:
        provider = FunctionProvider()
        script = """
            await agent('before any phase');
            phase('Find');
            await agent('in find');
            await agent('p', {label: 'named', phase: 'Custom'});
            await agent('q', {label: 'only label'});
            phase('Next');
            await agent('in next');
            return 1"""
        async with self.open(provider) as h:
            run = h.start(script)
            await h.result(run)
            expected = [("before any phase", None), ("in find", "Find"), ("named", "Custom"),
                        ("only label", "Find"), ("in next", "Next")]
            assert [(r.label, r.phase) for r in provider.requests] == expected
            assert [(e.label, e.phase) for e in h.events_of(run, AgentStarted)] == expected

    @pytest.mark.anyio
    async def test_agent_request_carries_model_provider_parent_run_id_and_seq(self) -> None:
        parent = object()
        provider = FunctionProvider()
        script = """
            await agent('a', {model: 'model-1', provider: 'openai'});
            await agent('b', {provider: 'local'});
            await parallel([() => agent('c'), () => agent('d')]);
            return 1"""
        async with self.open(provider) as h:
            run = h.start(script, parent=parent)
            await h.result(run)
            requests = provider.requests
            assert [(r.prompt, r.model, r.provider) for r in requests[:2]] == \
                [("a", "model-1", "openai"), ("b", None, "local")]
            assert all(r.parent is parent for r in requests)
            assert all(r.run_id == run.id for r in requests)
            assert sorted(r.seq for r in requests) == [1, 2, 3, 4]
            assert {r.prompt: r.seq for r in requests} == {"a": 1, "b": 2, "c": 3, "d": 4}
            assert {r.seq for r in requests} == {e.seq for e in h.events_of(run, AgentStarted)}

    @pytest.mark.anyio
    async def test_agent_per_run_provider_routes_every_child(self) -> None:
        default = FunctionProvider(lambda request: "default")
        routed = FunctionProvider(lambda request: "routed")
        async with self.open(default) as h:
            first = await h.run("return [await agent('a'), await agent('b')]", provider=routed)
            second = await h.run("return await agent('c')")
            assert first.value == ["routed", "routed"] and second.value == "default"
            assert routed.prompts == ["a", "b"] and default.prompts == ["c"]

    @pytest.mark.anyio
    async def test_agent_failures_carry_their_reasons(self) -> None:
        """docs/scripts.md, "Truthful outcomes": every child that did not complete says why
        (``AgentEnded.error``), the result counts them, and ``failure: "throw"`` rejects with a
        catchable, non-fatal ``AgentFailure`` error."""
        def handler(request: SubagentRequest) -> SubagentResult | str:
            if request.prompt == "broken":
                return SubagentResult(stop_reason="error", error="the endpoint said no")
            if request.prompt == "bad":
                return SubagentResult(structured={"files": [1]})
            return "fine"

        script = ("const s = {schema: " + json.dumps(FILES_SCHEMA) + "};\n"
                  "let thrown = null;\n"
                  "try { await agent('broken', {failure: 'throw'}); }\n"
                  "catch (e) { thrown = [e.name, e.kind, e.message, e.fatal === true]; }\n"
                  "return [await agent('broken'), await agent('bad', s), await agent('ok'), "
                  "thrown];")
        async with self.open(FunctionProvider(handler)) as h:
            run = h.start(script)
            result = await h.result(run)
            assert result.value == [None, None, "fine",
                                    ["AgentFailure", "provider", "the endpoint said no", False]]
            assert result.agents_failed == 3
            ends = {e.seq: e for e in h.events_of(run, AgentEnded)}
            assert all((e.error is None) == (e.outcome == "completed") for e in ends.values())
            assert [(ends[i].error.kind, ends[i].error.message)  # type: ignore[union-attr]
                    for i in (1, 2)] == [("provider", "the endpoint said no")] * 2
            invalid = ends[3].error
            assert invalid is not None and invalid.kind == "invalid"
            assert invalid.details == ("/files/0: 1 is not of type 'string'",)


class NarrationSuite(ConformanceBase):
    """``phase()``, ``log()`` and ``console.*``: events in order, argument errors.

    Checks: PhaseStarted/LogEmitted in call order interleaved correctly with agent events;
    ``console.log/info/warn/error`` narrate through LogEmitted; ``log`` takes only strings (the
    empty string included); ``phase`` takes only non-empty strings; misuse throws a fatal
    INVALID_ARGUMENT that fails the run unless caught.
    """

    @pytest.mark.anyio
    async def test_narration_events_in_call_order(self) -> None:
        script = """
            phase('One');
            log('first');
            console.log('c', 1, {k: [1]});
            console.info('i');
            console.warn('w');
            console.error('e');
            phase('Two');
            log('');
            return 1"""
        async with self.open() as h:
            run = h.start(script)
            assert (await h.result(run)).value == 1
            seen: list[tuple[str, str]] = []
            for e in h.events_of(run, PhaseStarted, LogEmitted):
                if isinstance(e, PhaseStarted):
                    seen.append(("phase", e.title))
                elif isinstance(e, LogEmitted):
                    seen.append(("log", e.message))
            assert [kind for kind, _ in seen] == ["phase", "log", "log", "log", "log", "log",
                                                  "phase", "log"]
            assert seen[0] == ("phase", "One") and seen[1] == ("log", "first")
            assert seen[2][1].startswith("c 1") and '"k"' in seen[2][1]
            assert [text for _, text in seen[3:]] == ["i", "w", "e", "Two", ""]

    @pytest.mark.anyio
    async def test_narration_interleaves_with_agent_events(self) -> None:
        async with self.open() as h:
            run = h.start("phase('A'); await agent('x'); log('after'); return 1")
            await h.result(run)
            kinds = [type(e).__name__ for e in h.events_of(run)]
            assert kinds == ["WorkflowStarted", "PhaseStarted", "AgentStarted", "AgentEnded",
                             "LogEmitted", "WorkflowEnded"]

    @pytest.mark.anyio
    @pytest.mark.parametrize("message", ["3", "null", "{text: 'x'}", "undefined"])
    async def test_narration_log_requires_a_string(self, message: str) -> None:
        async with self.open() as h:
            run = h.start(caught(f"log({message})"))
            assert_hook_error((await h.result(run)).value, "INVALID_ARGUMENT", "log")
            assert h.events_of(run, LogEmitted) == []

    @pytest.mark.anyio
    @pytest.mark.parametrize("title", ["''", "3", "undefined"])
    async def test_narration_phase_requires_a_non_empty_title(self, title: str) -> None:
        async with self.open() as h:
            run = h.start(caught(f"phase({title})"))
            assert_hook_error((await h.result(run)).value, "INVALID_ARGUMENT", "phase")
            assert h.events_of(run, PhaseStarted) == []

    @pytest.mark.anyio
    async def test_narration_misuse_uncaught_fails_the_run(self) -> None:
        async with self.open() as h:
            assert_run_error(await h.run("log(3); return 1"), code="INVALID_ARGUMENT")
