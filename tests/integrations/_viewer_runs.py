"""Real workflow runs recorded in a store, for the viewer tests.

``make_runs(path)`` records finished runs (completed, failed with a code, failed by an uncaught
script error, a resumed run with replayed agents, a 1000-agent fan-out) and returns their ids
and token totals by name. Run as a script, ``python _viewer_runs.py live STORE AGENTS LATENCY`` records one run
that takes a while (two agents at a time); ``fanout`` instead of ``live`` starts AGENTS agents
at once, 100 running at a time. Either prints the run id on stdout as soon as the run started,
then runs it to the end.
"""

from __future__ import annotations

import sys

import anyio

from dsh_workflow import (
    EchoProvider,
    EngineConfig,
    QuickJSEngine,
    SQLiteRunStore,
    WorkflowStartRequest,
)

RESEARCH = """
phase("research");
const topics = ["alpha", "beta", "gamma", "delta"];
const notes = await parallel(topics.map(t => () => agent("research " + t, {label: "research " + t})));
log("collected " + notes.length + " notes");
phase("write");
const draft = await agent("write a draft from " + notes.join(", "), {label: "draft"});
const review = await agent("review the draft: " + draft, {label: "review"});
log("review done");
return {draft, review, topics: args.topics};
"""

# Only the review prompt changed: a resume replays the research calls and the draft.
RESEARCH_EDITED = RESEARCH.replace('"review the draft: "', '"review the draft carefully: "')

BAD_OPTION = 'phase("prepare"); await agent("a", {label: "first"}); await agent("b", {bogus: 1});'
THROWS = 'log("about to fail"); throw new Error("the script gave up");'
FANOUT = """
const items = Array.from({length: args.n}, (_, i) => i);
const out = await parallel(items.map(i => () =>
  agent("item " + i, {label: "item " + i, phase: i % 2 ? "odd" : "even"})));
return out.length;
"""
LIVE = """
phase("live");
for (let round = 0; round < args.n / 2; round++) {
  await parallel([0, 1].map(k => () => agent("step " + round + "." + k,
                                             {label: "step " + (2 * round + k + 1)})));
  log("round " + round + " done");
}
return {steps: args.n};
"""


def _meta(name: str) -> dict[str, str]:
    return {"name": name, "description": f"viewer test run {name}"}


async def _make_runs(path: str) -> tuple[dict[str, str], dict[str, int]]:
    ids: dict[str, str] = {}
    tokens: dict[str, int] = {}
    async with SQLiteRunStore(path) as store:
        config = EngineConfig(max_concurrent_agents=2)
        async with QuickJSEngine(config, provider=EchoProvider(latency_s=0.05),
                                 store=store) as engine:
            for name, script, args in (("research-report", RESEARCH, {"topics": 4}),
                                       ("bad-option", BAD_OPTION, None),
                                       ("throws", THROWS, None)):
                run = engine.start(WorkflowStartRequest(meta=_meta(name), script=script,
                                                        args=args))
                tokens[name] = (await run.result()).usage.total_tokens
                ids[name] = run.id
            run = engine.start(WorkflowStartRequest(
                meta=_meta("research-resumed"), script=RESEARCH_EDITED, args={"topics": 4},
                resume_from=ids["research-report"]))
            result = await run.result()
            assert result.agents_replayed == 5, result  # research and draft
            ids["research-resumed"] = run.id
        async with QuickJSEngine(EngineConfig(max_concurrent_agents=50, max_total_agents=1000),
                                 provider=EchoProvider(), store=store) as engine:
            run = engine.start(WorkflowStartRequest(meta=_meta("fanout-1000"), script=FANOUT,
                                                    args={"n": 1000}))
            result = await run.result()
            assert result.stop_reason == "completed", result
            ids["fanout-1000"] = run.id
    return ids, tokens


def make_runs(path: str) -> tuple[dict[str, str], dict[str, int]]:
    """Record the finished runs in the store ``path``; their ids and token totals by name."""
    from _support import run_beside_playwright  # the test process's helpers (not as a script)

    return run_beside_playwright(_make_runs, path)


async def _live(mode: str, path: str, agents: int, latency: float) -> None:
    fanout = mode == "fanout"
    config = EngineConfig(max_concurrent_agents=100 if fanout else 2,
                          max_total_agents=max(agents, 1000))
    async with SQLiteRunStore(path) as store, QuickJSEngine(
            config, provider=EchoProvider(latency_s=latency), store=store) as engine:
        run = engine.start(WorkflowStartRequest(
            meta=_meta("live-fanout" if fanout else "live-run"), script=FANOUT if fanout else LIVE,
            args={"n": agents}))
        await store.flush()  # the run is in the file before anyone is told its id
        print(run.id, flush=True)
        result = await run.result()
        assert result.stop_reason == "completed", result


if __name__ == "__main__":
    if sys.argv[1:2] not in (["live"], ["fanout"]) or len(sys.argv) != 5:
        raise SystemExit("usage: _viewer_runs.py live|fanout STORE AGENTS LATENCY")
    anyio.run(_live, sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]),
              backend="trio")
