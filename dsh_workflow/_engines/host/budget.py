"""A run's accounting: the tokens and dollars its children reported spending, against its
budgets."""

from __future__ import annotations

from ..._subagent import Usage

__all__ = ["Spend"]


class Spend:
    """The tokens a run's children reported, and its budget (``None``: unlimited).

    Only the host counts: the script's ``budget`` global is told the total, never trusted.
    """

    __slots__ = ("budget", "budget_usd", "cache_read_tokens", "cache_write_tokens", "cost_usd",
                 "input_tokens", "output_tokens", "unpriced")

    def __init__(self, budget: int | None, budget_usd: float | None = None) -> None:
        self.budget = budget
        self.budget_usd = budget_usd  # dollars the run may spend (None: unlimited)
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0
        self.cost_usd: float | None = None  # the sum of the known costs (None: none known)
        self.unpriced = 0  # children that reported tokens but no known cost

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def count(self, usage: Usage | None) -> bool:
        """Add a child's reported usage; True when the tokens or dollars spent grew."""
        if usage is None:
            return False
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        self.unpriced += usage.unpriced
        if usage.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + usage.cost_usd
            return True
        return usage.input_tokens + usage.output_tokens > 0

    def exhausted(self) -> bool:
        """True once a budget (tokens or dollars, if any) is spent: no further child may
        start."""
        return (self.budget is not None
                and self.input_tokens + self.output_tokens >= self.budget) \
            or self._dollars_spent()

    def _dollars_spent(self) -> bool:
        return self.budget_usd is not None and self.cost_usd is not None \
            and self.cost_usd >= self.budget_usd

    def remaining(self) -> int | None:
        """Tokens left under the budget (None: unlimited); a child's ``max_output_tokens``."""
        if self.budget is None:
            return None
        return self.budget - self.input_tokens - self.output_tokens

    def refusal_message(self) -> str:
        """Why ``agent()`` is refused once the budget is spent (the dollar budget's words when
        that is the one spent)."""
        if self._dollars_spent() and not (self.budget is not None and self.total >= self.budget):
            return (f"agent() refused: this run has spent its dollar budget (budget_usd="
                    f"${self.budget_usd:g}; spent ${self.cost_usd:.4f}) — no further agents "
                    "can start; return what the run has so far, or raise budget_usd")
        return (f"agent() refused: this run has spent its token budget (budget_tokens="
                f"{self.budget}; spent {self.total} tokens) — "
                "no further agents can start; return what the run has so far, or raise "
                "budget_tokens")

    def usage(self) -> Usage | None:
        """The run's usage for its result (None when nothing was reported)."""
        if not (self.input_tokens or self.output_tokens or self.cost_usd is not None):
            return None
        return Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                     cache_read_tokens=self.cache_read_tokens,
                     cache_write_tokens=self.cache_write_tokens, cost_usd=self.cost_usd)
