"""Preparing a run of ``run`` and ``resume``: every option read and checked into a
:class:`Plan` before any event loop starts (raises :class:`~.errors.CliError`, never starts
anything).

- ``--meta`` replaces the file's leading ``export const meta = {...};`` literal (read as data
  by :mod:`dsh_workflow._metafile`); a script without either is a usage error.
- ``--args`` text that is not JSON is passed as a string (Claude Code passes a workflow's
  arguments as text); text starting with ``{``, ``[`` or ``"`` must be valid JSON; ``@FILE``
  and ``@-`` read it from a file or stdin.
- ``SCRIPT`` that is not a file but names a saved workflow runs that workflow.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from .._metafile import MetaFileError, split_meta
from .errors import CliError
from .library import add_library_option, load_library, saved_script, unknown_workflow
from .options import (
    add_engine_options,
    check_command,
    default_config,
    echo_factory,
    engine_config,
    limit_flags,
    load_agents,
    provider_factory,
)
from .stores import ensure_folder, store_path

if TYPE_CHECKING:  # loaded where used: declaring the options must stay cheap (start-up time)
    from dsh_workflow import (
        AgentRegistry,
        AnswerProvider,
        EngineConfig,
        RunStore,
        SubagentProvider,
        WorkflowEngine,
        WorkflowLibrary,
    )

__all__ = ["NO_META", "Plan", "add_run_options", "args_value", "meta_option_value",
           "no_meta_error", "plan_options", "plan_run", "script_parts", "script_source"]

NO_META = ("no meta: add `export const meta = {name, description}` at the top of the file or "
           "pass --meta")


def add_run_options(run: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``resume`` share: provider, engine, limits, output."""
    add_engine_options(run)
    add_library_option(run)
    run.add_argument("--json", action="store_true", help="print the whole result object")
    run.add_argument("--events", metavar="FILE.jsonl", help="append every event as a JSON line")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


@dataclass
class Plan:
    """Everything a run needs, checked before any event loop starts."""

    meta: dict[str, Any]
    body: str
    args: Any = None
    config: EngineConfig = field(default_factory=default_config)
    provider: Callable[[], SubagentProvider] = field(default_factory=echo_factory)
    engine: str = "quickjs"
    agents: AgentRegistry | None = None
    library: WorkflowLibrary | None = None  # saved workflows for workflow(name)
    store_path: str | None = None  # the run store file; None records nothing
    resume_from: str | None = None
    provider_argv: list[str] = field(default_factory=list)  # for the resume hint
    limit_flags: dict[str, str] = field(default_factory=dict)  # setting -> "--budget 150"
    rerun: frozenset[int] = frozenset()  # calls of resume_from that run live again
    confirmed_agents: int | None = None  # --confirm-above: the agent calls the estimate showed
    #: Who answers the run's questions (docs/durable-runs.md, "Runs that wait"): with no
    #: answerer the run parks (exit 75) when it waits on nothing but questions.
    answers: AnswerProvider | None = None
    park: bool = True

    def make_engine(self, provider: SubagentProvider, store: RunStore | None) -> WorkflowEngine:
        if self.engine == "subprocess":
            from dsh_workflow import SubprocessEngine

            return SubprocessEngine(self.config, provider=provider, pool_size=0,
                                    agents=self.agents, store=store, library=self.library,
                                    answers=self.answers, park=self.park)
        from dsh_workflow import QuickJSEngine

        return QuickJSEngine(self.config, provider=provider, agents=self.agents, store=store,
                             library=self.library, answers=self.answers, park=self.park)


def _read_text(path: str, what: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8-sig") as file:
            return file.read()
    except OSError as exc:
        raise CliError(f"cannot read {what} {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"{what} {path!r} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None


def _json_option(option: str, text: str) -> Any:
    source = _read_text(text[1:], f"{option} file") if text.startswith("@") else text
    try:
        return json.loads(source)
    except json.JSONDecodeError as exc:
        raise CliError(f"{option} is not valid JSON: {exc.msg} (line {exc.lineno}, column "
                       f"{exc.colno})") from None


def _args_option(text: str) -> Any:
    """``--args``: JSON text, ``@file`` or ``@-``; other text that is not JSON is a string."""
    if text.startswith("@") or text.lstrip()[:1] in ("{", "[", '"'):
        return _json_option("--args", text)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def script_source(path: str, meta_option: str | None,
                  fallback_meta: dict[str, Any] | None = None) -> tuple[Any, str]:
    """The meta (``--meta`` winning over the file's literal, then ``fallback_meta``; None when
    there is none) and the body of the script file."""
    source = _read_text(path, "script")
    try:
        file_meta, body = split_meta(source)
    except MetaFileError as exc:
        raise CliError(f"{path}: {exc}") from None
    meta = meta_option_value(meta_option) if meta_option is not None else file_meta
    if meta is None:
        meta = fallback_meta
    return meta, body


def script_parts(path: str, meta_option: str | None,
                 fallback_meta: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """The meta (``--meta`` winning over the file's literal, then ``fallback_meta``) and the
    body of the script file; no meta at all is a usage error, which names what is wrong with
    the body first when it does not parse (an ES ``import`` above the meta hides the meta)."""
    meta, body = script_source(path, meta_option, fallback_meta)
    if meta is None:
        no_meta_error(path, body)
    if not isinstance(meta, dict):
        raise CliError("--meta must be a JSON object like {\"name\": ..., \"description\": ...}")
    return meta, body


def no_meta_error(path: str, body: str) -> NoReturn:
    """Raise the usage error of a script file without meta: the body's own parse error first
    when it has one (its syntax error is worth more than "no meta"), alone when it is an ES
    ``import`` statement (one above the meta is why the meta was not found), else
    :data:`NO_META`."""
    from dsh_workflow import WorkflowError
    from dsh_workflow._script import check_body, import_error

    try:
        check_body(body)
    except WorkflowError as exc:
        if import_error(body) is not None:
            raise CliError(f"{path}: {exc}") from None
        raise CliError(f"{path}: {exc}; and {NO_META}") from None
    raise CliError(NO_META)


def meta_option_value(text: str) -> Any:
    """The ``--meta`` option's JSON value."""
    return _json_option("--meta", text)


def args_value(text: str) -> Any:
    """The ``--args`` option's value (see :func:`_args_option`)."""
    return _args_option(text)


def _provider_argv(ns: argparse.Namespace) -> list[str]:
    """The provider options given, as a resume command must repeat them: they decide the
    provider's identity, which is part of every journal key. A routing provider (rebuilt by
    ``resume`` from its record) has no options: the resume rebuilds it again. A ``--command``
    that carries a secret (``--api-key X``) is left out, never printed: the resume then asks
    for it."""
    from .._failure import argv_secrets

    argv: list[str] = []
    if ns.provider not in ("echo", "routing"):
        argv += ["--provider", ns.provider]
    for option, value in (("--model", ns.model), ("--base-url", ns.base_url),
                          ("--command", ns.command_line)):
        if option == "--command" and value is not None and argv_secrets(shlex.split(value)):
            continue
        if value is not None:
            argv += [option, value]
    for name, model in ns.model_alias:
        argv += ["--model-alias", f"{name}={model}"]
    return argv


def plan_options(ns: argparse.Namespace, *, meta: dict[str, Any], body: str, args: Any,
                 store: str | None, resume_from: str | None = None,
                 script_dir: str | os.PathLike[str] | None = None) -> Plan:
    """A :class:`Plan` from the run options of ``ns`` (shared by ``run`` and ``resume``);
    ``script_dir`` is where ``workflow({scriptPath})`` resolves relative paths."""
    config = engine_config(ns)
    factory = provider_factory(ns, config)
    assert factory is not None  # run offers only the base providers
    check_command(ns)
    return Plan(meta=meta, body=body, args=args, config=config,
                provider=factory, engine=ns.engine,
                agents=load_agents(ns.agents), store_path=store, resume_from=resume_from,
                provider_argv=_provider_argv(ns), limit_flags=limit_flags(ns),
                library=load_library(ns.workflows, base_dir=script_dir))


def plan_run(ns: argparse.Namespace) -> Plan:
    """Read and check everything ``run`` needs; raises :class:`CliError`. ``SCRIPT`` that is
    not a file but names a saved workflow runs that workflow."""
    if ns.script != "-" and not os.path.exists(ns.script):
        saved = load_library(ns.workflows)
        found = saved_script(ns.script, saved)
        if found is None:
            raise CliError(unknown_workflow(ns.script, saved))
        if found is not None:
            saved_meta, saved_body, saved_path = found
            meta = _json_option("--meta", ns.meta) if ns.meta is not None else saved_meta
            args = _args_option(ns.args) if ns.args is not None else None
            store = store_path(ns)
            plan = plan_options(ns, meta=meta, body=saved_body, args=args, store=store,
                                script_dir=saved_path.parent)
            if store is not None:
                ensure_folder(store)
            return plan
    meta, body = script_parts(ns.script, ns.meta)
    args = _args_option(ns.args) if ns.args is not None else None
    store = store_path(ns)
    plan = plan_options(ns, meta=meta, body=body, args=args, store=store,
                        script_dir=os.path.dirname(os.path.abspath(ns.script))
                        if ns.script != "-" else None)
    if store is not None:
        ensure_folder(store)
    return plan
