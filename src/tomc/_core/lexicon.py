"""Lexical analysis shared by counting, routing and retrieval: what a token is.

A lexical token is a maximal run of word characters that are not CJK, one CJK character, or
any other single non-space character (:data:`LEXICAL_PATTERN`); terms are lower-cased tokens
without the punctuation (:data:`WORD_PATTERN`). The stemmer is a light suffix stripper whose
stem is always a prefix of the word; retrieval relies on that to find every form of a query
stem with one regular expression. Counting uses :func:`inflections` instead: the regular
English inflections of a word (build, builds, building), which never merge two different words
the way a stem can (``note`` and ``not``, ``plane`` and ``plan``).
"""

from __future__ import annotations

import re

__all__ = [
    "ASCII_LEXICAL_PATTERN",
    "ASCII_WORDS_AND_BREAKS",
    "ASCII_WORD_BYTES",
    "CJK_CHAR",
    "CJK_RANGES",
    "CJK_STOP_CHARS",
    "LEXICAL_PATTERN",
    "STOPWORDS",
    "WORD_CHAR",
    "WORD_PATTERN",
    "inflections",
    "is_content_word",
    "lexical_pattern",
    "query_terms",
    "stem",
    "word_tokens",
]

#: CJK ideographs (with extensions and compatibility forms), kana and hangul, as the body of a
#: regular-expression character class: each such character is one token.
CJK_RANGES = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
#: A word character that is not CJK (pattern text): identifiers and words end where CJK text
#: begins, and a CJK character is a word of its own.
WORD_CHAR = rf"[^\W{CJK_RANGES}]"
#: A maximal run of non-CJK word characters | one CJK character | any other non-space character.
LEXICAL_PATTERN = re.compile(rf"[^\W{CJK_RANGES}]+|[{CJK_RANGES}]|[^\w\s]")
CJK_CHAR = re.compile(rf"[{CJK_RANGES}]")
#: :data:`LEXICAL_PATTERN` for ASCII text, where it finds exactly the same tokens (a property
#: test pins it): explicit ASCII ranges are a bitmap test where ``\W`` and the CJK ranges ask for
#: each character's Unicode category, about a third of the tokenising time on logs. ``\s``
#: stays Unicode's (it holds \x1c-\x1f, which ``re.ASCII`` would not).
ASCII_LEXICAL_PATTERN = re.compile(r"[A-Za-z0-9_]+|[^A-Za-z0-9_\s]")

#: The ASCII word characters of :data:`ASCII_LEXICAL_PATTERN`, as bytes.
ASCII_WORD_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
#: A ``bytes.translate`` table for ASCII text: word characters and line breaks stay, every
#: other byte becomes a space, so ``bytes.split`` then finds exactly the word runs (C-level, no
#: match object per token).
ASCII_WORDS_AND_BREAKS = bytes(c if c in ASCII_WORD_BYTES or c == 10 else 32 for c in range(256))


def lexical_pattern(text: str) -> re.Pattern[str]:
    """The fastest pattern that finds :data:`LEXICAL_PATTERN`'s tokens in ``text``."""
    return ASCII_LEXICAL_PATTERN if text.isascii() else LEXICAL_PATTERN


STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can cannot could couldn't did didn't do does doesn't doing
    don't down during each few for from further had hadn't has hasn't have haven't having he
    he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've
    if in into is isn't it it's its itself let's me more most mustn't my myself no nor not of
    off on once only or other ought our ours ourselves out over own same shan't she she'd she'll
    she's should shouldn't so some such than that that's the their theirs them themselves then
    there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's
    where where's which while who who's whom why why's with won't would wouldn't you you'd
    you'll you're you've your yours yourself yourselves also just will shall may might must s t
    d ll m o re ve y
    """.split()
)

# Word runs and single CJK characters, as in the lexical counter, but no punctuation.
WORD_PATTERN = re.compile(rf"[^\W{CJK_RANGES}]+|[{CJK_RANGES}]")
_SUFFIXES = ("ingly", "edly", "ings", "ing", "ied", "ies", "ed", "es", "ly", "s", "e", "y")
_NO_UNDOUBLE = frozenset("lsz")


def word_tokens(text: str) -> list[str]:
    """Lower-cased word tokens (punctuation dropped)."""
    return WORD_PATTERN.findall(text.lower())


def stem(word: str) -> str:
    """Strip one common English suffix; the result is always a prefix of ``word``."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            word = word[: -len(suffix)]
            # running -> runn -> run, stopped -> stopp -> stop
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in _NO_UNDOUBLE:
                word = word[:-1]
            return word
    return word


def is_content_word(token: str) -> bool:
    """A token worth counting as a 'common word': not a stopword, number or single letter."""
    return len(token) > 1 and token not in STOPWORDS and not token.isdigit()


# Single CJK characters that carry no topic (particles, copulas, pronouns).
CJK_STOP_CHARS = frozenset("的了是在和与及或也都就还而之其这那个们我你他她它吗呢吧啊么什")


# A hyphenated compound of two or three short words (clean-up, e-mail, set-up, log-in).
_COMPOUND = re.compile(r"\b([a-z]{1,8})-([a-z]{1,8})(?:-([a-z]{1,8}))?\b")


def query_terms(text: str) -> list[str]:
    """Distinct stemmed content terms of a query, in order of first appearance; a hyphenated
    compound also as one closed word (``clean-up``: clean, cleanup), as people write both."""
    seen: dict[str, None] = {}
    lowered = text.lower()
    for token in word_tokens(lowered):
        if token in STOPWORDS or token in CJK_STOP_CHARS:
            continue
        seen.setdefault(stem(token), None)
    if "-" in lowered:
        for match in _COMPOUND.finditer(lowered):
            seen.setdefault(stem("".join(part for part in match.groups() if part)), None)
    return list(seen)


_VOWELS = frozenset("aeiouy")


def _consonant(char: str) -> bool:
    return char not in _VOWELS


def _regular_forms(base: str) -> set[str]:
    """``base`` with its regular -s, -ed and -ing endings (spelling rules included)."""
    forms = {base}
    ends_cy = base.endswith("y") and _consonant(base[-2])
    if base.endswith(("s", "x", "z", "ch", "sh", "o")):
        forms.add(base + "es")
        if base.endswith("o"):
            forms.add(base + "s")  # photos, heroes
    elif ends_cy:
        forms.add(base[:-1] + "ies")
    else:
        forms.add(base + "s")
    if base.endswith("e"):
        forms.add(base + "d")
        forms.add(base + "ing" if base.endswith(("ee", "ye", "oe")) else base[:-1] + "ing")
    elif ends_cy:
        forms.update((base[:-1] + "ied", base + "ing"))
    else:
        forms.update((base + "ed", base + "ing"))
        last, middle, first = base[-1], base[-2], base[-3]
        if _consonant(last) and last not in "wxy" and middle in "aeiou" and _consonant(first):
            forms.update((base + last + "ed", base + last + "ing"))  # stopped, running
    return forms


def _bases(word: str) -> set[str]:
    """The bases ``word`` is a regular inflection of (``builds``: build), not ``word`` itself.

    A base must have three letters or more with a vowel, must not be a stopword, and must give
    ``word`` back by :func:`_regular_forms`. The -ed and -ing endings come off words of five
    letters or more only, so ``feed``, ``seed`` and ``shed`` are not read as ``fee``, ``see``
    and ``she`` (nor ``used`` as ``use``; ``use`` still counts ``used``). A doubled consonant
    before them is undoubled (stopped: stop) unless it is l, s or z (passed: pass).
    """
    candidates: list[str] = []
    if word.endswith(("ies", "ied")):
        candidates.append(word[:-3] + "y")
    if word.endswith("es"):
        candidates.append(word[:-2])
    if word.endswith("s") and not word.endswith("ss"):
        candidates.append(word[:-1])
    for ending in ("ed", "ing"):
        if len(word) < 5 or not word.endswith(ending):
            continue
        stem_ = word[: -len(ending)]
        if stem_[-1] == stem_[-2] and stem_[-1] not in _NO_UNDOUBLE:
            candidates.append(stem_[:-1])  # stopped: stop, running: run
        else:
            candidates.append(stem_)
            if _VOWELS.intersection(stem_):
                candidates.append(stem_ + "e")  # based: base, making: make
    return {
        base
        for base in candidates
        if len(base) >= 3
        and _VOWELS.intersection(base)
        and base not in STOPWORDS
        and word in _regular_forms(base)
    }


def inflections(word: str) -> frozenset[str]:
    """The forms a count of ``word`` includes: the word, and the regular -s, -ed and -ing
    forms of its base (``builds``: build, builds, builded, building), or of the word itself
    when it is a base.

    Only lower-case ASCII words of three letters or more are inflected; irregular forms
    (``built``, ``ran``) are not. Forms that never occur cost nothing: a count reports the
    forms it found.
    """
    if len(word) < 3 or not word.isascii() or not word.isalpha() or not word.islower():
        return frozenset((word,))
    bases = _bases(word)
    if not bases:
        return frozenset(_regular_forms(word))
    forms = {word}
    for base in bases:
        forms |= _regular_forms(base)
    return frozenset(forms)
