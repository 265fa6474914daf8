"""How the session counts a request: exact BPE where one exists, else a calibrated estimate.

Fit decisions must not send a request over the real window. For OpenAI model families the
profile names their encoding (``o200k_base``, ``cl100k_base``) and, with the ``bpe`` extra
installed, every item is counted exactly. Otherwise items are counted with the lexical estimate
times a safety factor calibrated on real coding-agent trajectories (see ``LEXICAL_MARGIN``), and
the factor rises when a provider reports more prompt tokens than were estimated.

Neither is a provider's billed count: tokens of hidden chat framing and tool-schema rendering
are approximated by the per-item and per-call constants below.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from .._core.errors import CounterUnavailableError
from .._core.tokens import BpeCounter, LexicalCounter, TokenCounter

__all__ = [
    "CALL_OVERHEAD",
    "CHARS_PER_TOKEN_FLOOR",
    "FOREIGN_BPE_MARGIN",
    "ITEM_OVERHEAD",
    "LEXICAL_MARGIN",
    "MAX_LEARNED_MARGIN",
    "TokenMeter",
    "learned_factor",
    "meter_for",
]

#: Tokens of framing around every item (role markers, separators), as chat formats bill them.
ITEM_OVERHEAD = 4
#: Tokens of structure around one tool call or result (ids, type markers).
CALL_OVERHEAD = 8
#: Lexical estimate -> o200k safety factor, calibrated on the 70 real trajectories of
#: ``benchmarks/agent_replay.py`` (listings and hashes cost o200k far more than their lexical
#: count); without the ``bpe`` extra, fit decisions take the larger of this times the lexical
#: count and one token per :data:`CHARS_PER_TOKEN_FLOOR` characters.
LEXICAL_MARGIN = 1.10
CHARS_PER_TOKEN_FLOOR = 3.0
#: For a model whose tokenizer is not published (Claude, DeepSeek, ...), o200k counts times this.
FOREIGN_BPE_MARGIN = 1.10
#: A provider's own usage can raise the factor, up to this, when the estimate ran low.
MAX_LEARNED_MARGIN = 2.0


@dataclass
class TokenMeter:
    """Counts text for fit decisions. ``exact`` is true when the counter is the model's own BPE."""

    counter: TokenCounter
    exact: bool
    factor: float = 1.0

    @property
    def name(self) -> str:
        if self.exact:
            return self.counter.name
        return f"{self.counter.name} x{self.factor:.2f}"

    def count(self, text: str) -> int:
        if not text:
            return 0
        return self._finish(self.counter.count(text), len(text))

    def parts(self) -> tuple[Callable[[str], int], Callable[[int, int], int]]:
        """``(raw, finish)`` with ``count(text) == finish(raw(text), len(text))``: a text made
        of parts whose raw counts add up is counted from its parts' raw counts and lengths."""
        return self.counter.count, self._finish

    def _finish(self, raw: int, chars: int) -> int:
        if not chars or self.exact:
            return raw
        estimate = math.ceil(raw * self.factor)
        if isinstance(self.counter, LexicalCounter):
            # One lexical token can be a 40-character hash or a whole base64 blob.
            estimate = max(estimate, math.ceil(chars / CHARS_PER_TOKEN_FLOOR))
        return estimate


def learned_factor(factor: float, estimated: int, reported: int, *, applied: bool = True) -> float:
    """``factor`` raised to match a provider's ``reported`` prompt size when the estimate
    (``estimated``, counted with the factor ``applied``, else without it) ran low, up to
    :data:`MAX_LEARNED_MARGIN`; never lowered."""
    if estimated <= 0 or reported <= estimated:
        return factor
    ratio = reported / estimated
    return min(MAX_LEARNED_MARGIN, max(factor, factor * ratio if applied else ratio))


@functools.lru_cache(maxsize=4)
def _bpe(encoding: str) -> BpeCounter:
    # Loading a vocabulary builds its rank tables (about 0.1 s); every session shares one.
    return BpeCounter(encoding)


def meter_for(encoding: str | None) -> TokenMeter:
    """The meter for a model whose profile names ``encoding`` (or none).

    With the ``bpe`` extra: exact counts in the model's encoding, or o200k times
    :data:`FOREIGN_BPE_MARGIN` for a model whose tokenizer is unpublished. Without it: the lexical
    estimate with its calibrated margin and character floor.
    """
    try:
        counter = _bpe(encoding or "o200k_base")
    except CounterUnavailableError:
        return TokenMeter(LexicalCounter(), exact=False, factor=LEXICAL_MARGIN)
    if encoding:
        return TokenMeter(counter, exact=True)
    return TokenMeter(counter, exact=False, factor=FOREIGN_BPE_MARGIN)
