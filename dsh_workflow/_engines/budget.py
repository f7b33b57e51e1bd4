"""A run's token accounting: what its children reported spending, against its budget."""

from __future__ import annotations

from .._subagent import Usage

__all__ = ["Spend"]


class Spend:
    """The tokens a run's children reported, and its budget (``None``: unlimited).

    Only the host counts: the script's ``budget`` global is told the total, never trusted.
    """

    __slots__ = ("budget", "input_tokens", "output_tokens")

    def __init__(self, budget: int | None) -> None:
        self.budget = budget
        self.input_tokens = 0
        self.output_tokens = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def count(self, usage: Usage | None) -> bool:
        """Add a child's reported usage; True when the tokens spent grew."""
        if usage is None:
            return False
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        return usage.input_tokens + usage.output_tokens > 0

    def exhausted(self) -> bool:
        """True once the budget (if any) is spent: no further child may start."""
        return self.budget is not None and self.input_tokens + self.output_tokens >= self.budget

    def remaining(self) -> int | None:
        """Tokens left under the budget (None: unlimited); a child's ``max_output_tokens``."""
        if self.budget is None:
            return None
        return self.budget - self.input_tokens - self.output_tokens

    def refusal_message(self) -> str:
        """Why ``agent()`` is refused once the budget is spent."""
        return (f"agent() refused: this run has spent its token budget (budget_tokens="
                f"{self.budget}; spent {self.total} tokens) — "
                "no further agents can start; return what the run has so far, or raise "
                "budget_tokens")

    def usage(self) -> Usage | None:
        """The run's usage for its result (None when nothing was reported)."""
        if not (self.input_tokens or self.output_tokens):
            return None
        return Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)
