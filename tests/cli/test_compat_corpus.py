"""Workflow files written the way Claude Code users write them, run unchanged through the CLI.

Each file in ``tests/cli/compat/`` runs as a real ``dsh-workflow run`` process on the offline echo
provider with the stub agent definitions of ``tests/cli/compat/agents`` and must complete with a
sane result. The home folder is a fresh temporary one, so no definition of the machine's user
leaks in.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support import REPO, run_cli

CORPUS = REPO / "tests" / "cli" / "compat"
AGENTS = CORPUS / "agents"


def _review(value: Any) -> None:
    assert value["files"] == ["src/a.ts", "src/b.ts"] and value["reviewed"] == 2
    assert value["blocking"] == [] and value["issues"] == []


def _bug_hunt(value: Any) -> None:
    assert value["triaged"] == 3
    assert [f["module"] for f in value["findings"]] == ["auth", "billing", "search"]
    assert all("propose a fix" in f["answer"] for f in value["findings"])


def _refactor(value: Any) -> None:
    assert len(value) == 3 and all(o["ok"] for o in value)
    assert value[1]["summary"] == "echo: Rename getUsr to getUser everywhere"


def _research(value: Any) -> None:
    assert value["angles"] == ["performance", "correctness", "operational cost", "security"]
    assert value["synthesis"].startswith("echo: Synthesize")
    assert value["question"] == "Why is the build slow?"


def _gaps(value: Any) -> None:
    assert value == {"packages": 2, "gapCount": 0, "worst": None, "coverage": [None, None]}


def _triage(value: Any) -> None:
    assert [entry["id"] for entry in value["labelled"]] == [1, 2]
    assert all(entry["label"] == "bug" for entry in value["labelled"])
    assert value["escalated"] == 1  # the echo's confidence (0) is below the bar


def _docs(value: Any) -> None:
    assert sorted(value["drafts"]) == ["check", "init", "run"]
    assert value["total"] == sum(value["drafts"].values()) > 0


def _audit(value: Any) -> None:
    assert value["audited"] == ["api/login", "api/upload", "api/admin/users"]
    assert value["failed"] == 0 and value["findings"][0]["severity"] == "critical"


def _plan(value: Any) -> None:
    assert value["goal"] == "Add rate limiting"
    assert value["verified"] is True and all(step["ok"] for step in value["steps"])


def _vote(value: Any) -> None:
    assert value["votes"] == 3 and value["yes"] == 0 and value["decision"] == "reject"


def _changelog(value: Any) -> None:
    assert value.startswith("## v1.2.0..HEAD\n\necho: Turn this into a Keep a Changelog entry")


def _batches(value: Any) -> None:
    assert value["batches"] == 3 and value["migrated"] == 7
    assert [r["of"] for r in value["results"]] == [3, 3, 1]


def _ship(value: Any) -> None:
    assert [(row["issue"], row["mode"]) for row in value] == [(11, "fresh"), (12, "have-pr")]
    assert all(row["summary"] == "nothing to address" for row in value)


def _design(value: Any) -> None:
    assert [v["variant"] for v in value["variants"]] == ["A", "B"]
    assert value["dropped"] == [] and value["blocked"] == []


def _judged(value: Any) -> None:
    assert value["files"] == 2 and value["issues"] == 0 and value["ranked"] is True
    assert value["verdict"].startswith("echo: Verify the top-ranked issue")


def _timed(value: Any) -> None:
    assert value == {"checks": ["lint", "types", "unit tests"], "allTimed": True,
                     "totalMs": True, "month": 2}


DESIGN_ARGS = {"variants": [{"name": "A", "prompt": "Brutalist"}, {"name": "B", "prompt": "Soft"}],
               "routing": {"variant-builder": {"model": "opus", "effort": "high"}},
               "operatorModel": "sonnet"}

CASES: dict[str, tuple[list[str], Callable[[Any], None]]] = {
    "ship-issues": ([], _ship),
    "design-fanout": (["--args", json.dumps(DESIGN_ARGS), "--model-alias", "opus=big"], _design),
    "review-pr": (["--args", "src/a.ts src/b.ts"], _review),
    "bug-hunt": ([], _bug_hunt),
    "refactor-worktree": ([], _refactor),
    "research-fanout": (["--args", json.dumps({"question": "Why is the build slow?"})], _research),
    "test-gap-finder": (["--args", json.dumps({"packages": ["core", "cli"]})], _gaps),
    "triage-issues": (["--args", json.dumps({"issues": [
        {"id": 1, "title": "Crash on start"}, {"id": 2, "title": "Add dark mode", "body": "pls"}],
        "escalateAfter": 1}), "--model-alias", "haiku=small-model"], _triage),
    "doc-sync": ([], _docs),
    "security-audit": ([], _audit),
    "plan-then-execute": (["--args", "Add rate limiting"], _plan),
    "consensus-vote": ([], _vote),
    "changelog-writer": (["--args", "v1.2.0..HEAD"], _changelog),
    "migration-batches": ([], _batches),
    "review-judge-verify": ([], _judged),
    "timed-fanout": ([], _timed),  # timed with Date.now(): performance is absent
}

#: What ``check`` and ``run`` warn about in a corpus file (SPEC §26: Claude Code runs these,
#: so they are kept, and named where the user sees them).
WARNED = {"review-judge-verify": [
    *(f"meta.phases[{i}] is a string: taken as the phase's title" for i in range(3)),
    "meta.examples is not a recognized field: kept, not used"]}
#: What ``check`` adds to those: the script drops failed judges with .filter(Boolean).
CHECK_WARNED = {"review-judge-verify": [
    ".filter(Boolean) after parallel() drops every failed schema call without its reason; use "
    "settle(thunks) instead: one {ok, value} or {ok: false, error: {kind, message}} per thunk, "
    "e.g. (await settle(thunks)).filter(r => r.ok)"]}


def test_every_corpus_file_has_a_case() -> None:
    assert sorted(p.stem for p in CORPUS.glob("*.js")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_workflow_runs_unchanged(name: str, tmp_path: Path) -> None:
    extra, check = CASES[name]
    done = run_cli("run", CORPUS / f"{name}.js", "--agents", AGENTS, "--quiet", *extra,
                   home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    check(json.loads(done.stdout))


@pytest.mark.parametrize("name", ["review-pr", "migration-batches"])
def test_corpus_workflow_runs_on_the_subprocess_engine(name: str, tmp_path: Path) -> None:
    extra, check = CASES[name]
    done = run_cli("run", CORPUS / f"{name}.js", "--agents", AGENTS, "--engine", "subprocess",
                   "-q", *extra, home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    check(json.loads(done.stdout))


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_workflow_checks_without_warnings(name: str, tmp_path: Path) -> None:
    done = run_cli("check", CORPUS / f"{name}.js", "--agents", AGENTS, home=tmp_path)
    assert done.returncode == 0, done.stderr
    warned = sorted(line.split(": warning: ", 1)[1] for line in done.stderr.splitlines())
    assert warned == sorted(WARNED.get(name, []) + CHECK_WARNED.get(name, [])), done
    assert done.stdout.startswith("ok: " + name), done


def test_unknown_meta_keys_and_string_phases_are_warned_about_on_run(tmp_path: Path) -> None:
    done = run_cli("run", CORPUS / "review-judge-verify.js", "--agents", AGENTS, "-q",
                   "--json", home=tmp_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert sorted(warned) == sorted(f"warning: {w}" for w in WARNED["review-judge-verify"])
    assert sorted(json.loads(done.stdout)["warnings"]) == sorted(WARNED["review-judge-verify"])


def test_a_script_path_resolves_against_the_project_root(tmp_path: Path) -> None:
    """``workflow({scriptPath: '.claude/workflows/research.js'})`` in a script under
    ``scripts/``, run from the project's folder, finds the project's saved workflow."""
    project = CORPUS / "project"
    done = run_cli("run", Path("scripts") / "research-report.js", "-q", "--no-store",
                   home=tmp_path, cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    value = json.loads(done.stdout)
    assert value["researched"] == ["Why is CI slow?", "Which tests flake?"]
    assert "echo: Research this question and cite sources: Why is CI slow?" in value["report"]


IMPORTING = """\
import { rankIssues } from './lib/rank.js';

export const meta = { name: 'imports-a-sibling', description: 'uses a helper module' };

return rankIssues(await agent('list issues'));
"""


@pytest.mark.parametrize("command", ["run", "check"])
def test_an_es_import_is_named_not_taken_for_missing_meta(command: str, tmp_path: Path) -> None:
    script = tmp_path / "imports.js"
    script.write_text(IMPORTING, encoding="utf-8")
    done = run_cli(command, script, "-q" if command == "run" else "--agents", *(
        [] if command == "run" else [AGENTS]), home=tmp_path, cwd=tmp_path)
    assert done.returncode == 2, done
    assert "no meta" not in done.stderr
    assert "uses an ES `import` statement, which is not supported (line 1: " \
           "`import { rankIssues } from './lib/rank.js';`)" in done.stderr, done.stderr


# -- agent definitions through the CLI -------------------------------------------------------------


def test_without_definitions_an_agent_type_is_fatal_naming_the_known_types(tmp_path: Path) -> None:
    done = run_cli("run", CORPUS / "review-pr.js", "--args", "a.ts", "-q", home=tmp_path,
                   cwd=tmp_path)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["error"].startswith("INVALID_ARGUMENT: ")
    assert '"code-reviewer"' in result["error"] and "general-purpose" in result["error"]
    assert "(line 32, column 5)" in result["error"]  # where its agent( call starts


def test_project_and_user_definitions_are_found_without_flags(tmp_path: Path) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".claude" / "agents").mkdir(parents=True)
    (home / ".claude" / "agents").mkdir(parents=True)
    reviewer = (AGENTS / "code-reviewer.md").read_text(encoding="utf-8")
    (project / ".claude" / "agents" / "code-reviewer.md").write_text(reviewer, encoding="utf-8")
    for name in ("explorer", "implementer"):
        text = (AGENTS / f"{name}.md").read_text(encoding="utf-8")
        (home / ".claude" / "agents" / f"{name}.md").write_text(text, encoding="utf-8")
    done = run_cli("run", CORPUS / "review-pr.js", "--args", "a.ts", "-q", home=home,
                   cwd=project)
    assert done.returncode == 0, done.stderr
    done = run_cli("run", CORPUS / "bug-hunt.js", "-q", home=home, cwd=project)
    assert done.returncode == 0, done.stderr


def test_definition_model_and_alias_reach_the_provider(tmp_path: Path) -> None:
    script = tmp_path / "models.js"
    script.write_text(
        "export const meta = {name: 'models', description: 'which model answers'};\n"
        "return [await agent('a', {agentType: 'code-reviewer'}),\n"
        "        await agent('b', {model: 'haiku'}),\n"
        "        await agent('c', {agentType: 'security-auditor', model: 'exact'}),\n"
        "        await agent('d', {agentType: 'implementer'})];\n", encoding="utf-8")
    reply = f"{sys.executable} -c \"import os; print(os.environ.get('DSH_WORKFLOW_MODEL', '-'))\""
    done = run_cli("run", script, "--agents", AGENTS, "--provider", "command", "--command", reply,
                   "--model-alias", "sonnet=model-s", "--model-alias", "haiku=model-h", "-q",
                   home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [line.strip() for line in json.loads(done.stdout)] == ["model-s", "model-h", "exact", "-"]


def test_broken_definition_is_skipped_with_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "broken.md").write_text("---\nname: [unclosed\n---\nbody\n", encoding="utf-8")
    (folder / "fine.md").write_text("---\nname: fine\ndescription: ok\n---\nHi\n", encoding="utf-8")
    script = tmp_path / "s.js"
    script.write_text("export const meta = {name: 's', description: 'd'};\n"
                      "return await agent('x', {agentType: 'fine'});\n", encoding="utf-8")
    done = run_cli("run", script, "--agents", folder, "-q", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "broken.md" in done.stderr and "Warning: skipped agent definition" in done.stderr


def test_missing_agents_folder_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("run", CORPUS / "doc-sync.js", "--agents", tmp_path / "nope", "-q",
                   home=tmp_path)
    assert done.returncode == 2 and "--agents" in done.stderr and "not a folder" in done.stderr


@pytest.mark.parametrize("alias", ["sonnet", "=x", "x="])
def test_bad_model_alias_is_a_usage_error(alias: str, tmp_path: Path) -> None:
    done = run_cli("run", CORPUS / "doc-sync.js", "--model-alias", alias, "-q", home=tmp_path)
    assert done.returncode == 2 and "NAME=MODEL" in done.stderr


@pytest.mark.parametrize(("text", "expected"), [
    ("fix the login bug", "fix the login bug"), ("42", 42), ('"quoted"', "quoted"),
    ('{"a": [1]}', {"a": [1]})])
def test_args_text_that_is_not_json_is_a_string(text: str, expected: Any, tmp_path: Path) -> None:
    script = tmp_path / "s.js"
    script.write_text("export const meta = {name: 's', description: 'd'};\nreturn args;\n",
                      encoding="utf-8")
    done = run_cli("run", script, "--args", text, "-q", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == expected
