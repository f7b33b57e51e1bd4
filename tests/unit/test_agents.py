"""AgentRegistry: Claude-Code-style agent definition files (Markdown with YAML front matter)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import (
    AgentDefinition,
    AgentRegistry,
    WorkflowError,
    WorkflowErrorCode,
)
from dsh_workflow._agents import parse_agent_file


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_definition_is_read_from_front_matter_and_body(tmp_path: Path) -> None:
    write(tmp_path, "reviewer.md", "---\nname: code-reviewer\ndescription: Reviews diffs\n"
                                   "model: sonnet\ntools: Read, Grep,  Glob\ncolor: red\n---\n\n"
                                   "You review code.\n\nBe brief.\n")
    registry = AgentRegistry([tmp_path])
    definition = registry.get("code-reviewer")
    assert definition == AgentDefinition(name="code-reviewer", description="Reviews diffs",
                                         system_prompt="You review code.\n\nBe brief.",
                                         model="sonnet", tools=("Read", "Grep", "Glob"))
    assert registry.origin("code-reviewer") == str(tmp_path / "reviewer.md")
    assert registry.names == ("code-reviewer", "general-purpose")
    assert registry.problems == ()
    assert registry["code-reviewer"] is definition and len(registry) == 2
    assert list(registry.definitions) == ["code-reviewer", "general-purpose"]
    assert [d.name for d in registry] == ["code-reviewer", "general-purpose"]
    with pytest.raises(KeyError):
        registry["nobody"]


def test_tools_as_a_list_and_inherited_model(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "---\nname: impl\ntools:\n  - Read\n  - Edit\nmodel: inherit\n---\nGo.\n")
    definition = AgentRegistry([tmp_path]).resolve("impl")
    assert definition.tools == ("Read", "Edit") and definition.model is None
    assert definition.description == ""


def test_no_tools_means_unrestricted(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "---\nname: x\n---\n")
    assert AgentRegistry([tmp_path]).resolve("x").tools is None


def test_unquoted_description_with_colons_is_read_as_written(tmp_path: Path) -> None:
    description = "Use this agent when: the user asks 🔍 for a review. <example>Context: a PR</example>"
    write(tmp_path, "a.md", f"---\nname: r\ndescription: {description}\n---\nBody\n")
    assert AgentRegistry([tmp_path]).resolve("r").description == description


def test_a_file_without_a_name_is_named_by_its_file(tmp_path: Path) -> None:
    write(tmp_path, "db-expert.md", "---\ndescription: knows SQL\n---\nSQL!\n")
    assert AgentRegistry([tmp_path]).resolve("db-expert").system_prompt == "SQL!"


def test_first_folder_wins_and_missing_folders_are_empty(tmp_path: Path) -> None:
    project, user = tmp_path / "project", tmp_path / "user"
    write(project, "r.md", "---\nname: r\n---\nproject\n")
    write(user, "r.md", "---\nname: r\n---\nuser\n")
    write(user, "only-user.md", "---\nname: u\n---\nuser only\n")
    registry = AgentRegistry([tmp_path / "missing", project, user])
    assert registry.resolve("r").system_prompt == "project"
    assert registry.resolve("u").system_prompt == "user only"
    assert AgentRegistry([user, project]).resolve("r").system_prompt == "user"


def test_general_purpose_is_built_in_and_may_be_redefined(tmp_path: Path) -> None:
    builtin = AgentRegistry([]).resolve("general-purpose")
    assert builtin.system_prompt == "" and builtin.model is None
    write(tmp_path, "gp.md", "---\nname: general-purpose\n---\nMine.\n")
    assert AgentRegistry([tmp_path]).resolve("general-purpose").system_prompt == "Mine."


@pytest.mark.parametrize(("text", "reason"), [
    ("no front matter\n", "no YAML front matter"),
    ("---\nname: x\n", "not closed"),
    ("---\nname: [x\n---\n", "does not parse"),
    ("---\n- a\n- b\n---\n", "mapping"),
    ("---\nname: x\ntools: {a: 1}\n---\n", "'tools'"),
    ("---\nname: {a: 1}\n---\n", "'name' must be a string"),
    ("---\nname: deep\nx: " + "[" * 20000 + "]" * 20000 + "\n---\n", "nested too deeply"),
    ("---\nname: deep\nx: " + "{a: " * 20000 + "1" + "}" * 20000 + "\n---\n",
     "nested too deeply"),
    ("---\n" + "".join(" " * i + f"k{i}:\n" for i in range(1000)) + "---\n",
     "nested too deeply"),
    ("---\nname: deep\nx:\n  " + "- " * 20000 + "x\n---\n", "nested too deeply"),
    ("---\ndescription: a: b\nx: " + "[" * 20000 + "\n---\n", "nested too deeply"),
])
def test_unusable_files_are_skipped_and_reported(tmp_path: Path, text: str, reason: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    bad = write(tmp_path, "bad.md", text)
    write(tmp_path, "good.md", "---\nname: good\n---\nfine\n")
    with caplog.at_level(logging.WARNING, logger="dsh_workflow.agents"):
        registry = AgentRegistry([tmp_path])
    assert "good" in registry
    [problem] = registry.problems
    assert problem.path == str(bad) and reason in problem.reason
    assert str(bad) in caplog.text
    with pytest.raises(ValueError, match=r"bad\.md"):
        AgentRegistry([tmp_path], strict=True)


def test_unknown_type_lists_the_known_types() -> None:
    registry = AgentRegistry.from_definitions([AgentDefinition(name="b"), AgentDefinition(name="a")])
    with pytest.raises(WorkflowError) as caught:
        registry.resolve("zzz")
    assert caught.value.code is WorkflowErrorCode.INVALID_ARGUMENT
    assert '"zzz"' in caught.value.message and "a, b, general-purpose" in caught.value.message


def test_default_paths_are_project_then_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    write(tmp_path / "home" / ".claude" / "agents", "u.md", "---\nname: shared\n---\nuser\n")
    write(tmp_path / "proj" / ".claude" / "agents", "p.md", "---\nname: shared\n---\nproject\n")
    write(tmp_path / "extra", "e.md", "---\nname: shared\n---\nextra\n")
    assert AgentRegistry.default_paths(cwd=tmp_path / "proj") == [
        tmp_path / "proj" / ".claude" / "agents", tmp_path / "home" / ".claude" / "agents"]
    assert AgentRegistry.default(cwd=tmp_path / "proj").resolve("shared").system_prompt == "project"
    assert AgentRegistry.default([tmp_path / "extra"], cwd=tmp_path / "proj").resolve(
        "shared").system_prompt == "extra"
    monkeypatch.chdir(tmp_path / "proj")
    assert AgentRegistry.default().resolve("shared").system_prompt == "project"


def test_engines_refuse_something_that_is_not_a_registry() -> None:
    from dsh_workflow import EchoProvider, QuickJSEngine, SubprocessEngine

    for engine in (QuickJSEngine, SubprocessEngine):
        with pytest.raises(TypeError, match="AgentRegistry"):
            engine(provider=EchoProvider(), agents={"a": "b"})  # type: ignore[arg-type]  # deliberately wrong


@given(name=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)
       .filter(lambda s: s.strip() == s and s.strip()),
       body=st.text(st.characters(blacklist_categories=["Cs"]), max_size=200))
def test_any_quoted_name_and_body_round_trip(name: str, body: str) -> None:
    import json

    text = f"---\nname: {json.dumps(name, ensure_ascii=False)}\n---\n{body}"
    definition = parse_agent_file(text, fallback_name="f")
    assert definition.name == name
    assert definition.system_prompt == body.strip()
