"""Property-based tests: random workflow scripts against QuickJSEngine, with a reference model.

Hypothesis builds a small program from a grammar of hook calls — ``agent()`` with and without
options or a schema (valid, violated, or with an unsupported option), ``parallel()`` and
``pipeline()`` nesting thunks and stages, ``phase()``, ``log()``/``console.log()``, throws (an
Error, a string, a forged fatal look-alike), ``await null``, ``try``/``catch``, loops with
small bounds, and a return of JSON or of something JSON.stringify converts (a function, NaN,
a Map, ``undefined``) or refuses (a cycle, a bigint). It renders the program as JavaScript and also evaluates it
in Python (:class:`Model`), the semantics of docs/scripts.md in a few lines. Every ``agent()`` call site
draws its provider behaviour — succeed, succeed after a delay, fail (a non-completed
``stop_reason``), raise, or hang — and each run draws an ``agent_timeout_s`` and a moment to
cancel it at (or none).

Invariants checked on every example (both async backends):

* no exception escapes ``start()``, ``result()`` or ``dispose()``; ``result()`` gives the one
  result, and ``error`` is present exactly when the run did not complete;
* the event contract: ``WorkflowStarted`` first, ``WorkflowEnded`` exactly once and last,
  every ``AgentStarted`` paired by exactly one ``AgentEnded`` with the same seq, label and
  phase, ``agents_started`` equal to the number of ``AgentStarted`` events;
* agreement with the model: a run that was not cancelled completes with the model's value, or
  ends ``error`` with the model's error code (or none for the script's own throws); each
  child's outcome (completed / failed / timeout) is the one its behaviour implies; a run the
  model says would hang forever is always ended by the cancel;
* the run ends within its limits, and no run thread is left once the engine block exits.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import pytest
from _support import await_none_left
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_workflow import (
    AgentEnded,
    AgentStarted,
    EngineConfig,
    LogEmitted,
    QuickJSEngine,
    SubagentRequest,
    SubagentResult,
    WorkflowErrorCode,
    WorkflowEvent,
    WorkflowStartRequest,
)
from dsh_workflow._errors import SCRIPT_FAILED
from dsh_workflow.testing import check_run_events

META = {"name": "property", "description": "a generated workflow"}
CODES = {code.value for code in WorkflowErrorCode}
BEHAVIOURS = ("succeed", "delay", "fail", "raise", "hang")
OPTION_KINDS = ("none", "label", "phase", "model", "schema", "bad-schema", "unsupported")
THROW_KINDS = ("error", "string", "forged")
RETURN_KINDS = ("json", "json", "json", "undefined", "function", "nan", "map", "cycle", "bigint",
                "undefined-in-array")
DELAY_S = 0.003
AGENT_TIMEOUT_S = 0.2
RUN_TIMEOUT_S = 3.0
CONFIG = {"slice_cpu_limit_s": 0.5, "dispose_grace_s": 0.5, "max_concurrent_agents": 4,
          "memory_limit_bytes": 16 * 1024 * 1024, "warm_runtimes": 0,
          "run_timeout_s": RUN_TIMEOUT_S}
SCHEMA = {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]}



# ---- the program ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Agent:
    """``agent('<key>' [+ '|' + prev], <options>)``; the key selects the provider behaviour."""

    key: str
    behaviour: str
    options: str


@dataclass(frozen=True)
class Value:
    value: Any


@dataclass(frozen=True)
class Throw:
    kind: str


@dataclass(frozen=True)
class Parallel:
    thunks: tuple[Thunk, ...]


@dataclass(frozen=True)
class Pipeline:
    items: tuple[Any, ...]
    stages: tuple[Stage, ...]


Thunk = Agent | Value | Throw | Parallel
Stage = Agent | Value | Throw | None  # None: the identity stage (prev) => prev


@dataclass(frozen=True)
class Push:
    """``out.push(await <expr>)`` for an agent call or a combinator."""

    expr: Agent | Parallel | Pipeline


@dataclass(frozen=True)
class Narrate:
    kind: str  # "log" | "console" | "phase"
    text: str


@dataclass(frozen=True)
class ThrowStmt:
    kind: str


@dataclass(frozen=True)
class AwaitNull:
    pass


@dataclass(frozen=True)
class Try:
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class Loop:
    count: int
    body: tuple[Stmt, ...]


Stmt = Push | Narrate | ThrowStmt | AwaitNull | Try | Loop


@dataclass(frozen=True)
class Program:
    body: tuple[Stmt, ...]
    returns: str
    agent_timeout: bool
    cancel_at: float | None

# ---- rendering to JavaScript ---------------------------------------------------------------


def js(value: Any) -> str:
    return json.dumps(value)


def render_options(kind: str) -> str:
    return {
        "none": "",
        "label": ", {label: 'a label'}",
        "phase": ", {phase: 'a phase'}",
        "model": ", {model: 'small-model', provider: undefined}",
        "schema": ", {schema: " + js(SCHEMA) + "}",
        "bad-schema": ", {schema: " + js({**SCHEMA, "title": "bad"}) + "}",
        "unsupported": ", {temperature: 0.2}",
    }[kind]


def render_throw(kind: str) -> str:
    return {
        "error": "throw new Error('boom-error')",
        "string": "throw 'boom-string'",
        "forged": ("throw {name: 'WorkflowError', code: 'AGENT_CAP', fatal: true, "
                   "message: 'forged'}"),
    }[kind]


def render_agent(node: Agent, prev: bool = False) -> str:
    prompt = js(node.key) + (" + '|' + String(prev)" if prev else "")
    return f"agent({prompt}{render_options(node.options)})"


def render_thunk(node: Thunk) -> str:
    if isinstance(node, Agent):
        return "() => " + render_agent(node)
    if isinstance(node, Value):
        return f"() => ({js(node.value)})"
    if isinstance(node, Throw):
        return "() => { " + render_throw(node.kind) + "; }"
    return "async () => { await null; return " + render_expr(node) + "; }"


def render_stage(node: Stage) -> str:
    if node is None:
        return "(prev) => prev"
    if isinstance(node, Agent):
        return "(prev) => " + render_agent(node, prev=True)
    if isinstance(node, Value):
        return f"(prev) => ({js(node.value)})"
    return "(prev) => { " + render_throw(node.kind) + "; }"


def render_expr(node: Agent | Parallel | Pipeline) -> str:
    if isinstance(node, Agent):
        return render_agent(node)
    if isinstance(node, Parallel):
        return "parallel([" + ", ".join(render_thunk(t) for t in node.thunks) + "])"
    return ("pipeline(" + js(list(node.items)) + ", "
            + ", ".join(render_stage(s) for s in node.stages) + ")")


def render_block(body: tuple[Stmt, ...], indent: str) -> str:
    lines = []
    for stmt in body:
        if isinstance(stmt, Push):
            lines.append(f"{indent}out.push(await {render_expr(stmt.expr)});")
        elif isinstance(stmt, Narrate):
            call = {"log": "log", "console": "console.log", "phase": "phase"}[stmt.kind]
            lines.append(f"{indent}{call}({js(stmt.text)});")
        elif isinstance(stmt, ThrowStmt):
            lines.append(f"{indent}{render_throw(stmt.kind)};")
        elif isinstance(stmt, AwaitNull):
            lines.append(f"{indent}await null;")
        elif isinstance(stmt, Try):
            lines.append(f"{indent}try {{")
            lines.append(render_block(stmt.body, indent + "  "))
            lines.append(f"{indent}}} catch (e) {{ out.push(seen(e)); }}")
        else:
            lines.append(f"{indent}for (let i = 0; i < {stmt.count}; i++) {{")
            lines.append(render_block(stmt.body, indent + "  "))
            lines.append(f"{indent}}}")
    return "\n".join(line for line in lines if line)


RETURNS = {
    "json": "return out;",
    "undefined": "return undefined;",
    "function": "return [out, () => 1];",
    "nan": "return {out, n: NaN};",
    "map": "return new Map([['out', out]]);",
    "cycle": "const c = {out}; c.self = c; return c;",
    "bigint": "return {out, n: 10n};",
    "undefined-in-array": "return [out, undefined];",
}


def render(program: Program) -> str:
    return "\n".join([
        "const out = [];",
        "const seen = (e) => (e !== null && typeof e === 'object' && e.name === 'WorkflowError'"
        " && e.fatal === true) ? 'fatal:' + e.code : 'caught';",
        render_block(program.body, ""),
        RETURNS[program.returns],
    ])

# ---- the reference model -------------------------------------------------------------------


class Hang(Exception):
    """The script waits for a child that never answers."""


class Thrown(Exception):
    """A JavaScript throw: ``code`` is the engine's code for a real (fatal) hook error."""

    def __init__(self, kind: str, code: str | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.code = code

    @property
    def fatal(self) -> bool:
        return self.kind == "fatal"


class Racy(Exception):
    """Which of several fatal errors wins depends on timing: the model has no single answer."""


@dataclass
class Model:
    """Evaluates a :class:`Program` as docs/scripts.md says the engine must."""

    agent_timeout: bool
    logs: int = 0
    outcomes: dict[str, str] = field(default_factory=dict)  # key -> expected AgentEnded outcome

    def agent(self, node: Agent, prev: Any = None, piped: bool = False) -> Any:
        if node.options == "unsupported":
            raise Thrown("fatal", "UNSUPPORTED_OPTION")
        prompt = node.key + ("|" + js_string(prev) if piped else "")
        behaviour = node.behaviour
        bad = node.options == "bad-schema"
        if behaviour in ("succeed", "delay"):
            self.outcomes[node.key] = "failed" if bad else "completed"
            if node.options == "schema":
                return {"v": prompt}
            return None if bad else "r:" + prompt
        if behaviour == "fail":
            self.outcomes[node.key] = "failed"
            return None
        if behaviour == "raise":
            self.outcomes[node.key] = "failed"
            raise Thrown("fatal", "AGENT_FAILED")
        if self.agent_timeout:
            self.outcomes[node.key] = "timeout"
            return None
        raise Hang()

    def settle_all(self, outcomes: list[Any]) -> list[Any]:
        """A barrier: the first fatal error rejects it; else any hang hangs it."""
        fatal = {o.code for o in outcomes if isinstance(o, Thrown)}
        if len(fatal) > 1:
            raise Racy()
        if fatal:
            raise Thrown("fatal", fatal.pop())
        if any(isinstance(o, Hang) for o in outcomes):
            raise Hang()
        return outcomes

    def attempt(self, fn: Any) -> Any:
        """Run one thunk or chain: ordinary throws become None, fatal ones and hangs are kept."""
        try:
            return fn()
        except Thrown as exc:
            return exc if exc.fatal else None
        except Hang as exc:
            return exc

    def expr(self, node: Agent | Parallel | Pipeline) -> Any:
        if isinstance(node, Agent):
            return self.agent(node)
        if isinstance(node, Parallel):
            return self.settle_all([self.attempt(lambda t=t: self.thunk(t)) for t in node.thunks])
        return self.settle_all([self.attempt(lambda i=i: self.chain(node.stages, i))
                                for i in node.items])

    def thunk(self, node: Thunk) -> Any:
        if isinstance(node, Value):
            return node.value
        if isinstance(node, Throw):
            raise self.throw(node.kind)
        return self.expr(node)

    def chain(self, stages: tuple[Stage, ...], item: Any) -> Any:
        prev = item
        for stage in stages:
            if stage is None:
                continue
            if isinstance(stage, Value):
                prev = stage.value
            elif isinstance(stage, Throw):
                raise self.throw(stage.kind)
            else:
                prev = self.agent(stage, prev, piped=True)
        return prev

    def throw(self, kind: str) -> Thrown:
        return Thrown(kind)

    def block(self, body: tuple[Stmt, ...], out: list[Any]) -> None:
        for stmt in body:
            if isinstance(stmt, Push):
                out.append(self.expr(stmt.expr))
            elif isinstance(stmt, Narrate):
                self.logs += stmt.kind != "phase"
            elif isinstance(stmt, ThrowStmt):
                raise self.throw(stmt.kind)
            elif isinstance(stmt, Try):
                try:
                    self.block(stmt.body, out)
                except Thrown as exc:
                    out.append("fatal:" + (exc.code or "AGENT_CAP")
                               if exc.fatal or exc.kind == "forged" else "caught")
            elif isinstance(stmt, Loop):
                for _ in range(stmt.count):
                    self.block(stmt.body, out)

    def run(self, program: Program) -> tuple[str, Any]:
        """("completed", value) | ("error", code or None) | ("hang", None); raises Racy."""
        out: list[Any] = []
        try:
            self.block(program.body, out)
        except Thrown as exc:
            return "error", exc.code if exc.fatal else None
        except Hang:
            return "hang", None
        if program.returns == "json":
            return "completed", out
        if program.returns == "undefined":
            return "completed", None
        # JSON as JSON.stringify makes it (docs/scripts.md, "The return value"); BigInt and cycles fail
        if program.returns == "function":
            return "completed", [out, None]
        if program.returns == "nan":
            return "completed", {"out": out, "n": None}
        if program.returns == "map":
            return "completed", {}
        if program.returns == "undefined-in-array":
            return "completed", [out, None]
        return "error", "RESULT_UNSERIALIZABLE"


def js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` for the values a pipeline passes along."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)

# ---- strategies ----------------------------------------------------------------------------


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5),
                      st.sampled_from(["x", "y z", "ü"]))
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=2), max_leaves=4)


@st.composite
def agents(draw: st.DrawFn, allow_hang: bool) -> Agent:
    behaviours = BEHAVIOURS if allow_hang else BEHAVIOURS[:-1]
    return Agent(key="p", behaviour=draw(st.sampled_from(behaviours)),
                 options=draw(st.sampled_from(OPTION_KINDS)))


def thunks(depth: int, allow_hang: bool) -> st.SearchStrategy[Thunk]:
    simple = st.one_of(agents(allow_hang), json_value.map(Value),
                       st.sampled_from(THROW_KINDS).map(Throw))
    if depth <= 0:
        return simple
    return st.one_of(simple, st.lists(thunks(depth - 1, allow_hang), max_size=3)
                     .map(lambda ts: Parallel(tuple(ts))))


def stages(allow_hang: bool) -> st.SearchStrategy[Stage]:
    return st.one_of(st.none(), agents(allow_hang), json_leaf.map(Value),
                     st.sampled_from(THROW_KINDS).map(Throw))


def exprs(allow_hang: bool) -> st.SearchStrategy[Agent | Parallel | Pipeline]:
    return st.one_of(
        agents(allow_hang),
        st.lists(thunks(1, allow_hang), min_size=1, max_size=3).map(lambda ts: Parallel(tuple(ts))),
        st.builds(lambda items, ss: Pipeline(tuple(items), tuple(ss)),
                  st.lists(st.one_of(st.integers(0, 9), st.sampled_from(["a", "b"])),
                           max_size=3),
                  st.lists(stages(allow_hang), min_size=1, max_size=3)),
    )


def statements(depth: int, allow_hang: bool) -> st.SearchStrategy[Stmt]:
    simple = st.one_of(
        exprs(allow_hang).map(Push),
        exprs(allow_hang).map(Push),
        exprs(allow_hang).map(Push),
        st.builds(Narrate, st.sampled_from(["log", "console", "phase"]),
                  st.sampled_from(["step", "fan out", "ü"])),
        st.sampled_from(THROW_KINDS).map(ThrowStmt),
        st.just(AwaitNull()),
    )
    if depth <= 0:
        return simple
    block = st.lists(statements(depth - 1, allow_hang), min_size=1, max_size=3).map(tuple)
    return st.one_of(simple, block.map(Try), st.builds(Loop, st.integers(0, 2), block))


@st.composite
def programs(draw: st.DrawFn) -> Program:
    cancel_at = draw(st.one_of(st.none(), st.floats(0.0, 0.03)))
    agent_timeout = draw(st.booleans())
    # A child that hangs forever is only drawn when something will end it: the agent timeout
    # or the cancel (otherwise only run_timeout_s would, which the model does not cover).
    allow_hang = agent_timeout or cancel_at is not None
    body = draw(st.lists(statements(2, allow_hang), min_size=1, max_size=4).map(tuple))
    return Program(body=rekey(body, iter(range(10**6))),
                   returns=draw(st.sampled_from(RETURN_KINDS)),
                   agent_timeout=agent_timeout, cancel_at=cancel_at)


def rekey(node: Any, numbers: Any) -> Any:
    """The same tree with every agent() call site keyed uniquely (p0, p1, ... in order)."""
    if isinstance(node, Agent):
        return replace(node, key=f"p{next(numbers)}")
    if isinstance(node, tuple):
        return tuple(rekey(item, numbers) for item in node)
    if isinstance(node, (Push, Try, Loop, Parallel, Pipeline)):
        return replace(node, **{name: rekey(value, numbers)
                                for name, value in vars(node).items()})
    return node

# ---- the provider --------------------------------------------------------------------------


class PlannedProvider:
    """Behaves as each call site's drawn behaviour says (keyed by the prompt's key)."""

    def __init__(self, program: Program) -> None:
        self.behaviours: dict[str, str] = {}
        collect(program.body, self.behaviours)

    async def run(self, request: SubagentRequest) -> SubagentResult:
        behaviour = self.behaviours[request.prompt.split("|", 1)[0]]
        if behaviour == "delay":
            await anyio.sleep(DELAY_S)
        elif behaviour == "fail":
            return SubagentResult(stop_reason="error", error="the planned failure")
        elif behaviour == "raise":
            raise RuntimeError("the planned provider fault")
        elif behaviour == "hang":
            await anyio.sleep_forever()
        if request.schema is not None:
            bad = request.schema.get("title") == "bad"
            return SubagentResult(structured={"v": 1 if bad else request.prompt})
        return SubagentResult(text="r:" + request.prompt)


def collect(node: Any, into: dict[str, str]) -> None:
    if isinstance(node, Agent):
        into[node.key] = node.behaviour
    elif isinstance(node, (tuple, list)):
        for item in node:
            collect(item, into)
    elif isinstance(node, (Push, Try, Loop, Parallel, Pipeline)):
        for value in vars(node).values():
            collect(value, into)

# ---- the property --------------------------------------------------------------------------


def run_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("dsh-workflow")}


async def check(program: Program) -> None:
    script = render(program)
    model = Model(agent_timeout=program.agent_timeout)
    try:
        expected: tuple[str, Any] | None = model.run(program)
    except Racy:
        expected = None
    config = EngineConfig(**CONFIG, agent_timeout_s=AGENT_TIMEOUT_S if program.agent_timeout
                          else None)
    events: list[WorkflowEvent] = []
    before = run_threads()
    began = time.monotonic()
    async with QuickJSEngine(config, provider=PlannedProvider(program)) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        if program.cancel_at is not None:
            await anyio.sleep(program.cancel_at)
            run.cancel("the property test cancelled the run")
        with anyio.fail_after(RUN_TIMEOUT_S + 5):
            result = await run.result()
        elapsed = time.monotonic() - began
        assert await run.result() is result
        with anyio.fail_after(config.dispose_grace_s + 2):
            await run.dispose()
    where = f"\n--- script ---\n{script}\n--- result ---\n{result!r}\nmodel: {expected!r}"

    assert (result.error is not None) == (result.stop_reason != "completed"), where
    assert (result.error_code is not None) == (result.stop_reason != "completed"), where
    assert result.stop_reason == "completed" or result.value is None, where
    check_run_events(events, run, result)
    assert elapsed < RUN_TIMEOUT_S + config.dispose_grace_s + 1, where

    if result.stop_reason == "cancelled":
        assert program.cancel_at is not None, where
        assert result.error is not None, where
        assert "the property test cancelled the run" in result.error, where
        assert result.error_code == WorkflowErrorCode.CANCELLED, where
    elif expected is not None:
        kind, detail = expected
        assert kind != "hang", f"a run that waits forever must end only by the cancel{where}"
        assert result.stop_reason == kind, where
        if kind == "completed":
            assert result.value == detail, where
            assert sum(isinstance(e, LogEmitted) for e in events) == model.logs, where
        elif detail is not None:
            assert result.error is not None, where
            assert result.error_code == detail and result.error.startswith(detail + ":"), where
        else:
            assert result.error is not None, where
            assert not any(result.error.startswith(code + ":") for code in CODES), where
            assert result.error_code == SCRIPT_FAILED, where
        for event in events:
            if isinstance(event, AgentEnded):
                key = event.label.split("|", 1)[0] if event.label else ""
                want = model.outcomes.get(key)
                if want is not None:
                    assert event.outcome in (want, "cancelled"), f"{event!r}{where}"
    started = [e for e in events if isinstance(e, AgentStarted)]
    assert result.agents_started == len(started), where

    await await_none_left(lambda: {t.name for t in run_threads() - before},
                          what=f"the run threads to end{where}",
                          timeout=3 * config.slice_cpu_limit_s + 2)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs())
def test_generated_workflows_keep_every_invariant(backend: str, program: Program) -> None:
    anyio.run(check, program, backend=backend)
