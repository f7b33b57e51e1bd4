"""The provider contract (docs/providers.md, "The provider contract"): each provider declares
``ProviderInfo``; records and identities are secret-free and the secrets are declared; the
command line's one provider table rebuilds every kind from its record; values chosen by a
script stay the values of their flags; Codex's TOML strings hold every character."""

from __future__ import annotations

import argparse
import re
import string
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import (
    AgentDefinition,
    ClaudeCodeProvider,
    CodexProvider,
    CommandProvider,
    EchoProvider,
    EngineConfig,
    OpenAIProvider,
    ProviderInfo,
    RoutingProvider,
    SubagentRequest,
    SubagentResult,
)
from dsh_workflow._cli import options as cli
from dsh_workflow._cli.errors import CliError
from dsh_workflow._engines.host.calls import default_model
from dsh_workflow._failure import REDACTED, argv_secrets, redact_argv
from dsh_workflow._provider_options import provider_options
from dsh_workflow._providers.agent_cli import toml_string
from dsh_workflow._subagent import provider_info
from dsh_workflow._tool.texts import tool_description

PACKAGE = Path(__file__).resolve().parents[2] / "dsh_workflow"
SECRET = "hunter2-very-secret"


# -- the argv rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "redacted", "secrets"), [
    (["agent", "--api-key", SECRET, "--model", "m"],
     ["agent", "--api-key", REDACTED, "--model", "m"], (SECRET,)),
    (["agent", "--token", SECRET], ["agent", "--token", REDACTED], (SECRET,)),
    (["agent", f"--foo-key={SECRET}"], ["agent", f"--foo-key={REDACTED}"], (SECRET,)),
    (["agent", f"--client_secret={SECRET}"], ["agent", f"--client_secret={REDACTED}"], (SECRET,)),
    (["curl", "-H", f"Authorization: Bearer {SECRET}"],
     ["curl", "-H", f"Authorization: {REDACTED}"], (f"Bearer {SECRET}",)),
    (["agent", "--max-tokens", "1000", "--keyfile", "k.pem", "--monkey", "x"],
     ["agent", "--max-tokens", "1000", "--keyfile", "k.pem", "--monkey", "x"], ()),
    (["agent", "--password", SECRET, "--echo", SECRET],
     ["agent", "--password", REDACTED, "--echo", REDACTED], (SECRET,)),
])
def test_argv_secrets_and_redaction(argv: list[str], redacted: list[str],
                                    secrets: tuple[str, ...]) -> None:
    assert redact_argv(argv) == redacted
    assert argv_secrets(argv) == secrets


# long enough not to be a part of the flags around it
_SECRET_TEXT = st.text(string.ascii_letters + string.digits + "-_./+=", min_size=16).filter(
    lambda secret: not secret.startswith("-"))


_FORMS: dict[str, Callable[[str], list[str]]] = {
    "--api-key": lambda secret: ["--api-key", secret],
    "--token": lambda secret: ["--token", secret],
    "--my-key=": lambda secret: [f"--my-key={secret}"],
    "--access-token=": lambda secret: [f"--access-token={secret}"],
    "Authorization": lambda secret: ["-H", f"Authorization: Bearer {secret}"],
}


@given(secret=_SECRET_TEXT, form=st.sampled_from(sorted(_FORMS)),
       before=st.lists(st.sampled_from(["-v", "--model", "m", "--json"]), max_size=3))
def test_a_flagged_secret_never_survives_redaction(secret: str, form: str,
                                                   before: list[str]) -> None:
    argv = ["agent", *before, *_FORMS[form](secret)]
    out = redact_argv(argv)
    assert len(out) == len(argv)
    assert secret not in " ".join(out)
    assert any(secret in found for found in argv_secrets(argv))


def test_the_package_has_one_redaction_marker() -> None:
    defined = [path for path in PACKAGE.rglob("*.py")
               if re.search(r"^REDACTED\s*=", path.read_text(encoding="utf-8"), re.MULTILINE)]
    assert [p.name for p in defined] == ["_failure.py"]
    for path in PACKAGE.rglob("*.py"):
        assert "[redacted]" not in path.read_text(encoding="utf-8"), path


# -- every provider declares itself --------------------------------------------------------------


def test_built_in_providers_declare_secret_free_records_and_their_secrets() -> None:
    openai = OpenAIProvider(model="m1", base_url="http://u:pw-123456@127.0.0.1:9/v1",
                            api_key=SECRET)
    command = CommandProvider(["agent", "--api-key", SECRET, "--model", "x"])
    claude = ClaudeCodeProvider(model="sonnet", extra_args=["--token", SECRET])
    codex = CodexProvider("/opt/codex", model="gpt-5")
    echo = EchoProvider(latency_s=0.5)
    expected: list[tuple[Any, str, str | None, dict[str, Any], tuple[str, ...]]] = [
        (echo, "echo", None, {"kind": "echo", "latency_s": 0.5}, ()),
        (openai, "openai", "m1", {"kind": "openai", "model": "m1",
                                  "base_url": f"http://{REDACTED}@127.0.0.1:9/v1"}, (SECRET,)),
        (command, "command", None,
         {"kind": "command", "command": ["agent", "--api-key", REDACTED, "--model", "x"]},
         (SECRET,)),
        (claude, "claude", "sonnet", {"kind": "claude", "executable": "claude", "model": "sonnet",
                                      "extra_args": ["--token", REDACTED]}, (SECRET,)),
        (codex, "codex", "gpt-5", {"kind": "codex", "executable": "/opt/codex", "model": "gpt-5",
                                   "extra_args": []}, ()),
    ]
    for provider, kind, model, record, secrets in expected:
        info = provider.info
        assert isinstance(info, ProviderInfo) and provider_info(provider) is not None
        assert (info.kind, info.default_model, info.record, info.secrets) == (
            kind, model, record, secrets), kind
        assert SECRET not in info.identity and "pw-123456" not in info.identity
        assert provider_options(provider) == {**record, "identity": info.identity}


def test_an_endpoint_key_in_the_url_or_a_header_is_a_secret() -> None:
    provider = OpenAIProvider(model="m", base_url=f"https://h.example/v1?key={SECRET}&alt=json",
                              api_key="sk-not-this-one-0123", extra_headers={"api-key": "zz-9876",
                                                                             "X-Trace": "on"})
    info = provider.info
    assert info.secrets == ("sk-not-this-one-0123", "zz-9876", SECRET)
    assert info.record["base_url"] == f"https://h.example/v1?key={REDACTED}&alt=json"
    assert SECRET not in info.identity


def test_routing_declares_its_routes_models_and_descriptions() -> None:
    routing = RoutingProvider({"fast": EchoProvider(), "big": ClaudeCodeProvider(model="opus")},
                              default="fast")
    info = routing.info
    assert info.kind == "routing" and info.default_model is None
    assert info.record["default"] == "fast"
    assert info.record["models"] == {"big": "opus", "fast": None}
    descriptions = info.record["descriptions"]
    assert isinstance(descriptions, dict) and set(descriptions) == {"big", "fast"}
    assert default_model(routing, None) is None and default_model(routing, "big") == "opus"


class Declared:
    """A user's provider with its own declaration and misleading attributes."""

    model = "not-this"
    routes: ClassVar[dict[str, Any]] = {"x": EchoProvider()}
    info = ProviderInfo(kind="mine", identity="mine v1", default_model="my-model",
                        description="my own children", record={"kind": "mine"})

    async def run(self, request: SubagentRequest) -> SubagentResult:
        return SubagentResult(text="ok")


class Plain:
    model = "not-this-either"

    async def run(self, request: SubagentRequest) -> SubagentResult:
        return SubagentResult(text="ok")


def test_the_layers_read_only_the_declaration() -> None:
    assert default_model(Declared(), None) == "my-model"
    assert default_model(Plain(), None) is None  # no declaration: no model guessed
    assert provider_options(Declared()) == {"kind": "mine", "identity": "mine v1"}
    described = tool_description(EngineConfig(), Declared(), None, 50_000, durable=False)
    assert "Children: my own children." in described and "Provider routes" not in described
    default = provider_info(Plain())
    assert default.kind == default.identity == f"{__name__}.Plain"
    assert provider_options(Plain()) == {"kind": default.kind, "identity": default.identity}


def test_mcp_sampling_declares_itself() -> None:
    pytest.importorskip("mcp")
    from dsh_workflow.integrations.mcp.sampling import SamplingProvider

    info = SamplingProvider(object(), max_tokens=77).info  # type: ignore[arg-type]  # never used
    assert info.kind == "sampling" and info.default_model is None
    assert info.identity == "dsh_workflow.integrations.mcp.sampling.SamplingProvider"
    assert info.record == {"kind": "sampling", "max_tokens": 77}
    assert info.description == SamplingProvider.description


# -- the command line's one provider table ---------------------------------------------------------


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="t")
    cli.add_engine_options(parser)
    return parser.parse_args(list(argv))


def test_the_table_covers_every_provider_the_command_line_offers() -> None:
    assert set(cli.PROVIDER_KINDS) == {*cli.BASE_PROVIDERS, "routing"}


def test_a_recorded_routing_provider_is_rebuilt_route_by_route() -> None:
    routing = RoutingProvider({"fast": EchoProvider(latency_s=0.5),
                               "deep": ClaudeCodeProvider("/opt/claude", model="opus",
                                                          extra_args=["--verbose"])},
                              default="deep")
    recorded = provider_options(routing)
    ns = _parse()
    ns.provider = "routing"
    for attr, value in cli.PROVIDER_KINDS["routing"].from_record(recorded).items():
        setattr(ns, attr, value)
    rebuilt = cli.provider_factory(ns, EngineConfig())
    assert rebuilt is not None and provider_options(rebuilt()) == recorded
    ns.provider_record = {**recorded, "routes": {"x": {"kind": "mine"}}, "default": "x"}
    with pytest.raises(CliError, match="route 'x' is a provider the command line cannot"):
        cli.provider_factory(ns, EngineConfig())


@pytest.mark.parametrize("argv", [
    ["--echo-latency", "0.25"],
    ["--provider", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"],
    ["--provider", "command", "--command", "my-agent --json 'two words'"],
    ["--provider", "claude", "--model", "sonnet"],
    ["--provider", "claude", "--command", "/opt/claude --permission-mode acceptEdits"],
    ["--provider", "codex", "--model", "gpt-5"],
])
def test_every_kind_rebuilds_the_same_provider_from_its_record(argv: list[str]) -> None:
    ns = _parse(*argv)
    factory = cli.provider_factory(ns, EngineConfig())
    assert factory is not None
    recorded = provider_options(factory())
    entry = cli.PROVIDER_KINDS[recorded["kind"]]
    fresh = _parse()
    fresh.provider = recorded["kind"]
    for attr, value in entry.from_record(recorded).items():
        setattr(fresh, attr, value)
    rebuilt = cli.provider_factory(fresh, EngineConfig())
    assert rebuilt is not None
    assert provider_options(rebuilt()) == recorded


# -- values cannot become flags --------------------------------------------------------------------


@given(model=st.text(min_size=1).filter(lambda t: "\x00" not in t),
       prompt=st.text().filter(lambda t: "\x00" not in t))
def test_script_values_stay_the_values_of_their_flags(model: str, prompt: str) -> None:
    agent = AgentDefinition(name="a", system_prompt="-" + prompt if prompt else "-x",
                            tools=["-rf"])
    request = SubagentRequest(prompt="p", label="l", run_id="r", seq=1, model="-" + model,
                              effort="high", agent=agent)
    claude = ClaudeCodeProvider()._argv(request)
    codex = CodexProvider()._argv(request)
    for argv, fixed in ((claude, 4), (codex, 4)):
        # after the fixed flags, every element is one of the preset's own flags
        assert all(arg.startswith("--") and "=" in arg for arg in argv[fixed:] if arg != "-"), argv
    assert f"--model=-{model}" in claude and f"--model=-{model}" in codex


@given(st.text())
def test_codex_toml_strings_hold_every_character(text: str) -> None:
    emitted = toml_string(text)
    assert "\n" not in emitted and "\r" not in emitted
    parsed = tomllib.loads(f"developer_instructions = {emitted}")["developer_instructions"]
    assert parsed == text


def test_a_lone_surrogate_becomes_the_replacement_character() -> None:
    emitted = toml_string("half \ud83d emoji, whole \U0001F600")
    assert tomllib.loads(f"k = {emitted}")["k"] == "half \ufffd emoji, whole \U0001F600"
    assert "\\ud83d" not in emitted.lower()


def test_the_codex_override_is_the_escaped_system_prompt() -> None:
    agent = AgentDefinition(name="a", system_prompt='say "hi" \\ \U0001F600\x1b')
    argv = CodexProvider()._argv(SubagentRequest(prompt="p", label="l", run_id="r", seq=1,
                                                 agent=agent))
    (override,) = [a for a in argv if a.startswith("--config=developer_instructions=")]
    value = override.removeprefix("--config=")
    assert tomllib.loads(value)["developer_instructions"] == agent.system_prompt
