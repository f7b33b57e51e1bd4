"""Options, checked without an engine or an event loop.

Two sets: an ``agent()`` call's options as the host receives them (untrusted JSON, validated in
``_agent_options.py``), and the command line's engine, limit and provider options
(``_cli/options.py``), which are all checked before any event loop starts.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import (
    CommandProvider,
    EchoProvider,
    EngineConfig,
    QuickJSEngine,
    SubprocessEngine,
)
from dsh_workflow._agent_options import (
    EFFORTS,
    ISOLATIONS,
    SUPPORTED_OPTIONS,
    AgentOptions,
    default_label,
    parse_agent_options,
)
from dsh_workflow._cli import options as cli
from dsh_workflow._cli.errors import CliError
from dsh_workflow._errors import WorkflowError, WorkflowErrorCode

INVALID = WorkflowErrorCode.INVALID_ARGUMENT
OBJECT_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=16)


def _refused(raw: object, code: WorkflowErrorCode = INVALID) -> str:
    """The message of the error ``raw`` is refused with; it must carry ``code``."""
    with pytest.raises(WorkflowError) as caught:
        parse_agent_options(raw)
    assert caught.value.code is code, caught.value
    assert caught.value.fatal
    return caught.value.message


# ---- agent() options --------------------------------------------------------------------


def test_no_options_and_null_options_are_the_defaults() -> None:
    assert parse_agent_options(None) == AgentOptions()
    assert parse_agent_options({}) == AgentOptions()
    assert parse_agent_options(dict.fromkeys(SUPPORTED_OPTIONS)) == AgentOptions()


def test_every_supported_option_is_accepted_and_named_in_python() -> None:
    raw = {"label": "L", "phase": "P", "schema": OBJECT_SCHEMA, "model": "m", "provider": "p",
           "effort": "high", "agentType": "reviewer", "isolation": "worktree",
           "failure": "throw"}
    assert set(raw) == set(SUPPORTED_OPTIONS)
    assert parse_agent_options(raw) == AgentOptions(
        label="L", phase="P", schema=OBJECT_SCHEMA, model="m", provider="p", effort="high",
        agent_type="reviewer", isolation="worktree", failure="throw")


@pytest.mark.parametrize(("value", "throw"), [("null", False), ("throw", True), (None, False)])
def test_the_failure_option_chooses_null_or_throw(value: object, throw: bool) -> None:
    assert parse_agent_options({"failure": value}).throw is throw


@pytest.mark.parametrize("value", ["raise", "", 1, True, ["throw"]])
def test_an_invalid_failure_option_is_an_invalid_argument(value: object) -> None:
    message = _refused({"failure": value})
    assert message.startswith('agent() option "failure" must be one of "null", "throw"'), message


def test_the_schema_is_returned_as_given() -> None:
    schema = {"type": "object"}
    assert parse_agent_options({"schema": schema}).schema is schema


@pytest.mark.parametrize(("raw", "kind"), [
    ([], "an array"), ("x", "a string"), (3, "a number"), (1.5, "a number"),
    (True, "a boolean"),
])
def test_options_that_are_not_an_object_are_invalid(raw: object, kind: str) -> None:
    assert _refused(raw) == f"agent() options must be an object (got {kind})"


def test_an_unknown_option_is_unsupported_and_the_message_lists_the_supported_ones() -> None:
    message = _refused({"label": "ok", "temperature": 0.2},
                       WorkflowErrorCode.UNSUPPORTED_OPTION)
    assert message.startswith('agent() option "temperature" is not recognized')
    for name in SUPPORTED_OPTIONS:
        assert name in message


def test_the_first_unknown_key_decides_before_any_value_is_checked() -> None:
    message = _refused({"label": 3, "b": 1, "a": 2}, WorkflowErrorCode.UNSUPPORTED_OPTION)
    assert message.startswith('agent() option "b"')


def test_option_names_are_case_sensitive() -> None:
    # Python's spelling is not the script's.
    _refused({"agent_type": "x"}, WorkflowErrorCode.UNSUPPORTED_OPTION)
    _refused({"Label": "x"}, WorkflowErrorCode.UNSUPPORTED_OPTION)


@pytest.mark.parametrize("key", ["label", "phase", "model", "provider", "agentType"])
@pytest.mark.parametrize(("value", "kind"), [
    (1, "a number"), (True, "a boolean"), ([], "an array"), ({}, "an object"),
])
def test_string_options_must_be_strings(key: str, value: object, kind: str) -> None:
    assert _refused({key: value}) == f'agent() option "{key}" must be a string (got {kind})'


@pytest.mark.parametrize("key", ["model", "provider", "agentType"])
def test_names_are_at_most_256_characters(key: str) -> None:
    assert getattr(parse_agent_options({key: "n" * 256}),
                   "agent_type" if key == "agentType" else key) == "n" * 256
    message = _refused({key: "n" * 257})
    assert message == (f'agent() option "{key}" is 257 characters; a {key} name is at most 256')


@pytest.mark.parametrize("key", ["label", "phase"])
def test_labels_and_phases_have_no_length_bound_here(key: str) -> None:
    # The runtime cuts what it shows; the host only checks the type.
    assert getattr(parse_agent_options({key: "x" * 10_000}), key) == "x" * 10_000


def test_an_empty_agent_type_is_invalid() -> None:
    assert _refused({"agentType": ""}) == (
        'agent() option "agentType" must be a non-empty agent type name')


@pytest.mark.parametrize("effort", EFFORTS)
def test_every_effort_is_accepted(effort: str) -> None:
    assert parse_agent_options({"effort": effort}).effort == effort


def test_the_efforts_and_isolations_are_the_documented_ones() -> None:
    assert EFFORTS == ("low", "medium", "high", "xhigh", "max")
    assert ISOLATIONS == ("worktree",)


@pytest.mark.parametrize(("value", "shown"), [
    ("extreme", '"extreme"'), ("HIGH", '"HIGH"'), ("", '""'), (3, "a number"),
    (["low"], "an array"), (False, "a boolean"),
])
def test_another_effort_is_invalid_and_the_message_names_the_choices(value: object,
                                                                     shown: str) -> None:
    assert _refused({"effort": value}) == (
        'agent() option "effort" must be one of "low", "medium", "high", "xhigh", "max" '
        f"(got {shown})")


@pytest.mark.parametrize(("value", "shown"), [
    ("worktree", None), ("container", '"container"'), (1, "a number"),
])
def test_isolation_is_worktree_or_nothing(value: object, shown: str | None) -> None:
    if shown is None:
        assert parse_agent_options({"isolation": value}).isolation == "worktree"
    else:
        assert _refused({"isolation": value}) == (
            f'agent() option "isolation" must be one of "worktree" (got {shown})')


def test_a_long_wrong_choice_is_shown_cut_to_40_characters() -> None:
    message = _refused({"effort": "e" * 100})
    assert message.endswith('(got "' + "e" * 39 + '…")')
    exactly = _refused({"effort": "e" * 40})
    assert exactly.endswith('(got "' + "e" * 40 + '")')


def test_the_checks_run_in_their_documented_order() -> None:
    # type, then length, then emptiness, then choices, then the schema
    base: dict[str, Any] = {"schema": {"type": "string"}, "effort": "bad"}
    _refused({"schema": {"type": "string"}}, WorkflowErrorCode.UNSUPPORTED_SCHEMA)
    assert '"agentType" must be a non-empty' in _refused({**base, "agentType": ""})
    assert '"model" is 300 characters' in _refused({**base, "agentType": "",
                                                    "model": "m" * 300})
    assert '"label" must be a string' in _refused({**base, "model": "m" * 300, "label": 1})
    assert '"effort" must be one of' in _refused(base)


def test_the_schema_option_goes_through_the_schema_gate() -> None:
    message = _refused({"schema": {"type": "string"}}, WorkflowErrorCode.UNSUPPORTED_SCHEMA)
    assert "schema" in message and "object" in message
    assert "JSON object" in _refused({"schema": 3}, WorkflowErrorCode.UNSUPPORTED_SCHEMA)
    _refused({"schema": []}, WorkflowErrorCode.UNSUPPORTED_SCHEMA)


def test_without_check_schema_the_caller_runs_the_gate() -> None:
    bad = {"type": "string"}
    assert parse_agent_options({"schema": bad}, check_schema=False).schema is bad
    # ... but every other option is still checked
    with pytest.raises(WorkflowError):
        parse_agent_options({"schema": bad, "effort": "x"}, check_schema=False)


@given(_json)
def test_any_json_options_are_accepted_or_refused_with_a_workflow_error(raw: Any) -> None:
    try:
        parse_agent_options(raw)
    except WorkflowError as exc:
        assert exc.code in (INVALID, WorkflowErrorCode.UNSUPPORTED_OPTION,
                            WorkflowErrorCode.UNSUPPORTED_SCHEMA)
        assert exc.message.startswith("agent() ")


@given(st.dictionaries(st.sampled_from(SUPPORTED_OPTIONS), _json, max_size=len(SUPPORTED_OPTIONS)))
def test_any_values_of_supported_options_never_raise_anything_else(raw: dict[str, Any]) -> None:
    try:
        options = parse_agent_options(raw)
    except WorkflowError as exc:
        # the message names the option at fault
        if exc.code is WorkflowErrorCode.UNSUPPORTED_SCHEMA:
            assert "schema" in raw and exc.message.startswith("agent() schema ")
        else:
            assert exc.code is INVALID
            assert any(exc.message.startswith(f'agent() option "{key}" ') for key in raw)
    else:
        for key, value in raw.items():
            name = "agent_type" if key == "agentType" else key
            assert getattr(options, name) == value


# ---- default_label ----------------------------------------------------------------------


@pytest.mark.parametrize(("prompt", "label"), [
    ("", ""),
    ("Review the diff", "Review the diff"),
    ("first line\nsecond line", "first line"),
    ("\nafter an empty first line", ""),
    ("x" * 48, "x" * 48),
    ("x" * 49, "x" * 47 + "…"),
    ("y" * 60 + "\nmore", "y" * 47 + "…"),
])
def test_the_default_label_is_the_first_line_cut_to_48_characters(prompt: str,
                                                                  label: str) -> None:
    assert default_label(prompt) == label


@given(st.text())
def test_the_default_label_is_a_prefix_of_the_first_line(prompt: str) -> None:
    label = default_label(prompt)
    first = prompt.split("\n", 1)[0]
    assert len(label) <= 48 and "\n" not in label
    assert label == first or (label.endswith("…") and first.startswith(label[:-1])
                              and len(label) == 48)


# ---- the command line's argparse types --------------------------------------------------


@pytest.mark.parametrize(("text", "value"), [("1", 1), ("42", 42), (" 7 ", 7)])
def test_count_takes_whole_numbers_from_one(text: str, value: int) -> None:
    assert cli.count(text) == value


@pytest.mark.parametrize(("text", "message"), [
    ("0", "must be at least 1, got 0"), ("-3", "must be at least 1, got -3"),
    ("1.5", "expected a whole number, got '1.5'"), ("", "expected a whole number, got ''"),
    ("ten", "expected a whole number, got 'ten'"),
])
def test_count_refuses_the_rest(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        cli.count(text)


@pytest.mark.parametrize(("text", "value"), [("0", 0.0), ("1.5", 1.5), ("1e3", 1000.0)])
def test_seconds_are_finite_and_not_negative(text: str, value: float) -> None:
    assert cli.seconds(text) == value


@pytest.mark.parametrize(("text", "message"), [
    ("-1", "must be a finite number >= 0, got '-1'"),
    ("inf", "must be a finite number >= 0, got 'inf'"),
    ("nan", "must be a finite number >= 0, got 'nan'"),
    ("soon", "expected a number of seconds, got 'soon'"),
])
def test_seconds_refuse_the_rest(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        cli.seconds(text)


def test_positive_seconds_refuse_zero_too() -> None:
    assert cli.positive_seconds("0.001") == 0.001
    with pytest.raises(argparse.ArgumentTypeError, match="must be greater than 0"):
        cli.positive_seconds("0")
    with pytest.raises(argparse.ArgumentTypeError, match="finite number >= 0"):
        cli.positive_seconds("-0.5")


@pytest.mark.parametrize(("lowest", "text", "ok"), [
    (0, "0", True), (1, "0", False), (1, "1", True), (1, "65535", True), (1, "65536", False),
    (1, "-1", False),
])
def test_ports_are_between_lowest_and_65535(lowest: int, text: str, ok: bool) -> None:
    port = cli.port_type(lowest)
    if ok:
        assert port(text) == int(text)
    else:
        with pytest.raises(argparse.ArgumentTypeError,
                           match=f"must be between {lowest} and 65535, got {int(text)}"):
            port(text)
    with pytest.raises(argparse.ArgumentTypeError, match="expected a port number"):
        port("http")


@given(st.text())
def test_the_argparse_types_raise_only_argument_type_errors(text: str) -> None:
    for parse in (cli.count, cli.seconds, cli.positive_seconds, cli.port_type(1)):
        try:
            parse(text)
        except argparse.ArgumentTypeError:
            pass


# ---- the command line's option set ------------------------------------------------------


def _parser(**kwargs: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t")
    cli.add_engine_options(parser, **kwargs)
    return parser


def _parse(*argv: str) -> argparse.Namespace:
    return _parser().parse_args(list(argv))


def test_the_defaults_are_echo_on_quickjs_with_no_limits_chosen() -> None:
    ns = _parse()
    assert (ns.provider, ns.engine, ns.agents, ns.model_alias) == ("echo", "quickjs", [], [])
    assert ns.max_concurrency is ns.timeout is ns.budget is ns.echo_latency is None
    assert cli.engine_config(ns) == EngineConfig()


@pytest.mark.parametrize(("argv", "message"), [
    (["--max-concurrency", "0"], "must be at least 1, got 0"),
    (["--budget", "lots"], "expected a whole number"),
    (["--timeout", "0"], "must be greater than 0"),
    (["--agent-timeout", "-1"], "finite number >= 0"),
    (["--echo-latency", "inf"], "finite number >= 0"),
    (["--engine", "v8"], "invalid choice: 'v8'"),
    (["--provider", "sampling"], "invalid choice: 'sampling'"),
    (["--model-alias", "sonnet"], "expected NAME=MODEL, got 'sonnet'"),
    (["--model-alias", "=gpt"], "expected NAME=MODEL, got '=gpt'"),
    (["--model-alias", "sonnet= "], "expected NAME=MODEL"),
])
def test_bad_values_are_usage_errors_naming_the_option(argv: list[str], message: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse(*argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert argv[0] in err and message in err


def test_a_command_may_offer_its_own_providers() -> None:
    ns = _parser(providers=("echo", "sampling")).parse_args(["--provider", "sampling"])
    assert ns.provider == "sampling"
    assert cli.provider_factory(ns, EngineConfig()) is None


def test_the_limits_become_the_engine_config() -> None:
    ns = _parse("--max-concurrency", "3", "--max-agents", "9", "--budget", "500",
                "--timeout", "2.5", "--agent-timeout", "1", "--model-alias", " opus = big ",
                "--model-alias", "s=small")
    assert cli.engine_config(ns) == EngineConfig(
        max_concurrent_agents=3, max_total_agents=9, budget_tokens=500, run_timeout_s=2.5,
        agent_timeout_s=1.0, model_aliases={"opus": "big", "s": "small"})


def test_limits_the_config_refuses_are_a_cli_error_naming_the_field() -> None:
    ns = _parse()
    ns.max_concurrency = 0  # argparse would refuse it; engine_config checks it again
    with pytest.raises(CliError, match=r"^invalid limits: max_concurrent_agents: .*1"):
        cli.engine_config(ns)


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "m"], "--model applies only to --provider openai, claude or codex"),
    (["--base-url", "http://x"], "--base-url applies only to --provider openai"),
    (["--command", "cat"], "--command applies only to --provider command, claude or codex"),
    (["--provider", "openai", "--model", "m", "--echo-latency", "1"],
     "--echo-latency applies only to --provider echo"),
])
def test_provider_options_apply_only_to_their_provider(argv: list[str], message: str) -> None:
    with pytest.raises(CliError) as caught:
        cli.provider_factory(_parse(*argv), EngineConfig())
    assert str(caught.value) == message


def test_the_echo_factory_builds_an_echo_provider_with_the_latency() -> None:
    factory = cli.provider_factory(_parse("--echo-latency", "0.25"), EngineConfig())
    assert factory is not None
    provider = factory()
    assert isinstance(provider, EchoProvider)
    assert factory() is not provider  # one provider per run


@pytest.mark.parametrize(("argv", "message"), [
    (["--provider", "command"], '--provider command needs --command "program and arguments"'),
    (["--provider", "command", "--command", ""], "--provider command needs --command"),
    (["--provider", "command", "--command", "agent 'unclosed"],
     "--command \"agent 'unclosed\": No closing quotation"),
    (["--provider", "command", "--command", "   "], "--command '   ': argv must be a non-empty"),
])
def test_a_command_provider_needs_a_usable_command(argv: list[str], message: str) -> None:
    with pytest.raises(CliError) as caught:
        cli.provider_factory(_parse(*argv), EngineConfig())
    assert str(caught.value).startswith(message)


def test_the_command_is_split_like_a_shell_would() -> None:
    factory = cli.provider_factory(_parse("--provider", "command", "--command",
                                          "my-agent --json 'two words'"), EngineConfig())
    assert factory is not None
    provider = factory()
    assert isinstance(provider, CommandProvider)
    assert list(provider.argv) == ["my-agent", "--json", "two words"]


def test_openai_settings_are_checked_before_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DSH_WORKFLOW_OPENAI_MODEL", "OPENAI_MODEL", "DSH_WORKFLOW_OPENAI_BASE_URL",
                 "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(CliError, match="needs a model"):
        cli.provider_factory(_parse("--provider", "openai"), EngineConfig())
    with pytest.raises(CliError, match="base_url must be an http"):
        cli.provider_factory(_parse("--provider", "openai", "--model", "m", "--base-url",
                                    "ftp://x"), EngineConfig())
    assert cli.provider_factory(_parse("--provider", "openai", "--model", "m"),
                                EngineConfig()) is not None


def test_load_agents_refuses_a_folder_that_is_not_one(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(CliError) as caught:
        cli.load_agents([str(missing)])
    assert str(caught.value) == f"--agents {str(missing)!r} is not a folder"


def test_load_agents_reads_the_folders_first_and_warns_of_unusable_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "reviewer.md").write_text("---\nname: reviewer\ndescription: reviews\n---\nBe "
                                        "careful.\n", encoding="utf-8")
    (agents / "broken.md").write_text("no front matter", encoding="utf-8")
    registry = cli.load_agents([str(agents)])
    assert "reviewer" in registry.names
    err = capsys.readouterr().err
    assert err.startswith("Warning: skipped agent definition ") and "broken.md" in err


def test_engine_setup_checks_everything_and_builds_the_chosen_engine(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    setup = cli.engine_setup(_parse("--engine", "subprocess", "--max-agents", "5"))
    assert setup.engine == "subprocess" and setup.config.max_total_agents == 5
    assert setup.library is None  # only a command with --workflows has saved workflows
    assert isinstance(setup.make_engine(EchoProvider()), SubprocessEngine)
    quick = cli.engine_setup(_parse())
    assert isinstance(quick.make_engine(EchoProvider()), QuickJSEngine)
    with pytest.raises(CliError, match="applies only to"):
        cli.engine_setup(_parse("--model", "m"))


def test_engine_setup_gives_a_library_when_the_command_has_workflows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    ns = _parse()
    ns.workflows = [str(tmp_path)]
    setup = cli.engine_setup(ns)
    assert setup.library is not None
    assert setup.library.paths[0] == tmp_path
