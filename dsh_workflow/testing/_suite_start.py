"""Start-time validation (docs/embedding.md ``engine.start``)."""

from __future__ import annotations

import re
import time

import pytest

from .._errors import WorkflowError, WorkflowErrorCode
from .._events import WorkflowEvent
from ._doubles import FunctionProvider
from ._suite_base import META, ConformanceBase, raw_request

__all__ = ["StartSuite"]


def _mentions_position(message: str, line: int, column: int) -> bool:
    return bool(re.search(rf"line\s*{line}\D{{1,12}}col(umn)?\s*{column}\b", message)
                or re.search(rf"\b{line}:{column}\b", message))


class StartSuite(ConformanceBase):
    """``start()`` refuses a bad request synchronously, before any run or event exists.

    Checks: META_INVALID listing every violation; SCRIPT_PARSE with the script's own line and
    column; a leftover ``export const meta`` refused with a message that meta is a parameter;
    bodies that break out of the function wrapper refused *and never run*; INVALID_ARGUMENT for
    bad per-run caps, providers and args; RuntimeError outside the engine's ``async with``; and
    that the engine still runs a good script after every refusal.
    """

    @staticmethod
    def _refused(engine_call: object, code: WorkflowErrorCode) -> WorkflowError:
        assert isinstance(engine_call, WorkflowError), \
            f"expected WorkflowError, got {engine_call!r}"
        assert engine_call.code == code, f"expected {code}, got {engine_call.code}: {engine_call}"
        assert engine_call.fatal is True
        return engine_call

    @pytest.mark.anyio
    async def test_start_invalid_meta_lists_every_violation(self) -> None:
        async with self.open() as h:
            with pytest.raises(WorkflowError) as info:
                h.start("return 1", meta={"name": "", "phases": [3], "bogus": 1})
            error = self._refused(info.value, WorkflowErrorCode.META_INVALID)
            assert "bogus" not in str(error), "an unknown meta key is kept, not refused"
            for fragment in ("name", "description", "phases[0]"):
                assert fragment in str(error), f"{fragment!r} missing from {error}"
            assert h.events == [] and h.runs == []
            assert (await h.run("return 'still works'")).value == "still works"

    @pytest.mark.anyio
    @pytest.mark.parametrize("meta", [
        pytest.param("not an object", id="string"),
        pytest.param({"name": "x", "description": "y", "phases": [{"detail": "no title"}]},
                     id="phase-without-title"),
        pytest.param({"name": "x", "description": ""}, id="empty-description"),
    ])
    async def test_start_invalid_meta_shapes(self, meta: object) -> None:
        async with self.open() as h:
            with pytest.raises(WorkflowError) as info:
                h.start("return 1", meta=meta)
            self._refused(info.value, WorkflowErrorCode.META_INVALID)
            assert h.events == []

    @pytest.mark.anyio
    async def test_start_meta_accepts_aliases_and_phases(self) -> None:
        meta = {"name": "aliased", "description": "d", "whenToUse": "when asked",
                "phases": [{"title": "Scan", "detail": "look around"}]}
        async with self.open() as h:
            run = h.start("return 1", meta=meta)
            assert run.meta.name == "aliased" and run.meta.when_to_use == "when asked"
            assert run.meta.phases is not None and run.meta.phases[0].title == "Scan"
            assert (await h.result(run)).value == 1

    @pytest.mark.anyio
    @pytest.mark.parametrize(("script", "line", "column"), [
        pytest.param("\n\nconst c = ;", 3, 11, id="line-3"),
        pytest.param("return 1 +;", 1, 11, id="line-1"),
        pytest.param("const a = 1;\nconst b = a +* 2;\nreturn b", 2, 14, id="line-2"),
    ])
    async def test_start_parse_error_names_script_line_and_column(
            self, script: str, line: int, column: int) -> None:
        async with self.open() as h:
            with pytest.raises(WorkflowError) as info:
                h.start(script)
            error = self._refused(info.value, WorkflowErrorCode.SCRIPT_PARSE)
            assert _mentions_position(str(error), line, column), \
                f"expected line {line}, column {column} of the script in {error}"
            assert h.events == []

    @pytest.mark.anyio
    @pytest.mark.parametrize("script", [
        pytest.param("return (((", id="unclosed"),
        pytest.param("import x from 'y';\nreturn 1", id="static-import"),
        pytest.param("return 1;\n}", id="extra-brace"),
    ])
    async def test_start_unparseable_bodies(self, script: str) -> None:
        async with self.open() as h:
            with pytest.raises(WorkflowError) as info:
                h.start(script)
            self._refused(info.value, WorkflowErrorCode.SCRIPT_PARSE)
            assert h.events == []

    @pytest.mark.anyio
    @pytest.mark.parametrize("script", [
        pytest.param("export const meta = {name: 'x', description: 'y'};\nreturn 1",
                     id="first-line"),
        pytest.param("\n  export const meta = {\n  name: 'x', description: 'y' }\nreturn 1",
                     id="indented"),
        pytest.param("// my workflow\nexport const meta = {name: 'x', description: 'y'};\n"
                     "return 1", id="after-comment"),
    ])
    async def test_start_leftover_export_meta_is_refused(self, script: str) -> None:
        async with self.open() as h:
            with pytest.raises(WorkflowError) as info:
                h.start(script)
            error = self._refused(info.value, WorkflowErrorCode.SCRIPT_PARSE)
            text = str(error)
            assert "meta" in text and "parameter" in text.lower(), \
                f"the message must say meta is passed as a parameter: {text}"
            assert h.events == []

    @pytest.mark.anyio
    @pytest.mark.parametrize("script", [
        pytest.param("}); globalThis.x = 1; (async function(){", id="set-global"),
        pytest.param("}); agent('escaped'); (async function(){", id="call-agent"),
        pytest.param("}); while (true) {} (async function(){", id="spin"),
        pytest.param("}, globalThis.x = 1, async function(){", id="comma"),
    ])
    async def test_start_wrapper_escape_is_refused_and_never_runs(self, script: str) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            began = time.monotonic()
            with pytest.raises(WorkflowError) as info:
                h.start(script)
            elapsed = time.monotonic() - began
            self._refused(info.value, WorkflowErrorCode.SCRIPT_PARSE)
            assert elapsed < 0.25, f"start() took {elapsed:.2f} s: the escaped body ran"
            assert h.events == [] and provider.requests == []
            probe = await h.run("return [typeof globalThis.x, typeof x]")
            assert probe.value == ["undefined", "undefined"], "the escaped body ran"
            assert provider.requests == []

    @pytest.mark.anyio
    @pytest.mark.parametrize("value", [
        pytest.param(0, id="zero"),
        pytest.param(-1, id="negative"),
        pytest.param(1.5, id="fraction"),
        pytest.param(True, id="bool"),
        pytest.param("3", id="string"),
        pytest.param(6, id="above-ceiling"),
    ])
    async def test_start_invalid_per_run_agent_cap(self, value: object) -> None:
        async with self.open(max_total_agents=5) as h:
            with pytest.raises(WorkflowError) as info:
                h.start_request(raw_request(max_total_agents=value))
            error = self._refused(info.value, WorkflowErrorCode.INVALID_ARGUMENT)
            assert "max_total_agents" in str(error)
            if value == 6:
                assert "5" in str(error), f"the message must name the ceiling: {error}"
            assert h.events == []

    @pytest.mark.anyio
    @pytest.mark.parametrize("provider", [
        pytest.param(object(), id="no-run"),
        pytest.param(type("RunIsData", (), {"run": 3})(), id="run-not-callable"),
    ])
    async def test_start_invalid_per_run_provider(self, provider: object) -> None:
        async with self.open() as h:
            with pytest.raises(WorkflowError) as info:
                h.start_request(raw_request(provider=provider))
            error = self._refused(info.value, WorkflowErrorCode.INVALID_ARGUMENT)
            assert "provider" in str(error)
            assert h.events == []

    @pytest.mark.anyio
    @pytest.mark.parametrize("args", [
        pytest.param({"x": object()}, id="object"),
        pytest.param({"x": float("nan")}, id="nan"),
        pytest.param({"x": {1, 2}}, id="set"),
    ])
    async def test_start_args_must_be_json(self, args: object) -> None:
        async with self.open() as h:
            with pytest.raises(WorkflowError) as info:
                h.start("return args", args=args)
            self._refused(info.value, WorkflowErrorCode.INVALID_ARGUMENT)
            assert h.events == []

    @pytest.mark.anyio
    async def test_start_outside_the_engine_block_raises_runtime_error(self) -> None:
        events: list[WorkflowEvent] = []
        manager = self.make_engine(self.config(), FunctionProvider())
        if callable(getattr(manager, "start", None)):  # the engine is its own context manager
            with pytest.raises(RuntimeError):
                manager.start(raw_request())  # type: ignore[attr-defined]  # an engine, checked above
        async with manager as engine:
            engine.events.subscribe(events.append)
        with pytest.raises(RuntimeError):
            engine.start(raw_request(meta=dict(META)))
        assert events == []
