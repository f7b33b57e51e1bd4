"""Each provider describes its children in one line for the tool's description (docs/embedding.md, "The
model-facing tool"): the model, tools or none, files or none, and what happens to an invalid
structured answer."""

from __future__ import annotations

from pathlib import Path

from dsh_workflow import CommandProvider, EchoProvider, OpenAIProvider, RoutingProvider
from dsh_workflow._subagent import MAX_DESCRIPTION_CHARS, provider_description


def one_line(text: str) -> None:
    assert "\n" not in text and text.strip() == text and 0 < len(text) <= MAX_DESCRIPTION_CHARS


def test_echo_has_no_model_no_tools_no_files() -> None:
    text = EchoProvider().description
    one_line(text)
    assert "no model" in text and "no tools, no files" in text


def test_openai_names_its_model_and_its_repair() -> None:
    text = OpenAIProvider(base_url="http://127.0.0.1:9/v1", model="gpt-test", api_key="k"
                          ).description
    one_line(text)
    assert "model gpt-test" in text and "opts.model" in text
    assert "no tools, no files" in text
    assert "re-asked once" in text


def test_command_names_its_program_folder_and_that_it_does_not_repair(tmp_path: Path) -> None:
    text = CommandProvider(["/opt/bin/claude", "-p"], cwd=tmp_path).description
    one_line(text)
    assert "claude" in text and "/opt/bin" not in text
    assert "its own model, tools and files" in text and tmp_path.name in text
    assert "not re-asked" in text
    assert "the host's working folder" in CommandProvider(["agent"]).description


def test_routing_lists_its_routes_and_each_route_describes_itself() -> None:
    echo = EchoProvider()
    command = CommandProvider(["agent"])
    routing = RoutingProvider({"offline": echo, "cli": command}, default="offline")
    one_line(routing.description)
    assert routing.description == "routes cli, offline (default offline); opts.provider picks one"
    assert routing.route_descriptions() == {"cli": command.description,
                                            "offline": echo.description}


def test_provider_description_folds_cuts_and_tolerates_providers_without_one() -> None:
    class Plain:
        pass

    class Wordy:
        description = "line one\n  line two " + "x" * 400

    assert provider_description(Plain()) is None
    text = provider_description(Wordy())
    assert text is not None
    one_line(text)
    assert text.startswith("line one line two x") and text.endswith("…")
    assert len(text) == MAX_DESCRIPTION_CHARS
    # Plain is no provider (no run()); only its description is read here
    routing = RoutingProvider({"p": Plain()}, default="p")  # type: ignore[dict-item]  # on purpose
    assert routing.route_descriptions() == {"p": None}
