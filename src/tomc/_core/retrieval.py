"""Line-level BM25 over source units for one query.

Only the query's terms matter for one query, so instead of indexing every token this scans the
text once with a pattern that finds the query terms' surface forms (a stem is always a prefix
of its words) and re-stems the few matches to confirm them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from .lexicon import CJK_RANGES, WORD_CHAR, stem

__all__ = ["BM25_B", "BM25_K1", "NEIGHBOUR_WEIGHT", "bm25_scores", "spread_to_neighbours"]

BM25_K1 = 1.2
BM25_B = 0.75
#: Share of a line's score given to the lines just before and after it. Evidence in dialogue
#: and logs often continues on the next line (a question and its answer); on LoCoMo this lifts
#: evidence recall at 8,000 tokens from 0.88 to 0.90 (benchmarks/RESULTS.md).
NEIGHBOUR_WEIGHT = 0.3


def _surface_pattern(terms: Sequence[str]) -> re.Pattern[str]:
    """A line break, or any surface form of the terms: a word starting with a stem (not inside
    a longer word), or a CJK character.

    It opens with a lookahead on the characters that can start a match, which lets the regex
    engine skip every other position in its fast search (2-3x faster than the alternation
    alone on a long agent history).
    """
    cjk = sorted(t for t in terms if len(t) == 1 and re.fullmatch(f"[{CJK_RANGES}]", t))
    words = sorted((t for t in terms if t not in cjk), key=lambda t: (-len(t), t))
    starts = "".join(sorted({"\n", *(t[0] for t in words), *cjk}))
    parts = ["\n"]
    if words:
        alternatives = "|".join(map(re.escape, words))
        # Query terms start with a word character (lexicon.query_terms): after another one,
        # a match would sit inside a longer word.
        parts.append(rf"(?<!{WORD_CHAR})(?:{alternatives}){WORD_CHAR}*")
    if cjk:
        parts.append("[" + "".join(cjk) + "]")
    return re.compile(f"(?=[{re.escape(starts)}])(?:{'|'.join(parts)})")


def term_frequencies(
    texts: Sequence[str], terms: Sequence[str]
) -> list[tuple[int, dict[str, int]]]:
    """``(line index, {term: tf})`` for every line that contains a query term, in order.

    One pass over all lines joined; the line breaks are matches too, so each match knows its
    line without a search.
    """
    if not terms:
        return []
    wanted = frozenset(terms)
    joined = "\n".join(texts)
    if joined.count("\n") != len(texts) - 1:
        # A break inside a line would shift the count; to the pattern it is white space anyway.
        joined = "\n".join(text.replace("\n", " ") for text in texts)
    stems: dict[str, str] = {"\n": "\n"}
    by_line: dict[int, dict[str, int]] = {}
    line = 0
    tf: dict[str, int] | None = None
    for surface in _surface_pattern(terms).findall(joined.lower()):
        term = stems.get(surface)
        if term is None:
            term = stems[surface] = stem(surface)
        if term == "\n":
            line += 1
            tf = None
        elif term in wanted:
            if tf is None:
                tf = by_line[line] = {}
            tf[term] = tf.get(term, 0) + 1
    return list(by_line.items())


def bm25_scores(
    texts: Sequence[str],
    lengths: Sequence[int],
    terms: Sequence[str],
    *,
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> dict[int, float]:
    """BM25 score of every line that matches at least one term (others score 0).

    ``lengths`` are the lines' token counts; ``terms`` are stemmed query terms.
    """
    count = len(texts)
    if not count:
        return {}
    hits = term_frequencies(texts, terms)
    df: dict[str, int] = {}
    for _, tf in hits:
        for term in tf:
            df[term] = df.get(term, 0) + 1
    idf = {t: math.log(1.0 + (count - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    average = (sum(lengths) / count) or 1.0
    scores: dict[int, float] = {}
    for index, tf in hits:
        norm = k1 * (1.0 - b + b * lengths[index] / average)
        scores[index] = sum(idf[t] * f * (k1 + 1.0) / (f + norm) for t, f in tf.items())
    return scores


def spread_to_neighbours(
    scores: dict[int, float], count: int, weight: float = NEIGHBOUR_WEIGHT
) -> dict[int, float]:
    """Add ``weight`` times each line's score to its two neighbours (linear in matches)."""
    if not weight:
        return scores
    spread = dict(scores)
    for index, score in scores.items():
        for neighbour in (index - 1, index + 1):
            if 0 <= neighbour < count:
                spread[neighbour] = spread.get(neighbour, 0.0) + weight * score
    return spread
