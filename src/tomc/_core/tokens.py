"""Token counters, and what a row costs against a budget.

A counter is anything with ``name: str`` and ``count(text) -> int``. The built-in ones are the
lexical estimate (default) and exact OpenAI BPE counts (:mod:`tomc._core.bpe`).

The packer charges every row (a record or a source line, newline-terminated) its
:func:`row_costs` and checks the budget against their sum, so that sum must be what the
memory really costs:

- the lexical count is additive over lines (no token spans a line break), and its
  :func:`safe_cost` adds a per-line character floor, so it is additive too;
- BPE pre-tokens can span a line break (see :meth:`tomc._core.bpe.BpeCounter.joins`); the packer
  counts such joined rows together (:mod:`tomc._core.packing`), so the memory's count is exact;
- a custom counter must be additive over newline-terminated rows, or the final re-count
  raises :class:`tomc.BudgetError`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from operator import not_
from typing import Protocol, runtime_checkable

from .bpe import BPE_ENCODINGS, BpeCounter
from .errors import InvalidOptionError
from .lexicon import (
    ASCII_LEXICAL_PATTERN,
    ASCII_WORD_BYTES,
    ASCII_WORDS_AND_BREAKS,
    LEXICAL_PATTERN,
    lexical_pattern,
)

__all__ = [
    "BPE_ENCODINGS",
    "CHARS_PER_TOKEN_FLOOR",
    "COUNTER_NAMES",
    "BpeCounter",
    "LexicalCounter",
    "TokenCounter",
    "get_counter",
    "row_costs",
    "safe_cost",
]

#: With the lexical counter, a line costs at least one token per this many characters (white
#: space at its ends not counted). Ordinary text never reaches the floor: dialogue averages
#: 4.2 characters per lexical token (LoCoMo) and coding-agent transcripts 4.05, and the floor
#: changes no LoCoMo line and 5% of agent lines (their total by 0.6%). An unbroken run is one
#: lexical token however long; OpenAI's o200k spends a token per 1.5 characters of base64 and
#: per 1.75 of hex, so the floor keeps such a run's under-count to about five-fold instead of
#: unbounded (a 1,000,000-character word costs 125,000, not 1).
CHARS_PER_TOKEN_FLOOR = 8

COUNTER_NAMES = ("lexical", *(f"bpe:{name}" for name in BPE_ENCODINGS))


@runtime_checkable
class TokenCounter(Protocol):
    """What the compiler needs from a counter."""

    name: str

    def count(self, text: str) -> int: ...


@dataclass(frozen=True)
class LexicalCounter:
    """The default estimate: word runs, single CJK characters and single punctuation marks.

    It is a deterministic, dependency-free estimate, not what a provider bills. Fit decisions
    use :func:`safe_cost`, which adds a character floor for unbroken runs.
    """

    name: str = "lexical"

    def count(self, text: str) -> int:
        return len(lexical_pattern(text).findall(text))

    def tokenize(self, text: str) -> list[str]:
        return lexical_pattern(text).findall(text)


def _floored(line: str, tokens: int) -> int:
    """``tokens``, or the character floor of ``line`` when that is higher."""
    if len(line) <= CHARS_PER_TOKEN_FLOOR * tokens:
        return tokens  # the common case: no need to strip
    return max(tokens, -(-len(line.strip()) // CHARS_PER_TOKEN_FLOOR))


def safe_cost(counter: str | TokenCounter, text: str) -> int:
    """What ``text`` costs against a budget: the number every fit decision should use.

    With the lexical counter, each line (as ``str.splitlines`` splits them) costs
    ``max(lexical count, ceil(characters / CHARS_PER_TOKEN_FLOOR))``, white space at the
    line's ends not counted, and the costs add up. So a 1,000,000-character word (base64,
    a hash, minified code) costs 125,000 tokens rather than 1, while ordinary text costs its
    lexical count. With a BPE or custom counter it is ``counter.count(text)``: exact counts
    need no floor. ``counter`` is a counter or a counter name (``"lexical"``, ``"bpe:..."``).
    """
    resolved = get_counter(counter)
    if isinstance(resolved, LexicalCounter):
        lines = text.splitlines()
        findall = lexical_pattern(text).findall
        return sum(map(_floored, lines, map(len, map(findall, lines))))
    return resolved.count(text)


def row_costs(counter: TokenCounter, rows: Sequence[str]) -> list[int]:
    """The :func:`safe_cost` of each row as it is packed (``row + "\\n"``).

    Rows are single lines: they never contain a line break.
    """
    if isinstance(counter, LexicalCounter):
        return list(map(_floored, rows, _lexical_counts(rows)))
    count = counter.count
    return [count(row + "\n") for row in rows]


def _lexical_counts(rows: Sequence[str]) -> list[int]:
    """``len(LEXICAL_PATTERN.findall(row))`` of each row. The ASCII rows take the fast path
    even beside rows that are not ASCII: one accented name, or the ellipsis of a long list of
    ids in a repeated line's note, would otherwise put every row through the Unicode pattern
    (about 2 us a row against a fraction of that)."""
    is_ascii = list(map(str.isascii, rows))
    if all(is_ascii):
        return _ascii_counts(rows)
    if not any(is_ascii):
        return list(map(len, map(LEXICAL_PATTERN.findall, rows)))
    fast = iter(_ascii_counts(list(itertools.compress(rows, is_ascii))))
    slow = map(len, map(LEXICAL_PATTERN.findall, itertools.compress(rows, map(not_, is_ascii))))
    return [next(fast) if ascii_row else next(slow) for ascii_row in is_ascii]


def _ascii_counts(rows: Sequence[str]) -> list[int]:
    """The lexical count of each ASCII row."""
    counts = _ascii_lexical_counts(rows)
    if counts is not None:
        return counts
    # map() keeps this one C-level regex pass per row, about the cost of one pass over all.
    return list(map(len, map(ASCII_LEXICAL_PATTERN.findall, rows)))


# On ASCII text a lexical token is a run of [A-Za-z0-9_] or one other non-space character, so
# a row's count is its word runs plus its punctuation marks. Both come from byte translations
# of all rows at once (C-level, about a quarter of a regex pass with a match object per token):
# one keeps word characters and line breaks and makes the rest spaces (the runs are then what
# bytes.split finds), the other deletes all but punctuation and line breaks.
_SPACE_BYTES = bytes(c for c in range(128) if chr(c).isspace() and c != 10)  # str's white space
_NOT_PUNCTUATION = ASCII_WORD_BYTES + _SPACE_BYTES


def _ascii_lexical_counts(rows: Sequence[str]) -> list[int] | None:
    """``len(ASCII_LEXICAL_PATTERN.findall(row))`` of each ASCII row (a property test pins it);
    None when a row holds a line break, which would shift the rows."""
    if not rows:
        return []
    whole = "\n".join(rows).encode("ascii")
    if whole.count(b"\n") != len(rows) - 1:
        return None
    runs = map(len, map(bytes.split, whole.translate(ASCII_WORDS_AND_BREAKS).split(b"\n")))
    marks = map(len, whole.translate(None, _NOT_PUNCTUATION).split(b"\n"))
    return [r + m for r, m in zip(runs, marks, strict=True)]


def get_counter(spec: str | TokenCounter = "lexical") -> TokenCounter:
    """Resolve ``"lexical"``, ``"bpe:<encoding>"`` or a counter object to a counter."""
    if isinstance(spec, str):
        if spec == "lexical":
            return _LEXICAL
        if spec.startswith("bpe:"):
            return BpeCounter(spec[4:])
        if spec in BPE_ENCODINGS or spec == "bpe":
            raise InvalidOptionError(
                f"counter {spec!r} is ambiguous: name the encoding, e.g. 'bpe:o200k_base'"
            )
        raise InvalidOptionError(
            f"unknown counter {spec!r}; use one of {', '.join(map(repr, COUNTER_NAMES))} "
            "or an object with name and count(text)"
        )
    if isinstance(spec, TokenCounter) and callable(getattr(spec, "count", None)):
        return spec
    raise InvalidOptionError(
        f"counter must be a name or an object with name and count(text), not {type(spec).__name__}"
    )


_LEXICAL = LexicalCounter()
