"""``run`` and ``check``: run a workflow script, or check it without running it (docs/cli.md).

Contract:

- ``run SCRIPT.js`` starts one workflow under trio on a :class:`~dsh_workflow.QuickJSEngine`,
  or with ``--engine subprocess`` on a :class:`~dsh_workflow.SubprocessEngine` (the script
  runs in a locked-down child process). What it reads is checked first (:mod:`.plan`), then it
  runs (:mod:`.execute`): progress on stderr only; stdout receives exactly one JSON document
  (indent 2, non-ASCII kept): the value when the run completed, else — and always with
  ``--json`` — the result object ``{value, stop_reason, error, error_code, agents_started,
  run_id}`` (:mod:`.output`).
- ``check SCRIPT.js`` validates the meta and proves the body parses, running nothing; it also
  prints warnings (``SCRIPT.js:LINE:COL: warning: ...`` on stderr, see :mod:`.lint`) that do
  not change its exit code.
- Agent definitions: ``run`` and ``check`` load ``--agents DIR`` folders (in the order given),
  then ``.claude/agents`` under the current directory, then ``~/.claude/agents``; a definition
  file that cannot be used is skipped with a warning on stderr; a ``--agents`` folder that does
  not exist is a usage error. ``--model-alias NAME=MODEL`` (repeatable) maps model names.
- Durable runs: ``run`` records the run in a run store (see :mod:`.stores` for the file;
  ``--no-store`` turns it off).

Only the public API is used, plus ``check_body`` and ``parse_meta`` (the engine's own checks, so
``check`` reports exactly what ``start()`` would) and the provider classes.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from .commands import Subcommands
from .errors import EXIT_OK, CliError
from .estimate import add_estimate_options
from .options import add_agent_options, load_agents
from .output import write_stdout
from .plan import RunOptions, add_run_options, no_meta_error, plan_run, script_source
from .stores import add_store_option

__all__ = ["command_check", "command_run", "register"]


def register(commands: Subcommands) -> None:
    """Add ``run`` and ``check`` to the ``dsh-workflow`` subparsers."""
    run = commands.add_parser("run", help="run a workflow, progress on stderr, result on stdout",
                              description="Run a workflow. stdout gets the value as JSON (the "
                              "whole result object with --json or when the run did not complete).")
    run.add_argument("script", metavar="SCRIPT.js")
    run.add_argument("--args", metavar="JSON|@FILE", help="the script's `args` (JSON text, "
                     "@file.json, or @- for stdin)")
    run.add_argument("--meta", metavar="JSON|@FILE", help="meta object; replaces the file's "
                     "`export const meta`")
    add_run_options(run)
    add_estimate_options(run)
    add_store_option(run, can_disable=True)
    run.set_defaults(handler=command_run)
    check = commands.add_parser("check", help="validate meta and script without running it")
    check.set_defaults(handler=command_check)
    check.add_argument("script", metavar="SCRIPT.js")
    check.add_argument("--meta", metavar="JSON|@FILE", help="meta object; replaces the file's")
    add_agent_options(check)


def command_run(ns: argparse.Namespace) -> int:
    from .execute import run_plan

    if ns.estimate:  # docs/embedding.md, "Cost in money": offline, so nothing is recorded
        from .estimate import estimate, print_estimate

        ns.no_store = True
        print_estimate(estimate(plan_run(RunOptions.from_namespace(ns)), ns.model),
                       as_json=ns.json)
        return EXIT_OK
    plan = plan_run(RunOptions.from_namespace(ns))
    if ns.confirm_above is not None:
        from .estimate import confirm, estimate

        found = estimate(plan, ns.model)
        confirm(found, ns.confirm_above, yes=ns.yes)
        plan = dataclasses.replace(plan, confirmed_agents=found.agents)  # binds the real run
    return run_plan(plan, ns)


def command_check(ns: argparse.Namespace) -> int:
    from dsh_workflow import WorkflowError
    from dsh_workflow._meta import meta_warnings, parse_meta
    from dsh_workflow._script import check_body

    from .lint import lint

    meta, body = script_source(ns.script, ns.meta)
    if meta is None:
        no_meta_error(ns.script, body)
    if not isinstance(meta, dict):
        raise CliError("--meta must be a JSON object like {\"name\": ..., \"description\": ...}")
    try:
        checked = parse_meta(meta)
        check_body(body)
    except WorkflowError as exc:
        raise CliError(f"{ns.script}: {exc}") from None
    noted_meta = meta_warnings(checked)
    for note in noted_meta:
        sys.stderr.write(f"{ns.script}: warning: {note}\n")
    warnings = [*noted_meta, *lint(body, agents=load_agents(ns.agents))]
    for warning in warnings[len(noted_meta):]:
        sys.stderr.write(f"{ns.script}:{warning}\n")
    sys.stderr.flush()
    noted = f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""
    write_stdout(f"ok: {checked.name}: meta is valid and the script parses{noted}\n")
    return EXIT_OK
