"""COUNT: which terms a counting task names, their occurrences over all nonempty lines, and
the most frequent words.

A term is counted as a person means it:

- a word (``deploy``) counts lower-cased word tokens equal to it;
- a CJK term (``部署``) counts substrings, because CJK words are not separated by spaces;
- anything else (a hyphenated word ``follow-up``, a phrase ``deploy failed``, ``c++``)
  counts occurrences of its words in order, separated by any white space, and not inside a
  longer word: ``deploy failed`` is not counted in ``deploy-failed`` or ``redeploy failed``.

Its twin in ``tests/reference.py`` counts one term at a time, character by character; the
property tests check that they agree.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .lexicon import (
    CJK_CHAR,
    CJK_RANGES,
    CJK_STOP_CHARS,
    STOPWORDS,
    WORD_PATTERN,
    is_content_word,
    word_tokens,
)

__all__ = ["CountEntry", "count_terms", "terms_named_in", "top_terms"]

# Words that phrase a counting question rather than name what to count.
_COUNT_FRAME = frozenset(
    """
    how many often times time count counts counted counting number numbers occurrence
    occurrences occur occurs occurred appear appears appeared appearing mention mentions
    mentioned word words term terms token tokens total common frequent frequency most top list
    text history conversation log logs line lines above below whole entire show give tell find
    does did do is are was were the in of
    """.split()
)
_WORD_CHAR = rf"[^\W{CJK_RANGES}]"  # continues a word; CJK text next to a word does not
# Quoted terms. A straight or curly apostrophe between letters (doesn't, What's, Bob's) is not
# a quote: a single quote opens only where no word character precedes it and closes only
# where none follows.
_QUOTED = re.compile(
    r'"([^"\n]{1,80})"|“([^”\n]{1,80})”|「([^」\n]{1,80})」|『([^』\n]{1,80})』'
    rf"|(?<!{_WORD_CHAR})['‘]([^'‘’\n]{{1,80}}?)['’](?!{_WORD_CHAR})"
)
_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")
_ZH_FRAME = re.compile(
    "多少次|几次|幾次|次数|次數|多少个|多少個|多少|统计|統計|计数|計數|频率|頻率|出现了|出現了|出现"
    "|出現|一共|总共|總共|文本|历史|歷史|中|里|裡|了|的|词|詞|字|个|個|是|在|有"
)


def terms_named_in(task: str) -> tuple[str, ...]:
    """What a counting task names: its quoted terms (lower-cased, white space collapsed),
    else its content words and CJK phrases."""
    quoted = [" ".join("".join(groups).split()).lower() for groups in _QUOTED.findall(task)]
    quoted = [term for term in quoted if term]
    if quoted:
        return tuple(dict.fromkeys(quoted))
    terms: list[str] = []
    for token in word_tokens(_CJK_RUN.sub(" ", task)):
        if token in STOPWORDS or token in _COUNT_FRAME or token.isdigit():
            continue
        terms.append(token)
    for run in _CJK_RUN.findall(task):
        for piece in _ZH_FRAME.split(run):
            if len(piece) >= 2 or (piece and piece not in CJK_STOP_CHARS):
                terms.append(piece)
    return tuple(dict.fromkeys(terms))


@dataclass(frozen=True, slots=True)
class CountEntry:
    term: str
    occurrences: int
    source_units: tuple[int, ...]  # units containing the term, ascending


def _phrase_pattern(term: str) -> re.Pattern[str]:
    """The term's words in order, any white space between, not inside a longer word."""
    body = r"\s+".join(map(re.escape, term.split()))
    before = rf"(?<!{_WORD_CHAR})" if re.match(_WORD_CHAR, term) else ""
    after = rf"(?!{_WORD_CHAR})" if re.match(_WORD_CHAR, term[-1]) else ""
    return re.compile(before + body + after)


def count_terms(texts: Sequence[str], terms: Sequence[str]) -> list[CountEntry]:
    """Occurrences of each (lower-case) term over all lines, and the lines containing it."""
    distinct = list(dict.fromkeys(terms))
    word_terms = {t for t in distinct if WORD_PATTERN.fullmatch(t) and not CJK_CHAR.search(t)}
    cjk_terms = [t for t in distinct if CJK_CHAR.search(t)]
    phrases = [
        (t, _phrase_pattern(t)) for t in distinct if t not in word_terms and t not in cjk_terms
    ]
    occurrences: Counter[str] = Counter()
    units: dict[str, list[int]] = {t: [] for t in distinct}
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
        for term, pattern in phrases:
            n = len(pattern.findall(lower))
            if n:
                occurrences[term] += n
                units[term].append(index)
    return [CountEntry(t, occurrences[t], tuple(units[t])) for t in distinct]


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
