"""The public surface: one import, a sorted __all__, and names that read as dsh_workflow.X."""

from __future__ import annotations

import dsh_workflow

SPEC_NAMES = {
    "WorkflowMeta", "PhaseMeta", "WorkflowStartRequest", "WorkflowRun", "WorkflowResult",
    "WorkflowError", "WorkflowErrorCode", "EngineConfig", "RunInfo", "WorkflowStarted",
    "WorkflowEnded", "PhaseStarted", "LogEmitted", "AgentStarted", "AgentEnded",
    "SubagentRequest", "SubagentResult", "Usage", "SubagentProvider", "EchoProvider",
    "OpenAIProvider", "CommandProvider", "QuickJSEngine", "WorkflowTool",
}


def test_all_is_sorted_and_complete() -> None:
    assert dsh_workflow.__all__ == sorted(dsh_workflow.__all__)
    assert set(dsh_workflow.__all__) >= SPEC_NAMES
    for name in dsh_workflow.__all__:
        assert hasattr(dsh_workflow, name), name


def test_public_classes_name_the_package() -> None:
    for name in dsh_workflow.__all__:
        obj = getattr(dsh_workflow, name)
        if isinstance(obj, type):
            assert obj.__module__ == "dsh_workflow", name


def test_error_codes_are_the_specified_set() -> None:
    assert {code.value for code in dsh_workflow.WorkflowErrorCode} == {
        "SCRIPT_PARSE", "META_INVALID", "INVALID_ARGUMENT", "UNSUPPORTED_OPTION",
        "UNSUPPORTED_SCHEMA", "AGENT_CAP", "ITEM_CAP", "AGENT_FAILED", "RESULT_UNSERIALIZABLE",
        "RESOURCE_LIMIT", "TIMEOUT", "CANCELLED", "BUDGET_EXCEEDED", "SCRIPT_ERROR"}
