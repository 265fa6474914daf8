"""COUNT: which terms a counting task names, their occurrences over all nonempty lines, and
the most frequent words.

A term is counted as a person means it:

- a word (``deploy``) counts lower-cased word tokens equal to it; a word the task names without
  quotes also counts its regular inflections (``builds``: build, builds, building; see
  :func:`tomc._core.lexicon.inflections`), and its entry lists the forms found;
- a CJK term (``部署``) counts substrings, because CJK words are not separated by spaces;
- anything else (a hyphenated word ``follow-up``, a phrase ``deploy failed``, ``c++``)
  counts occurrences of its words in order, separated by any white space, and not inside a
  longer word: ``deploy failed`` is not counted in ``deploy-failed`` or ``redeploy failed``.

Its twin in ``tests/reference.py`` counts one term at a time, character by character; the
property tests check that they agree.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .lexicon import (
    ASCII_WORDS_AND_BREAKS,
    CJK_CHAR,
    CJK_RANGES,
    CJK_STOP_CHARS,
    STOPWORDS,
    WORD_CHAR,
    WORD_PATTERN,
    inflections,
    is_content_word,
    word_tokens,
)

__all__ = [
    "CountEntry",
    "count_terms",
    "lines_with_all",
    "names_quoted_terms",
    "terms_named_in",
    "top_terms",
]

# Words that phrase a counting question rather than name what to count.
_COUNT_FRAME = frozenset(
    """
    how many often times time count counts counted counting number numbers occurrence
    occurrences occur occurs occurred appear appears appeared appearing mention mentions
    mentioned word words term terms token tokens total common frequent frequency most top list
    text history conversation log logs line lines above below whole entire show give tell find
    frequencies each
    does did do is are was were the in of
    """.split()
)
_WORD_CHAR_RE = re.compile(WORD_CHAR)  # continues a word; CJK text next to a word does not
# Quoted terms. A straight or curly apostrophe between letters (doesn't, What's, Bob's) is not
# a quote: a single quote opens only where no word character precedes it and closes only
# where none follows.
_QUOTED = re.compile(
    r'"([^"\n]{1,80})"|“([^”\n]{1,80})”|「([^」\n]{1,80})」|『([^』\n]{1,80})』'
    rf"|(?<!{WORD_CHAR})['‘]([^'‘’\n]{{1,80}}?)['’](?!{WORD_CHAR})"
)
_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")
_ZH_FRAME = re.compile(
    "多少次|几次|幾次|次数|次數|多少个|多少個|多少|统计|統計|计数|計數|频率|頻率|出现了|出現了|出现"
    "|出現|一共|总共|總共|文本|历史|歷史|中|里|裡|了|的|词|詞|字|个|個|是|在|有"
)


def _quoted_terms(task: str) -> list[str]:
    quoted = [" ".join("".join(groups).split()).lower() for groups in _QUOTED.findall(task)]
    return [term for term in quoted if term]


def names_quoted_terms(task: str) -> bool:
    """Whether the task quotes what it counts (then each term counts exactly as written)."""
    return bool(_quoted_terms(task))


def terms_named_in(task: str) -> tuple[str, ...]:
    """What a counting task names: its quoted terms (lower-cased, white space collapsed),
    else its content words and CJK phrases."""
    quoted = _quoted_terms(task)
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
    forms: tuple[tuple[str, int], ...] = ()  # (form, occurrences) found, most frequent first


def _lowered(texts: Sequence[str]) -> tuple[str, list[int]]:
    """All lines lower-cased and joined by line breaks, and where each line starts."""
    lowered, lengths = _lowered_text(texts)
    return lowered, [0, *itertools.accumulate(length + 1 for length in lengths)]


def _lowered_text(texts: Sequence[str]) -> tuple[str, Iterable[int]]:
    """All lines lower-cased and joined by line breaks, and (lazily) each line's length in it."""
    joined = "\n".join(texts)
    lowered = joined.lower()
    if len(lowered) == len(joined):  # lower() never shortens, so no line changed length
        return lowered, map(len, texts)
    lines = [text.lower() for text in texts]
    return "\n".join(lines), map(len, lines)


def _word_pattern(forms: Iterable[str]) -> re.Pattern[str]:
    """Any of ``forms`` not followed by a word character (what precedes is checked apart:
    a pattern that starts with its literals lets the regex engine skip ahead fast)."""
    alternatives = "|".join(map(re.escape, sorted(forms, key=lambda f: (-len(f), f))))
    return re.compile(rf"(?:{alternatives})(?!{WORD_CHAR})")


def _phrase_pattern(term: str) -> re.Pattern[str]:
    """The term's words in order, any white space but a line break between, not followed by
    a word character when the term ends with one."""
    body = r"[^\S\n]+".join(map(re.escape, term.split()))
    after = rf"(?!{WORD_CHAR})" if re.match(WORD_CHAR, term[-1]) else ""
    return re.compile(body + after)


def _scan(
    lowered: str, starts: list[int], pattern: re.Pattern[str], word_start: bool
) -> tuple[Counter[str], list[int]]:
    """Non-overlapping matches left to right, each starting a word when ``word_start``: the
    matched text's occurrences and the lines they are on."""
    found: Counter[str] = Counter()
    units: list[int] = []
    search = pattern.search
    continues = _WORD_CHAR_RE.match
    line_of = bisect.bisect_right
    position = 0
    while (match := search(lowered, position)) is not None:
        at = match.start()
        if word_start and at and continues(lowered, at - 1):
            position = at + 1  # inside a longer word: a match may still start further on
            continue
        found[match.group()] += 1
        line = line_of(starts, at) - 1
        if not units or units[-1] != line:
            units.append(line)
        position = match.end()
    return found, units


def _entry(term: str, found: Counter[str], units: list[int]) -> CountEntry:
    forms = tuple(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))
    return CountEntry(term, sum(found.values()), tuple(units), forms)


def count_terms(
    texts: Sequence[str], terms: Sequence[str], *, inflect: bool = False
) -> list[CountEntry]:
    """Occurrences of each (lower-case) term over all lines, and the lines containing it.

    With ``inflect``, a word term also counts its regular inflections
    (:func:`tomc._core.lexicon.inflections`); each entry lists the forms it found. Linear: one
    literal-led regular-expression scan of the text per term.
    """
    distinct = list(dict.fromkeys(terms))
    if not distinct:
        return []
    lowered, starts = _lowered(texts)
    out = []
    for term in distinct:
        if CJK_CHAR.search(term):
            pattern, word_start = re.compile(re.escape(term)), False
        elif WORD_PATTERN.fullmatch(term):
            forms = inflections(term) if inflect else (term,)
            pattern, word_start = _word_pattern(forms), True
        else:
            pattern, word_start = _phrase_pattern(term), bool(re.match(WORD_CHAR, term))
        found, units = _scan(lowered, starts, pattern, word_start)
        if not (CJK_CHAR.search(term) or WORD_PATTERN.fullmatch(term)):
            found = Counter({term: sum(found.values())}) if found else found
        out.append(_entry(term, found, units))
    return out


def lines_with_all(entries: Sequence[CountEntry]) -> tuple[int, ...]:
    """The lines that contain every entry's term (in any form counted), ascending."""
    if not entries:
        return ()
    common = set(entries[0].source_units)
    for entry in entries[1:]:
        common.intersection_update(entry.source_units)
    return tuple(sorted(common))


_TOKENS_AND_BREAKS = re.compile(rf"{WORD_PATTERN.pattern}|\n")


def top_terms(
    texts: Sequence[str], k: int | None, exclude: Iterable[str] = ()
) -> tuple[list[CountEntry], int]:
    """The ``k`` most frequent content words (ties alphabetical; ``None``: all), counted as
    whole words, and how many distinct content words there are. One tokenising pass."""
    lowered, _ = _lowered_text(texts)  # no line starts: the words' lines are split out below
    if lowered.isascii():
        # Word runs are what is left between the bytes that are not word characters: one
        # translation and C-level splits, no match object per token (a property test pins it).
        words = lowered.encode("ascii").translate(ASCII_WORDS_AND_BREAKS).decode("ascii")
        lines = words.split("\n")
        # Counted line by line, so that each line's words are freed once counted: a list of
        # every word of a long text at once cost more to allocate than to count (1M tokens:
        # 66 ms against 60-110 ms, as the allocator found its memory).
        totals: Counter[str] = Counter(itertools.chain.from_iterable(map(str.split, lines)))
    else:
        tokens = _TOKENS_AND_BREAKS.findall(lowered)
        totals = Counter(tokens)
        del totals["\n"]
        lines = " ".join(tokens).split("\n")
    skip = set(exclude)
    candidates = [
        t for t in totals if is_content_word(t) and t not in skip and not CJK_CHAR.match(t)
    ]
    ranked = sorted(candidates, key=lambda t: (-totals[t], t))
    chosen = ranked if k is None else ranked[:k]
    units: dict[str, list[int]] = {t: [] for t in chosen}
    # Line by line through the words (split in C), not token by token in Python.
    wanted = frozenset(chosen)
    for line, line_words in enumerate(lines):
        for token in wanted.intersection(line_words.split()):
            units[token].append(line)
    entries = [CountEntry(t, totals[t], tuple(units[t]), ((t, totals[t]),)) for t in chosen]
    return entries, len(candidates)
