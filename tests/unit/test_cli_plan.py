"""``run`` and ``resume`` read their parsed options once, into :class:`RunOptions`, and build
the :class:`Plan` from those options (``_cli/plan.py``); neither value changes afterwards."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from dsh_workflow._cli.errors import CliError
from dsh_workflow._cli.main import build_parser
from dsh_workflow._cli.plan import Plan, RunOptions, plan_resume, plan_run

SCRIPT = 'export const meta = {name: "hello", description: "says hello"};\nreturn args;\n'


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with one script, as the current directory and the default store's."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DSH_WORKFLOW_STORE", raising=False)
    (tmp_path / "hello.js").write_text(SCRIPT, encoding="utf-8")
    return tmp_path


def test_the_options_are_read_once_and_typed(here: Path) -> None:
    ns = build_parser().parse_args([
        "run", "hello.js", "--args", '{"x": 1}', "--budget", "150", "--timeout", "2.5",
        "--provider", "openai", "--model", "m1", "--model-alias", "fast=m2",
        "--agents", "agents", "--workflows", "flows", "--store", "runs.db"])
    options = RunOptions.from_namespace(ns)
    assert (options.script, options.meta, options.args) == ("hello.js", None, '{"x": 1}')
    assert options.store == str(here / "runs.db")
    assert options.config.budget_tokens == 150 and options.config.run_timeout_s == 2.5
    assert options.config.model_aliases == {"fast": "m2"}
    assert options.provider_kind == "openai" and options.command_line is None
    assert options.provider_argv == ("--provider", "openai", "--model", "m1",
                                     "--model-alias", "fast=m2")
    assert dict(options.limit_flags) == {"budget_tokens": "--budget 150",
                                         "run_timeout_s": "--timeout 2.5"}
    assert (options.agents, options.workflows, options.rerun) == (("agents",), ("flows",),
                                                                  frozenset())
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.store = None  # type: ignore[misc]  # frozen: checked once, never changed


def test_a_bad_option_is_refused_when_the_options_are_read(here: Path) -> None:
    ns = build_parser().parse_args(["run", "hello.js", "--model", "m1"])
    with pytest.raises(CliError, match="--model applies only to --provider"):
        RunOptions.from_namespace(ns)


def test_run_plans_the_script_from_the_options_and_makes_the_store_folder(here: Path) -> None:
    ns = build_parser().parse_args(["run", "hello.js", "--args", '{"x": 1}',
                                    "--store", "deep/runs.db", "--max-agents", "3"])
    plan = plan_run(RunOptions.from_namespace(ns))
    assert isinstance(plan, Plan)
    assert plan.meta == {"name": "hello", "description": "says hello"}
    assert plan.body.strip() == "return args;" and plan.args == {"x": 1}
    assert plan.store_path == str(here / "deep" / "runs.db") and (here / "deep").is_dir()
    assert plan.config.max_total_agents == 3 and plan.limit_flags == {
        "max_total_agents": "--max-agents 3"}
    assert plan.resume_from is None and plan.rerun == frozenset()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.rerun = frozenset({1})  # type: ignore[misc]  # frozen


def test_run_of_a_saved_workflow_name_plans_that_workflow(here: Path) -> None:
    saved = here / "flows"
    saved.mkdir()
    (saved / "greet.js").write_text(SCRIPT.replace('"hello"', '"greet"'), encoding="utf-8")
    ns = build_parser().parse_args(["run", "greet", "--workflows", "flows", "--no-store",
                                    "--meta", json.dumps({"name": "other", "description": "d"})])
    plan = plan_run(RunOptions.from_namespace(ns))
    assert plan.meta == {"name": "other", "description": "d"} and plan.store_path is None
    assert plan.library is not None and plan.library.get("greet") is not None
    with pytest.raises(CliError, match="no file or saved workflow named 'gret'"):
        plan_run(RunOptions.from_namespace(
            build_parser().parse_args(["run", "gret", "--workflows", "flows", "--no-store"])))


def test_resume_plans_the_given_script_with_its_reruns(here: Path) -> None:
    ns = build_parser().parse_args(["resume", "abcd1234", "--rerun", "2,3", "--store", "r.db"])
    ns.provider = "echo"  # what resume_provider chooses when nothing was recorded
    plan = plan_resume(RunOptions.from_namespace(ns), meta={"name": "n", "description": "d"},
                       body="return 1", args=None, resume_from="abcd1234")
    assert plan.resume_from == "abcd1234" and plan.rerun == frozenset({2, 3})
    assert plan.store_path == str(here / "r.db") and not (here / "r.db").exists()
