"""Random workflow scripts from a seed, for the crash-and-replay oracle (docs/durable-runs.md,
"How we prove it").

:func:`generate` turns a seed into a :class:`Program`: a main script and the saved workflows
its ``workflow()`` calls name. The same seed always gives the same program (a seeded
``random.Random``, nothing else). A program is built from *call kinds*, one entry each in
:data:`KINDS`: ``agent`` (a text answer), ``typed`` (``agent()`` with a schema), ``repeat`` (a
prompt used again and again), ``failing`` (a call the provider fails: ``null``, never
journaled), ``race`` (``first()`` of thunks whose value does not depend on the winner),
``ask`` (``ask()`` or ``checkpoint()``: a question the oracle's answerer answers),
``parallel`` (thunks, each a nested block), ``pipeline`` (items through stages, each stage a
nested block), ``loop`` (a ``for`` loop over a nested block) and ``workflow`` (a saved
workflow, itself generated). Adding a kind is one function and one table entry.

Every block keeps two variables: ``out`` collects each value in script order and ``acc``
folds every value into the text of the next prompts, so a program's return value depends on
every answer and on its position in the script, never on the order children complete in
(``parallel`` and ``pipeline`` return their slots in item order).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["KINDS", "Program", "generate", "saved_file"]

#: The schema of a ``typed`` call; the oracle's provider answers ``{"n": <int>, "w": <str>}``.
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "w": {"type": "string"}},
          "required": ["n", "w"]}


@dataclass(frozen=True)
class Program:
    """One generated workflow: ``script`` (the main body, reading ``args.salt``), ``library``
    (saved workflow name → body, each reading ``args.salt``) and ``calls``, how many
    ``agent()`` calls one run of it makes (a ``first()`` counted as one: its losers may or may
    not be asked)."""

    seed: int
    script: str
    library: dict[str, str]
    calls: int
    kinds: frozenset[str]


@dataclass
class _Gen:
    rng: random.Random
    budget: int  # agent() calls still allowed
    nested: bool = False  # inside a saved workflow: no workflow() calls
    times: int = 1  # how many times the code being written runs (loops, stages)
    names: int = 0
    calls: int = 0
    library: dict[str, str] = field(default_factory=dict)
    kinds: set[str] = field(default_factory=set)

    def name(self, stem: str) -> str:
        self.names += 1
        return f"{stem}{self.names}"

    def call(self) -> str:
        """Count one ``agent()`` call (as many times as the code runs); its prompt's tag."""
        self.calls += self.times
        self.budget -= self.times
        return f"t{self.names}"


# ---- the call kinds: each writes statements that push one value to `out` and fold it ------

Emit = Callable[[_Gen, str, str, int], list[str]]


def _fold(acc: str, value: str) -> str:
    return f"{acc} = ({acc} + ':' + {value}).slice(-48);"


def _agent(gen: _Gen, acc: str, out: str, depth: int) -> list[str]:
    value = gen.name("v")
    return [f"const {value} = await agent('{gen.call()} ' + {acc});",
            f"{out}.push({value});", _fold(acc, value)]


def _repeat(gen: _Gen, acc: str, out: str, depth: int) -> list[str]:
    """A prompt that does not depend on ``acc``: the same key again and again (the n-th call
    of a key takes the n-th journaled answer)."""
    gen.call()
    value = gen.name("r")
    return [f"const {value} = await agent('same {gen.rng.randrange(3)}');",
            f"{out}.push({value});", _fold(acc, value)]


def _failing(gen: _Gen, acc: str, out: str, depth: int) -> list[str]:
    """A call the provider always fails: it resolves ``null``, is never journaled, and so
    runs (is paid) again after a crash."""
    value = gen.name("f")
    return [f"const {value} = await agent('{gen.call()} fail ' + {acc});",
            f"{out}.push({value});", _fold(acc, f"JSON.stringify({value})")]


def _race(gen: _Gen, acc: str, out: str, depth: int) -> list[str]:
    """``first()`` of thunks that each make one call and give the same value: which wins
    depends on the shuffled completions, the value does not. Its prompts say ``race`` (a
    loser may be cancelled before it is asked, or be asked and never journaled)."""
    value = gen.name("race")
    tag = gen.call()
    gen.budget -= gen.times  # a second thunk's call (not counted: it may never be asked)
    width = gen.rng.randint(2, 3)
    thunks = [f"  async () => {{ await agent('{tag} race {slot} ' + {acc}); return 'won'; }},"
              for slot in range(width)]
    return [f"const {value} = await first([", *thunks, "]);", f"{out}.push({value});",
            _fold(acc, value)]


def _ask(gen: _Gen, acc: str, out: str, depth: int) -> list[str]:
    """A question for a person (``ask()`` with or without choices, or ``checkpoint()``): one
    more journaled call, answered by the oracle's answerer from its text alone. Takes no agent
    slot; charged to the budget only to bound the program."""
    gen.budget -= gen.times
    value = gen.name("q")
    text = f"'{gen.name('t')} question ' + {acc}"
    form = gen.rng.choice(("choices", "text", "checkpoint"))
    if form == "checkpoint":
        call = f"checkpoint({text})"
    elif form == "choices":
        call = f"ask({text}, {{choices: ['red', 'green', 'blue'], label: 'pick'}})"
    else:
        call = f"ask({text})"
    return [f"const {value} = await {call};", f"{out}.push({value});",
            _fold(acc, f"JSON.stringify({value})")]


def _typed(gen: _Gen, acc: str, out: str, depth: int) -> list[str]:
    value = gen.name("s")
    return [f"const {value} = await agent('{gen.call()} typed ' + {acc}, "
            "{schema: SCHEMA, label: 'typed'});",
            f"{out}.push([{value}.n, {value}.w]);", _fold(acc, f"{value}.n + {value}.w")]


def _parallel(gen: _Gen, acc: str, out: str, depth: int) -> list[str]:
    result = gen.name("par")
    lines = [f"const {result} = await parallel(["]
    for slot in range(gen.rng.randint(2, 4)):
        inner_acc, inner_out = gen.name("acc"), gen.name("out")
        body = _block(gen, inner_acc, inner_out, depth + 1, size=gen.rng.randint(1, 2))
        lines += ["  async () => {", f"    let {inner_acc} = {acc} + '/{slot}';",
                  f"    const {inner_out} = [];", *(f"    {line}" for line in body),
                  f"    return {inner_out};", "  },"]
    return [*lines, "]);", f"{out}.push({result});",
            _fold(acc, f"JSON.stringify({result})")]


def _pipeline(gen: _Gen, acc: str, out: str, depth: int) -> list[str]:
    items = [gen.name("i") for _ in range(gen.rng.randint(2, 3))]
    result = gen.name("pipe")
    lines = [f"const {result} = await pipeline({json.dumps(items)},"]
    outer, gen.times = gen.times, gen.times * len(items)  # each stage runs once per item
    for _ in range(gen.rng.randint(1, 2)):
        inner_acc, inner_out = gen.name("acc"), gen.name("out")
        body = _block(gen, inner_acc, inner_out, depth + 1, size=1)
        lines += ["  async (prev, item, index) => {",
                  f"    let {inner_acc} = {acc} + JSON.stringify(prev) + item + index;",
                  f"    const {inner_out} = [];", *(f"    {line}" for line in body),
                  f"    return {inner_out};", "  },"]
    gen.times = outer
    return [*lines, ");", f"{out}.push({result});", _fold(acc, f"JSON.stringify({result})")]


def _loop(gen: _Gen, acc: str, out: str, depth: int) -> list[str]:
    turns = gen.rng.randint(2, 3)
    index = gen.name("k")
    outer, gen.times = gen.times, gen.times * turns
    body = _block(gen, acc, out, depth + 1, size=gen.rng.randint(1, 2))
    gen.times = outer
    return [f"for (let {index} = 0; {index} < {turns}; {index}++) {{",
            f"  {acc} = {acc} + {index};", *(f"  {line}" for line in body), "}"]


def _workflow(gen: _Gen, acc: str, out: str, depth: int) -> list[str]:
    name = f"oracle-saved-{len(gen.library) + 1}"
    inner = _Gen(gen.rng, budget=min(gen.budget, 8), nested=True, names=gen.names)
    gen.library[name] = _body(inner, size=gen.rng.randint(1, 3))
    gen.names = inner.names
    gen.calls += inner.calls
    gen.budget -= inner.calls
    gen.kinds |= inner.kinds
    value = gen.name("w")
    return [f"const {value} = await workflow('{name}', {{salt: {acc}}});",
            f"{out}.push({value});", _fold(acc, f"JSON.stringify({value})")]


@dataclass(frozen=True)
class Kind:
    """One call kind: how to write it, how often it is drawn, the fewest ``agent()`` calls it
    makes (each run of it), whether it nests blocks (then it is not drawn below
    :data:`MAX_DEPTH`) and whether it may only be written once per run (``workflow()``:
    nesting is one level, and a saved workflow is not called from a loop)."""

    emit: Emit
    weight: int
    needs: int = 1
    nests: bool = False
    once: bool = False


#: Every call kind the generator draws from. Adding a kind (``ask`` when it exists) is one
#: function above and one entry here.
KINDS: dict[str, Kind] = {
    "agent": Kind(_agent, 5),
    "typed": Kind(_typed, 3),
    "repeat": Kind(_repeat, 1),
    "failing": Kind(_failing, 1),
    "race": Kind(_race, 1, needs=2),
    "ask": Kind(_ask, 2),
    "parallel": Kind(_parallel, 2, needs=2, nests=True),
    "pipeline": Kind(_pipeline, 2, needs=4, nests=True),
    "loop": Kind(_loop, 1, needs=2, nests=True),
    "workflow": Kind(_workflow, 1, needs=2, nests=True, once=True),
}

MAX_DEPTH = 2


def _block(gen: _Gen, acc: str, out: str, depth: int, *, size: int) -> list[str]:
    """``size`` statements of drawn kinds (fewer when the budget runs out)."""
    lines: list[str] = []
    for _ in range(size):
        usable = {name: kind for name, kind in KINDS.items()
                  if kind.needs * gen.times <= gen.budget
                  and not (kind.nests and depth >= MAX_DEPTH)
                  and not (kind.once and (gen.nested or gen.times > 1))}
        if not usable:
            break
        name = gen.rng.choices(list(usable), [kind.weight for kind in usable.values()])[0]
        gen.kinds.add(name)
        lines += usable[name].emit(gen, acc, out, depth)
    return lines


def _body(gen: _Gen, size: int) -> str:
    lines = [f"const SCHEMA = {json.dumps(SCHEMA)};", "let acc = String(args.salt);",
             "const out = [];",
             *_block(gen, "acc", "out", 0, size=size), "return out;"]
    return "\n".join(lines) + "\n"


def generate(seed: int, *, calls: int = 24) -> Program:
    """The program of ``seed``: a main script of at most about ``calls`` ``agent()`` calls
    (nested blocks count as many times as they run)."""
    gen = _Gen(random.Random(seed), budget=calls)
    script = _body(gen, size=gen.rng.randint(5, 9))
    return Program(seed=seed, script=script, library=dict(gen.library), calls=gen.calls,
                   kinds=frozenset(gen.kinds))


def saved_file(name: str, body: str) -> str:
    """A saved workflow's file: its meta literal, then its body."""
    meta = {"name": name, "description": "a workflow the oracle generated"}
    return f"export const meta = {json.dumps(meta)};\n{body}"
