"""Seam models: meta validation, config bounds, the result invariant."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dsh_workflow import (
    EngineConfig,
    PhaseMeta,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowMeta,
    WorkflowResult,
)
from dsh_workflow._meta import meta_warnings, parse_meta


def test_meta_accepts_names_and_aliases_and_dumps_by_alias() -> None:
    by_alias = WorkflowMeta.model_validate({"name": "a", "description": "d", "whenToUse": "w"})
    by_name = WorkflowMeta(name="a", description="d", when_to_use="w")
    assert by_alias == by_name
    assert by_name.model_dump()["whenToUse"] == "w"
    assert WorkflowMeta(name="a", description="d", phases=[PhaseMeta(title="t")]).phases


def test_meta_lists_every_violation_in_one_message() -> None:
    with pytest.raises(WorkflowError) as caught:
        parse_meta({"description": 7, "extra": True, "phases": [{"title": "Scan"}, 5]})
    error = caught.value
    assert error.code is WorkflowErrorCode.META_INVALID
    for part in ("meta.name must be a non-empty string", "meta.description must be a non-empty",
                 "meta.phases[1] must be an object or a string (the title)"):
        assert part in error.message
    assert "extra" not in error.message  # an unknown key is no violation


@pytest.mark.parametrize("bad", [None, "x", [], 3])
def test_meta_must_be_an_object(bad: object) -> None:
    with pytest.raises(WorkflowError, match="meta must be an object"):
        parse_meta(bad)


def test_meta_phase_fields() -> None:
    with pytest.raises(WorkflowError) as caught:
        parse_meta({"name": "n", "description": "d", "whenToUse": 3,
                    "phases": [{"title": "", "order": 1, "detail": 9}]})
    text = caught.value.message
    assert "meta.whenToUse must be a string" in text
    assert "meta.phases[0].title must be a non-empty string" in text
    assert "order" not in text
    assert "meta.phases[0].detail must be a string" in text


def test_unknown_meta_keys_are_kept_and_warned_about() -> None:
    """SPEC §26: Claude Code runs scripts with ``meta.examples``; the key is kept and named."""
    meta = parse_meta({"name": "n", "description": "d", "examples": ["one", {"two": 2}],
                       "phases": [{"title": "Scan", "order": 1}]})
    assert meta.model_dump(exclude_none=True) == {
        "name": "n", "description": "d", "examples": ["one", {"two": 2}],
        "phases": [{"title": "Scan", "order": 1}]}
    assert meta_warnings(meta) == ("meta.examples is not a recognized field: kept, not used",
                                   "meta.phases[0].order is not a recognized field: kept, not used")
    assert meta_warnings(parse_meta({"name": "n", "description": "d",
                                     "phases": [{"title": "Scan"}]})) == ()


def test_string_phases_are_titles_with_a_warning() -> None:
    meta = parse_meta({"name": "n", "description": "d", "phases": ["Review", "Judge", "Verify"]})
    assert [phase.title for phase in meta.phases or ()] == ["Review", "Judge", "Verify"]
    assert meta_warnings(meta) == tuple(
        f"meta.phases[{i}] is a string: taken as the phase's title" for i in range(3))
    with pytest.raises(WorkflowError, match=r"meta.phases\[0\].title must be a non-empty string"):
        parse_meta({"name": "n", "description": "d", "phases": [""]})


def test_config_defaults_and_bounds() -> None:
    config = EngineConfig()
    assert (config.max_concurrent_agents, config.max_total_agents, config.max_items_per_call) \
        == (16, 1000, 4096)
    assert config.memory_limit_bytes == 64 * 1024 * 1024
    assert config.stack_limit_bytes == 1024 * 1024
    assert config.slice_cpu_limit_s == 5.0 and config.dispose_grace_s == 5.0
    assert config.run_timeout_s is None and config.agent_timeout_s is None
    for bad in ({"max_concurrent_agents": 0}, {"max_total_agents": 0}, {"slice_cpu_limit_s": 0},
                {"bogus": 1}, {"memory_limit_bytes": 10}):
        with pytest.raises(ValidationError):
            EngineConfig(**bad)


def test_result_error_present_exactly_when_not_completed() -> None:
    assert WorkflowResult(stop_reason="completed", value=1).error is None
    with pytest.raises(ValidationError):
        WorkflowResult(stop_reason="error")
    with pytest.raises(ValidationError):
        WorkflowResult(stop_reason="completed", error="x")
    with pytest.raises(ValidationError):
        WorkflowResult(stop_reason="cancelled", error="x", value=1)
