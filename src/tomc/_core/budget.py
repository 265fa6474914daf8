"""The default memory budget, and the ceiling on any budget."""

from __future__ import annotations

import math

__all__ = [
    "MAX_BUDGET_TOKENS",
    "MIN_BUDGET",
    "clamp_budget",
    "default_budget",
    "default_budget_ratio",
]

MIN_BUDGET = 1024
#: Budgets above this (a trillion tokens, far beyond any context window) are treated as this,
#: so any int works and the record share stays exact in floating point.
MAX_BUDGET_TOKENS = 10**12
_FLAT_UNTIL = 10_000
_SLIDE_UNTIL = 1_000_000
_HIGH, _LOW = 0.80, 0.60


def default_budget_ratio(input_tokens: int) -> float:
    """80% up to 10,000 tokens, sliding log-linearly to 60% at 1,000,000 and beyond."""
    if input_tokens <= _FLAT_UNTIL:
        return _HIGH
    if input_tokens >= _SLIDE_UNTIL:
        return _LOW
    position = math.log10(input_tokens / _FLAT_UNTIL) / math.log10(_SLIDE_UNTIL / _FLAT_UNTIL)
    return _HIGH - (_HIGH - _LOW) * position


def default_budget(input_tokens: int) -> int:
    """The memory budget used when none is given: a share of the history, at least 1,024."""
    if input_tokens < 0:
        raise ValueError("input_tokens must be >= 0")
    return max(MIN_BUDGET, math.floor(input_tokens * default_budget_ratio(input_tokens)))


def clamp_budget(budget: int) -> int:
    """``budget`` limited to :data:`MAX_BUDGET_TOKENS` (what a result then reports)."""
    return min(budget, MAX_BUDGET_TOKENS)
