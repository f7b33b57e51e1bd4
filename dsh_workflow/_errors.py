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
``SCRIPT_ERROR``          the script's own uncaught error, or a stall                 result
``RESOURCE_LIMIT``        memory, stack, CPU slice or another size bound exceeded      result
``TIMEOUT``               the run's wall-clock limit passed                            result
``CANCELLED``             any hook called after the run was cancelled                  hook
``BUDGET_EXCEEDED``       ``agent()`` called (or still queued) once the run's tokens   hook
                          reached its budget
========================  ==========================================================  =====

**The code of a result.** A run that did not complete carries one of these codes as
``WorkflowResult.error_code``: the code of the error that ended it, which its text starts with
as ``CODE: …``. Four ends have a text with no code prefix (the texts are kept as they were);
their code is fixed here, in one place:

==============================================  ==========================  ===================
how the run ended (text without a prefix)       ``error_code``              why
==============================================  ==========================  ===================
cancelled (``workflow run cancelled: …``),       ``CANCELLED``               what the code means
also by the engine shutting down
the script's own uncaught error, a throw of      ``SCRIPT_ERROR``            the script's fault,
``null``/``undefined`` or of something that                                  its own code
cannot be rendered, or a stall (an ``await``
nothing will ever settle)
the engine itself failed: its runtime could      ``AGENT_FAILED``            an infrastructure
not start or broke, the sandbox process died,                                fault, not the
hung or broke the protocol, the run store                                    script's: retrying
failed, or a bug in the host                                                 may help
==============================================  ==========================  ===================

So ``CANCELLED`` is every cancelled run's code, ``SCRIPT_ERROR`` means "the script failed by
itself" (``RESULT_UNSERIALIZABLE`` stays for a value JSON cannot hold: a BigInt, a cycle),
and ``AGENT_FAILED`` without its prefix means "the engine failed". :data:`SCRIPT_FAILED` and
:data:`ENGINE_FAILED` name the last two for the code that sets or reads them. Runs stored by
releases before ``SCRIPT_ERROR`` existed carry ``RESULT_UNSERIALIZABLE`` with an unprefixed
text for the script's own error; reading them gives ``SCRIPT_ERROR``
(``dsh_workflow._result.stored_code``).
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
    SCRIPT_ERROR = "SCRIPT_ERROR"


#: The code of a result whose run failed by the script's own doing, its text unprefixed (the
#: script's uncaught error, or a stall): see the module docstring.
SCRIPT_FAILED = WorkflowErrorCode.SCRIPT_ERROR
#: The code of a result whose run failed because the engine did, its text unprefixed.
ENGINE_FAILED = WorkflowErrorCode.AGENT_FAILED


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
