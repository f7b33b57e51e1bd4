"""Saved workflows on the command line (docs/embedding.md, "Saved workflows and `workflow()`"): list,
run NAME, save, workflow() from run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from _support import REPO, run_cli


def cli(cwd: Path, home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, cwd=cwd, home=home, timeout=60)


def saved(folder: Path, file: str, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(f"export const meta = {{ name: '{name}', description: 'about {name}' }};\n"
                    + body, "utf-8")
    return path


def test_list_run_by_name_and_workflow_from_a_script(tmp_path: Path) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    saved(project / ".claude" / "workflows", "s.js", "summarize",
          "return await parallel((args?.items ?? ['x']).map(i => () => agent('sum ' + i)));")
    saved(home / ".claude" / "workflows", "u.js", "from-home", "return 'home';")
    (project / ".claude" / "workflows" / "broken.js").write_text("return 1", "utf-8")
    listed = cli(project, home, "list")
    assert listed.returncode == 0, listed.stderr
    assert "summarize" in listed.stdout and "about summarize" in listed.stdout
    assert "from-home" in listed.stdout
    assert "broken.js" in listed.stderr and "export const meta" in listed.stderr
    as_json = json.loads(cli(project, home, "list", "--json").stdout)
    assert [w["name"] for w in as_json["workflows"]] == ["from-home", "summarize"]
    assert as_json["problems"][0]["path"].endswith("broken.js")

    by_name = cli(project, home, "run", "summarize", "--args", '{"items": ["a"]}', "-q",
                  "--no-store")
    assert by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout) == ["echo: sum a"]

    caller = saved(project, "caller.js", "caller",
                   "return [await workflow('summarize', {items: ['b']}),"
                   " await workflow({scriptPath: '.claude/workflows/s.js'})];")
    nested = cli(project, home, "run", str(caller), "-q", "--no-store")
    assert nested.returncode == 0, nested.stderr
    assert json.loads(nested.stdout) == [["echo: sum b"], ["echo: sum x"]]

    missing = cli(project, home, "run", "no-such-thing", "--no-store")
    assert missing.returncode == 2 and "no-such-thing" in missing.stderr


def test_save_writes_a_workflow_that_runs_by_name(tmp_path: Path) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    script = saved(project, "job.js", "job", "return await agent('do ' + args.what);")
    store = tmp_path / "runs.sqlite3"
    ran = cli(project, home, "run", str(script), "--args", '{"what": "it"}', "--store", str(store),
              "-q")
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(cli(project, home, "runs", "--json", "--store", str(store)).stdout)[0]["id"]
    done = cli(project, home, "save", run_id, "--name", "saved-job", "--store", str(store))
    assert done.returncode == 0, done.stderr
    target = project / ".dsh-workflow" / "workflows" / "saved-job.js"
    assert target.exists() and "saved-job" in target.read_text("utf-8")
    again = cli(project, home, "save", run_id, "--name", "saved-job", "--store", str(store))
    assert again.returncode == 2 and "--force" in again.stderr
    rerun = cli(project, home, "run", "saved-job", "--args", '{"what": "that"}', "-q",
                "--no-store")
    assert rerun.returncode == 0 and json.loads(rerun.stdout) == "echo: do that"
    other = cli(project, home, "save", run_id, "--to", str(tmp_path / "elsewhere"),
                "--store", str(store))
    assert other.returncode == 0 and (tmp_path / "elsewhere" / "job.js").exists()
    unknown = cli(project, home, "save", "nope", "--store", str(store))
    assert unknown.returncode == 2


def test_the_example_saved_workflow_calls_another(tmp_path: Path) -> None:
    done = cli(REPO, tmp_path, "run", "review-with-context", "--workflows",
               str(REPO / "examples" / "workflows"), "--args", '{"files": ["a.py", "b.py"]}',
               "-q", "--no-store")
    assert done.returncode == 0, done.stderr
    value = json.loads(done.stdout)
    assert "Summarize a.py" in value["overview"] and "Summarize b.py" in value["overview"]
    listed = cli(REPO, tmp_path, "list", "--workflows", str(REPO / "examples" / "workflows"))
    assert "review-with-context" in listed.stdout and "summarize-files" in listed.stdout
