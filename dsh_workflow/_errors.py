"""Errors of the workflow seam.

Every error an engine produces is a :class:`WorkflowError` with a :class:`WorkflowErrorCode`.
The table below says who raises each code and when; all engine-produced errors are fatal
(a combinator never turns them into ``null``).

========================  ==========================================================  =====
code                      raised when                                                 where
========================  ==========================================================  =====
``SCRIPT_PARSE``          the body does not parse, or still carries                    start
                          ``export const meta``
``META_INVALID``          meta is not valid (every violation listed)                   start
``INVALID_ARGUMENT``      a malformed hook argument, per-run limit or provider         start / hook
``UNSUPPORTED_OPTION``    an ``agent()`` option that is unknown or not supported       hook
``UNSUPPORTED_SCHEMA``    an ``agent({schema})`` that is invalid, not object-rooted,   hook
                          or references outside itself
``AGENT_CAP``             the run's total-agent cap is reached                         hook
``ITEM_CAP``              ``parallel``/``pipeline`` got more items than allowed        hook
``AGENT_FAILED``          the provider raised (an infrastructure fault)                hook
``RESULT_UNSERIALIZABLE`` the script's return value is not JSON data                   result
``RESOURCE_LIMIT``        memory, stack, CPU slice or another size bound exceeded      result
``TIMEOUT``               the run's wall-clock limit passed                            result
``CANCELLED``             any hook called after the run was cancelled                  hook
``BUDGET_EXCEEDED``       ``agent()`` called (or still queued) once the run's tokens   hook
                          reached its budget
========================  ==========================================================  =====
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["WorkflowError", "WorkflowErrorCode"]


class WorkflowErrorCode(StrEnum):
    """The closed set of workflow error codes (see the module table)."""

    SCRIPT_PARSE = "SCRIPT_PARSE"
    META_INVALID = "META_INVALID"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    UNSUPPORTED_OPTION = "UNSUPPORTED_OPTION"
    UNSUPPORTED_SCHEMA = "UNSUPPORTED_SCHEMA"
    AGENT_CAP = "AGENT_CAP"
    ITEM_CAP = "ITEM_CAP"
    AGENT_FAILED = "AGENT_FAILED"
    RESULT_UNSERIALIZABLE = "RESULT_UNSERIALIZABLE"
    RESOURCE_LIMIT = "RESOURCE_LIMIT"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"


class WorkflowError(Exception):
    """An error of the workflow seam.

    ``code`` is a :class:`WorkflowErrorCode`; ``fatal`` is true for every error an engine
    produces (only a caller constructing one by hand may pass ``fatal=False``).
    ``str(error)`` is the message alone, so it can be shown to a model as it is.
    """

    def __init__(self, code: WorkflowErrorCode | str, message: str, *, fatal: bool = True) -> None:
        super().__init__(message)
        self.code = WorkflowErrorCode(code)
        self.fatal = fatal
        self.message = message

    def __repr__(self) -> str:
        return f"WorkflowError({self.code.value}, {self.message!r})"
