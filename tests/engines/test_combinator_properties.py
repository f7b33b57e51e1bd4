"""Property-based tests of settle() and vote() (docs/scripts.md, "Failure-aware combinators"):
random thunks and voters against a reference model of the records and the tally.

Each example draws what every thunk (or voter) does — answer, answer null, have its child fail
(under ``failure: "null"`` or ``"throw"``), throw an Error or a string — and, for ``vote``, a
quorum and a ``failed`` mode; the script runs on QuickJSEngine and its value must equal the
model's, on both async backends.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_workflow import (
    EngineConfig,
    QuickJSEngine,
    SubagentRequest,
    SubagentResult,
    WorkflowStartRequest,
)

META = {"name": "property", "description": "failure-aware combinators"}
KINDS = ("value", "null", "fail", "fail-throw", "error", "string")
SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _answer(request: SubagentRequest) -> SubagentResult:
    if request.prompt.startswith("fail"):
        return SubagentResult(stop_reason="error", error=f"reason of {request.prompt}")
    return SubagentResult(text="ok:" + request.prompt)


def _thunk(i: int, kind: str) -> str:
    """The JavaScript of thunk ``i`` doing ``kind``; ``agent('yes' | 'no')`` answers ok:…."""
    return {
        "value": f"() => agent(args.words[{i}])",
        "null": "() => null",
        "fail": f"() => agent('fail {i}')",
        "fail-throw": f"() => agent('fail {i}', {{failure: 'throw'}})",
        "error": f"() => {{ throw new Error('error {i}'); }}",
        "string": f"() => {{ throw 'string {i}'; }}",
    }[kind]


def _record(i: int, kind: str, word: str) -> dict[str, Any]:
    """The model: settle()'s record for thunk ``i``."""
    if kind == "value":
        return {"ok": True, "value": "ok:" + word}
    if kind == "null":
        return {"ok": True, "value": None}
    if kind in ("fail", "fail-throw"):
        return {"ok": False, "error": {"kind": "provider", "message": f"reason of fail {i}"}}
    return {"ok": False, "error": {"kind": "thrown", "message": f"{kind} {i}"}}


def _tally(kinds: list[str], words: list[str], quorum: int | None,
           failed: str | None) -> dict[str, Any]:
    """The model: vote()'s result when voter ``i`` behaves as ``kinds[i]`` and passes when its
    answer is ``ok:yes``."""
    n = len(kinds)
    mode = failed or "abstain"
    votes: list[dict[str, Any]] = []
    for i, (kind, word) in enumerate(zip(kinds, words, strict=True)):
        if kind == "value":
            votes.append({"vote": "for" if word == "yes" else "against", "value": "ok:" + word})
            continue
        record = _record(i, kind, word)
        error = record["error"] if not record["ok"] else {"kind": "null",
                                                          "message": "the voter returned null"}
        votes.append({"vote": mode, "value": None, "error": error})
    count = {v: sum(1 for x in votes if x["vote"] == v) for v in ("for", "against", "abstain")}
    need = quorum if quorum is not None else n // 2 + 1
    return {"passed": count["for"] >= need, "for": count["for"], "against": count["against"],
            "abstained": count["abstain"], "votes": votes}


async def _run(script: str, args: Any) -> Any:
    config = EngineConfig(warm_runtimes=0)
    async with QuickJSEngine(config, provider=_Provider()) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=script, args=args))
        with anyio.fail_after(20):
            result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed", result.error
    return result.value


class _Provider:
    async def run(self, request: SubagentRequest) -> SubagentResult:
        await anyio.lowlevel.checkpoint()  # let the children interleave
        return _answer(request)


cases = st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from(KINDS), min_size=n, max_size=n),
    st.lists(st.sampled_from(["yes", "no"]), min_size=n, max_size=n)))


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@SETTINGS
@given(case=cases, concurrency=st.none() | st.integers(1, 3))
def test_settle_gives_the_models_records(backend: str, case: tuple[list[str], list[str]],
                                         concurrency: int | None) -> None:
    kinds, words = case
    option = "" if concurrency is None else f", {{concurrency: {concurrency}}}"
    script = (f"return await settle([{', '.join(_thunk(i, k) for i, k in enumerate(kinds))}]"
              f"{option});")
    value = anyio.run(_run, script, {"words": words}, backend=backend)
    expected = [_record(i, k, w) for i, (k, w) in enumerate(zip(kinds, words, strict=True))]
    assert value == expected, json.dumps({"script": script, "words": words})


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@SETTINGS
@given(case=cases, data=st.data())
def test_vote_gives_the_models_tally(backend: str, case: tuple[list[str], list[str]],
                                     data: st.DataObject) -> None:
    kinds, words = case
    n = len(kinds)
    quorum = data.draw(st.none() | st.integers(1, n), label="quorum")
    failed = data.draw(st.none() | st.sampled_from(["abstain", "against", "for"]),
                       label="failed")
    options = ["pass: v => v === 'ok:yes'"]
    if quorum is not None:
        options.append(f"quorum: {quorum}")
    if failed is not None:
        options.append(f"failed: {failed!r}")
    voters = "[" + ", ".join(_thunk(i, k) for i, k in enumerate(kinds)) + "]"
    script = f"const voters = {voters};\nreturn await vote({n}, i => voters[i](), " \
             f"{{{', '.join(options)}}});"
    value = anyio.run(_run, script, {"words": words}, backend=backend)
    assert value == _tally(kinds, words, quorum, failed), script
