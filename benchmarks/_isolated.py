"""One repetition of an isolated scenario in a fresh interpreter (used by ``__main__``).

``python -m benchmarks._isolated SCENARIO ENGINE BACKEND QUICK`` prints one JSON line:
``{case: {metric: value}}``. Run alone, the process's peak RSS belongs to that scenario.
"""

from __future__ import annotations

import json
import sys
from functools import partial

import anyio

from .scenarios import BY_ID, Ctx


def main(argv: list[str]) -> int:
    scenario_id, kind, backend, quick = argv
    scenario = BY_ID[scenario_id]
    ctx = Ctx(quick=quick == "1", backend=backend)
    figures = anyio.run(partial(scenario.fn, kind, ctx), backend=backend)
    sys.stdout.write("BENCH-RESULT " + json.dumps(figures) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
