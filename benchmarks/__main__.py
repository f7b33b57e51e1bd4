"""``python -m benchmarks``: run the scenarios, print the table, write the figures as JSON.

    python -m benchmarks                      # every scenario, every available engine
    python -m benchmarks --quick              # each scenario briefly (CI smoke run)
    python -m benchmarks --only S3,S4 --engine quickjs --backend asyncio --out figures.json
    python -m benchmarks soak --quick         # the soak test (soak.py), not these scenarios

Exit status: 0 when every scenario ran (missed targets do not fail the run), 1 when a
scenario failed (its error is in the output), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import anyio

from .measure import machine_info, stats
from .oracle import S13
from .scenarios import S7_CASE, Ctx, Scenario, engine_kinds
from .scenarios import SCENARIOS as ENGINE_SCENARIOS
from .startup import S12

#: Every scenario: the engines' (S1–S11), the command line's start-up (S12) and the
#: crash-and-replay oracle (S13).
SCENARIOS: tuple[Scenario, ...] = (*ENGINE_SCENARIOS, S12, S13)

ROOT = Path(__file__).resolve().parent.parent

#: The TypeScript original, measured on this machine class (issue 7), for comparison.
TS_ORIGINAL = [
    ("`return 1`", 27.0, "ms", ("S1", "return 1", "latency_ms")),
    ("fan-out 1,000", 87.0, "ms", ("S3", "parallel N=1000", "wall_ms")),
    ("pipeline 3×100", 46.0, "ms", ("S5", "pipeline 3x100", "wall_ms")),
    ("20 runs of 1,000 agents (RSS)", 492.0, "MB", None),
]

#: S10: timer and scheduling slack allowed on top of 1.2 × (expected + zero-latency cost).
EXPECT_SLACK_MS = 25.0

IN_PROCESS_TIMEOUT_S = 900.0
ISOLATED_TIMEOUT_S = 900.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=(
        "Benchmark the workflow engines against a pure-Python anyio baseline."))
    parser.add_argument("--quick", action="store_true",
                        help="run each scenario briefly (whole suite well under a minute)")
    parser.add_argument("--engine", choices=("quickjs", "subprocess", "all"), default="all",
                        help="engine(s) to measure; 'all' skips engines not available (default)")
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--only", default="", help="comma-separated scenario ids, e.g. S3,S4")
    parser.add_argument("--out", type=Path, help="write the figures as JSON to this file")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--markdown", action="store_true",
                        help="print the table as Markdown (for benchmarks/README.md)")
    parser.add_argument("--from-json", type=Path, metavar="FILE",
                        help="do not run anything: print the table of a previous --out file")
    args = parser.parse_args(argv)
    known = {s.id for s in SCENARIOS}
    args.only_ids = [x.strip().upper() for x in args.only.split(",") if x.strip()]
    unknown = [x for x in args.only_ids if x not in known]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return args


# ---- running ----------------------------------------------------------------------------------

def run_in_process(scenario: Scenario, kind: str, ctx: Ctx) -> dict[str, dict[str, list[float]]]:
    async def guarded() -> Any:
        with anyio.fail_after(IN_PROCESS_TIMEOUT_S):
            return await scenario.fn(kind, ctx)

    return anyio.run(guarded, backend=ctx.backend)


def run_isolated(scenario: Scenario, kind: str, ctx: Ctx) -> dict[str, dict[str, list[float]]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    merged: dict[str, dict[str, list[float]]] = {}
    for _ in range(ctx.pick(*scenario.reps)):
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks._isolated", scenario.id, kind, ctx.backend,
             "1" if ctx.quick else "0"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=ISOLATED_TIMEOUT_S,
            check=False)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH-RESULT ")),
                    None)
        if proc.returncode != 0 or line is None:
            raise RuntimeError(f"isolated run exited {proc.returncode}:\n"
                               f"{proc.stderr[-4000:]}{proc.stdout[-1000:]}")
        figures = json.loads(line[len("BENCH-RESULT "):])
        for case, metrics in figures.items():
            for metric, value in metrics.items():
                merged.setdefault(case, {}).setdefault(metric, []).append(float(value))
    return merged


def cost_ratio(scenario: Scenario, metric: str, value: float | None,
               base: float | None) -> float | None:
    """How many times the baseline's cost the engine's figure is (> 1: the engine costs more)."""
    if value is None or base is None or value <= 0 or base <= 0:
        return None
    spec = scenario.metrics.get(metric)
    if spec is not None and not spec.compare:
        return None
    if spec is not None and spec.higher_is_better:
        return base / value
    return value / base


def evaluate(scenario: Scenario, entry: dict[str, Any], kinds: list[str],
             quick: bool) -> list[dict[str, Any]]:
    verdicts: list[dict[str, Any]] = []
    for target in scenario.targets:
        for kind in kinds:
            if kind not in target.engines:
                continue
            figures = entry["cases"].get(target.case, {}).get(kind, {})
            block = figures.get(target.metric)
            if block is None:
                continue
            unit = scenario.metrics[target.metric].unit
            median = block["median"]
            limit = target.limit
            if target.kind == "ratio":
                value = block.get("ratio")
                met = value is not None and value <= limit
            elif target.kind == "expect":
                value = median
                limit = figures.get("expected_ms", {}).get("median") or 0.0
                fixed = figures.get("zero_latency_ms", {}).get("median") or 0.0
                met = value is not None and limit * 0.9 <= value <= (
                    1.2 * (limit + fixed) + EXPECT_SLACK_MS)
            else:
                value = median
                met = value is not None and value <= limit
            skipped = target.full_only and quick
            verdict = {"scenario": scenario.id, "case": target.case, "metric": target.metric,
                       "engine": kind, "kind": target.kind, "limit": limit,
                       "value": value, "met": bool(met), "text": target.describe(unit, limit),
                       "informational": target.kind == "expect" or skipped,
                       "skipped": skipped}
            block["target"] = verdict
            verdicts.append(verdict)
    return verdicts


def run_scenario(scenario: Scenario, kinds: list[str], ctx: Ctx) -> dict[str, Any]:
    entry: dict[str, Any] = {"title": scenario.title, "isolated": scenario.isolated,
                             "cases": {case: {} for case in scenario.cases}, "errors": {},
                             "notes": {}, "seconds": {}}
    for kind in ["baseline", *kinds]:
        started = time.perf_counter()
        print(f"  {scenario.id} {kind} …", file=sys.stderr, end="", flush=True)
        try:
            runner = run_isolated if scenario.isolated else run_in_process
            samples = runner(scenario, kind, ctx)
        except Exception as exc:  # noqa: BLE001 - reported, the suite goes on
            entry["errors"][kind] = "".join(traceback.format_exception(exc))[-4000:]
            print(f" FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            continue
        took = time.perf_counter() - started
        entry["seconds"][kind] = round(took, 2)
        print(f" {took:.1f} s", file=sys.stderr, flush=True)
        for case, metrics in samples.items():
            entry["cases"].setdefault(case, {})[kind] = {m: stats(v) for m, v in metrics.items()}
        if kind in scenario.notes:
            entry["notes"][kind] = scenario.notes[kind]
    for by_kind in entry["cases"].values():
        base = by_kind.get("baseline", {})
        for kind, metrics in by_kind.items():
            if kind == "baseline":
                continue
            for metric, block in metrics.items():
                base_block = base.get(metric)
                block["ratio"] = cost_ratio(scenario, metric, block["median"],
                                            base_block["median"] if base_block else None)
    return entry


# ---- the table ----------------------------------------------------------------------------

def fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


HEADER = ("scen", "case", "metric", "engine", "median", "min", "max", "×base", "target", "status")


def table_rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for sid, entry in results["scenarios"].items():
        scenario = next(s for s in SCENARIOS if s.id == sid)
        for case, by_kind in entry["cases"].items():
            metric_names = [m for m in scenario.metrics
                            if any(m in figures for figures in by_kind.values())]
            for metric in metric_names:
                unit = scenario.metrics[metric].unit
                descriptor = not scenario.metrics[metric].compare
                shown: list[Any] = []
                for kind in ("baseline", "quickjs", "subprocess"):
                    block = by_kind.get(kind, {}).get(metric)
                    if block is None:
                        continue
                    if descriptor:  # a property of the case: shown once unless it differs
                        if block["median"] in shown:
                            continue
                        shown.append(block["median"])
                    ratio = block.get("ratio")
                    verdict = block.get("target")
                    status = ""
                    if verdict is not None:
                        if verdict.get("skipped"):
                            status = "n/a (quick)"
                        elif verdict["informational"]:
                            status = "as expected" if verdict["met"] else "OFF"
                        else:
                            status = "met" if verdict["met"] else "MISSED"
                    rows.append((sid, case, f"{metric} ({unit})" if unit else metric, kind,
                                 fmt(block["median"]), fmt(block["min"]), fmt(block["max"]),
                                 f"{ratio:.2f}×" if ratio is not None else "",
                                 verdict["text"] if verdict else "", status))
        for kind, error in entry["errors"].items():
            last = error.strip().splitlines()[-1] if error.strip() else "error"
            rows.append((sid, "ERROR", "", kind, "", "", "", "", "", last[:60]))
    return rows


def render_table(rows: list[tuple[str, ...]], markdown: bool = False) -> str:
    if markdown:
        lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
                  for row in rows]
        return "\n".join(lines)
    widths = [max(len(HEADER[i]), *(len(row[i]) for row in rows)) if rows else len(HEADER[i])
              for i in range(len(HEADER))]
    right = {4, 5, 6, 7}

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
                         for i, cell in enumerate(row)).rstrip()

    out = [line(HEADER), line(tuple("-" * w for w in widths))]
    previous = None
    for row in rows:
        if previous is not None and row[0] != previous:
            out.append("")
        out.append(line(row))
        previous = row[0]
    return "\n".join(out)


def ts_comparison(results: dict[str, Any]) -> list[str]:
    lines = []
    for label, figure, unit, where in TS_ORIGINAL:
        ours = ""
        if where is not None:
            sid, case, metric = where
            block = (results["scenarios"].get(sid, {}).get("cases", {}).get(case, {})
                     .get("quickjs", {}).get(metric))
            if block is not None:
                ours = f"QuickJSEngine median {fmt(block['median'])} {unit}"
        elif "S7" in results["scenarios"]:
            figures = (results["scenarios"]["S7"]["cases"].get(S7_CASE, {}).get("quickjs", {}))
            if "peak_rss_mb" in figures:
                ours = (f"QuickJSEngine S7 ({fmt(figures['runs']['median'])} runs × 10 agents "
                        f"pending) peak {fmt(figures['peak_rss_mb']['median'])} MB")
        lines.append(f"  {label:<32} TypeScript {figure:g} {unit:<4} {ours}")
    return lines


def summary(results: dict[str, Any]) -> str:
    targets = [t for t in results["targets"] if not t["informational"]]
    skipped = [t for t in results["targets"] if t.get("skipped")]
    met = sum(1 for t in targets if t["met"])
    parts = [f"targets met: {met}/{len(targets)}"
             + (f" ({len(skipped)} not judged in a quick run)" if skipped else "")]
    missed = [f"{t['scenario']} {t['case']} {t['metric']} ({t['engine']}): "
              f"{fmt(t['value'])} vs {t['text']}" for t in targets if not t["met"]]
    if missed:
        parts.append("missed: " + "; ".join(missed))
    return "\n".join(parts)


# ---- main ---------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["soak"]:  # `python -m benchmarks soak ...` is the soak test (soak.py)
        from .soak import main as soak_main

        return soak_main(argv[1:])
    args = parse_args(argv)
    if args.list:
        for scenario in SCENARIOS:
            print(f"{scenario.id:<4} {scenario.title}")
            for case in scenario.cases:
                print(f"       {case}")
        return 0
    if args.from_json is not None:
        saved = json.loads(args.from_json.read_text())
        print(render_table(table_rows(saved), markdown=args.markdown))
        print(summary(saved))
        return 0
    ctx = Ctx(quick=args.quick, backend=args.backend)
    kinds, notes = engine_kinds(args.engine)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    selected = [s for s in SCENARIOS if s.id in args.only_ids
                or (not args.only_ids and (s.quick or not args.quick))]
    results: dict[str, Any] = {
        "meta": {**machine_info(args.backend), "quick": args.quick, "engines": kinds,
                 "engine_choice": args.engine, "argv": argv},
        "notes": notes,
        "reference_typescript": {label: {"value": figure, "unit": unit}
                                 for label, figure, unit, _ in TS_ORIGINAL},
        "scenarios": {},
        "targets": [],
    }
    started = time.perf_counter()
    failed = False
    for scenario in selected:
        print(f"{scenario.id}: {scenario.title}", file=sys.stderr, flush=True)
        entry = run_scenario(scenario, kinds, ctx)
        results["scenarios"][scenario.id] = entry
        results["targets"].extend(evaluate(scenario, entry, ["baseline", *kinds], args.quick))
        failed = failed or bool(entry["errors"])
    results["meta"]["suite_seconds"] = round(time.perf_counter() - started, 1)
    results["meta"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]

    meta = results["meta"]
    print()
    print(f"dsh-workflow benchmarks — {meta['date']} — {meta['nproc']} CPUs {meta['uname_m']}, "
          f"Python {meta['python']}, backend {meta['backend']}"
          f"{', QUICK (timings indicative only)' if args.quick else ''}")
    print(f"load average at start {meta['loadavg_at_start']}, at end {meta['loadavg_at_end']} "
          f"(a busy machine inflates every figure)")
    print("×base: the engine's cost as a multiple of the pure-Python baseline's "
          "(for runs/s: baseline rate ÷ engine rate)")
    print()
    print(render_table(table_rows(results), markdown=args.markdown))
    print()
    for sid, entry in results["scenarios"].items():
        for kind, note in entry["notes"].items():
            print(f"note ({sid}, {kind}): {note}")
    for note in notes:
        print(f"note: {note}")
    if "S10" in results["scenarios"]:
        print("S10: expected_ms (E) is the wall time the cap alone implies, ceil(N / cap) × "
              "50 ms; zero_latency_ms (Z) is the same fan-out with latency 0; 'as expected' "
              "means 0.9·E ≤ median ≤ 1.2·(E + Z) + 25 ms")
    print("TypeScript original on this machine class, for comparison:")
    print("\n".join(ts_comparison(results)))
    print(summary(results))
    print(f"suite time: {meta['suite_seconds']} s")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
        print(f"figures written to {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
