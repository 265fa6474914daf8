"""COUNT: lexical occurrences of terms over all nonempty lines, and the most frequent words.

Its twin in ``tests/reference.py`` counts one term at a time; the property tests check that
they agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .lexicon import CJK_CHAR, WORD_PATTERN, is_content_word

__all__ = ["CountEntry", "count_terms", "top_terms"]


@dataclass(frozen=True, slots=True)
class CountEntry:
    term: str
    occurrences: int
    source_units: tuple[int, ...]  # units containing the term, ascending


def count_terms(texts: Sequence[str], terms: Sequence[str]) -> list[CountEntry]:
    """Occurrences of each term over all lines.

    A word term counts lower-cased lexical tokens equal to it; a CJK term (one that contains
    CJK characters) counts non-overlapping substring occurrences, because CJK words are not
    separated by spaces.
    """
    word_terms = {t for t in terms if not CJK_CHAR.search(t)}
    cjk_terms = [t for t in dict.fromkeys(terms) if CJK_CHAR.search(t)]
    occurrences: Counter[str] = Counter()
    units: dict[str, list[int]] = {t: [] for t in terms}
    for index, text in enumerate(texts):
        lower = text.lower()
        if word_terms:
            found = [t for t in WORD_PATTERN.findall(lower) if t in word_terms]
            if found:
                occurrences.update(found)
                for term in set(found):
                    units[term].append(index)
        for term in cjk_terms:
            n = lower.count(term)
            if n:
                occurrences[term] += n
                units[term].append(index)
    return [CountEntry(t, occurrences[t], tuple(units[t])) for t in dict.fromkeys(terms)]


def top_terms(
    texts: Sequence[str], k: int | None, exclude: Iterable[str] = ()
) -> tuple[list[str], int]:
    """The ``k`` most frequent content words (ties alphabetical; ``None``: all), and how many
    distinct content words there are."""
    totals = Counter(WORD_PATTERN.findall("\n".join(texts).lower()))
    skip = set(exclude)
    candidates = [
        t for t in totals if is_content_word(t) and t not in skip and not CJK_CHAR.match(t)
    ]
    ranked = sorted(candidates, key=lambda t: (-totals[t], t))
    return (ranked if k is None else ranked[:k]), len(candidates)
