"""Line-level BM25 over source units for one query.

Only the query's terms matter for one query, so instead of indexing every token this scans the
text once with a pattern that finds the query terms' surface forms (a stem is always a prefix
of its words) and re-stems the few matches to confirm them.

Identifiers are read as the words they are made of, because a person names them in plain words:
"the ingest worker's max batch" meets ``ingest-worker`` and ``max_batch``, "upstream token TTL"
meets ``UPSTREAM_TOKEN_TTL`` and ``upstreamTokenTtl``. A part starts after ``_`` as after any
non-word character, and a camelCase hump starts a part; a query term written as an identifier
(``deploy_target``) still matches it whole. Two task words said one after the other also meet
the closed compound a name makes of them, in that order: "the shard map client" meets
``shardmap-client`` (a word of the text that is no query term but splits into two consecutive
ones counts as both).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .lexicon import CJK_CHAR, CJK_RANGES, WORD_PATTERN, query_terms, stem

__all__ = [
    "BM25_B",
    "BM25_K1",
    "COMPOUND_PART",
    "NEIGHBOUR_WEIGHTS",
    "SHARE_TIE",
    "SPEAKER_WEIGHT",
    "ClauseMatches",
    "adjacent_pairs",
    "bm25_scores",
    "clause_coverage",
    "clause_leaders",
    "clause_matches",
    "compound_parts",
    "leading_speaker",
    "longest_compound",
    "part_count",
    "spread_to_neighbours",
    "task_clauses",
    "weight_named_speakers",
]

BM25_K1 = 1.2
BM25_B = 0.75
#: Shares of a line's score given to the lines one, two and three before and after it. Evidence
#: in dialogue and logs goes on for a few lines (a question, its answer, what follows from it):
#: with one neighbour at 0.3, LoCoMo's evidence recall at 8,000 tokens went from 0.86 to 0.90;
#: a window of three, halving, adds about two points more at every budget (benchmarks/RESULTS.md).
NEIGHBOUR_WEIGHTS = (0.4, 0.2, 0.1)
#: A line said by someone the task names ("what did Caroline ...": the lines that open with
#: ``Caroline:``) scores this many times its own. A speaker's name is in half the lines of a
#: two-person chat, so BM25 alone gives it almost no weight, yet the question is about what
#: that person said (LoCoMo: +2 to +4 points of evidence recall at every budget).
SPEAKER_WEIGHT = 3.0
#: A character inside one part of an identifier: a word character other than ``_`` (and CJK).
PART_CHAR = rf"[^\W_{CJK_RANGES}]"
# A capital after a lower-case letter or digit: where a camelCase identifier's next part
# begins. An underscore is put before it, so the lower-cased text keeps the boundary. The
# pattern opens with the capital, which the regex engine finds by a fast scan, and only then
# looks behind: 2.6x faster than testing the lookbehind at every position (16 ms against 41 ms
# on a 1M-token log, 51 ms against 113 ms on 7.8 MB of Python source).
_CAMEL_HUMP = re.compile(r"[A-Z](?<=[a-z0-9][A-Z])")
# ASCII text as byte classes: every lower-case letter and digit becomes "a", every capital "A"
# (other bytes stay, none a letter); a hump is then "aA", found by a search that opens with the
# rarer "A".
_HUMP_CLASSES = bytes.maketrans(
    b"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"a" * 36 + b"A" * 26
)
_HUMP_BYTES = re.compile(rb"A(?<=aA)")


def _split_humps(text: str) -> str:
    """An underscore before each camelCase hump's capital (``maxBatch`` -> ``max_Batch``).

    Most text has no hump, and on ASCII text one byte translation and a search for a rare byte
    show it (3 ms for 1M tokens) where the pattern's own scan costs 15 ms.
    """
    if text.isascii() and not _HUMP_BYTES.search(text.encode("ascii").translate(_HUMP_CLASSES)):
        return text
    return _CAMEL_HUMP.sub(r"_\g<0>", text)


def _surface_pattern(terms: Sequence[str], cjk_text: bool = True) -> re.Pattern[str]:
    r"""A line break, or any surface form of the terms: a word starting with a stem (not inside
    a longer word), or a CJK character.

    ``cjk_text``: whether the text holds CJK. The compiler walks every code point of the part
    class's CJK ranges (3 ms a copy; 1.1 s for 400 task words, a copy each); text without CJK
    never meets them, so there the class is ``[^\W_]``, the same on all of that text."""
    cjk = sorted(t for t in terms if len(t) == 1 and re.fullmatch(f"[{CJK_RANGES}]", t))
    words = sorted((t for t in terms if t not in cjk), key=lambda t: (-len(t), t))
    # Query terms start with a word character (lexicon.query_terms): after a letter or digit a
    # match would sit inside a longer word; after `_` it starts a part. Longest first, so a
    # term that holds a non-part character (``hotel_3``) is tried before its prefix (``hotel``).
    if not cjk_text:
        # Every alternative opens with a literal character, so the regex engine compiles their
        # first characters into a set and its search skips every position that holds none of
        # them in a tight loop (about half the time of an opening lookahead on those
        # characters, 28 ms against 52 ms on a 1M-token log, and that was 2-3x faster than the
        # alternation alone). The check that no part character precedes a word therefore
        # comes after its first character, as a lookbehind over both.
        parts = ["\n"]
        for word in words:
            first, rest = re.escape(word[0]), re.escape(word[1:])
            parts.append(rf"{first}(?<![^\W_]{first}){rest}[^\W_]*")
        return re.compile("|".join(parts))
    # Two copies of the class in all: the set of first characters opens the pattern (the
    # search skips by it as above, a quarter slower than by literals), the check follows it
    # once, and the words that start with the character seen are picked by a literal
    # lookbehind on it.
    rests: dict[str, list[str]] = {}
    for word in words:
        rests.setdefault(word[0], []).append(re.escape(word[1:]))
    kinds = [r"(?<=\n)"]
    if rests:
        groups = "|".join(
            rf"(?<={re.escape(c)})(?:{'|'.join(tails)})" for c, tails in rests.items()
        )
        kinds.append(rf"(?<!{PART_CHAR}.)(?:{groups}){PART_CHAR}*")
    if cjk:
        kinds.append(f"(?<=[{''.join(cjk)}])")
    firsts = "".join(map(re.escape, ["\n", *rests, *cjk]))
    return re.compile(f"[{firsts}](?:{'|'.join(kinds)})")


#: The shortest part of a closed compound: "shardmap" is shard + map, "rerun" is not re + run.
COMPOUND_PART = 3


def longest_compound(pairs: frozenset[tuple[str, str]]) -> int:
    """The longest word that can be a closed compound of one of ``pairs``."""
    # A stem is its word less at most six characters ("-ingly" and an undoubled consonant), so
    # no longer word is a compound of a pair: a 200,000-letter word is not tried at every cut.
    return max((len(a) + len(b) + 12 for a, b in pairs), default=0)


def adjacent_pairs(terms: Sequence[str]) -> frozenset[tuple[str, str]]:
    """Each two terms one after the other in ``terms``: the closed compounds they may form."""
    return frozenset(itertools.pairwise(terms))


def compound_parts(
    surface: str, pairs: frozenset[tuple[str, str]], longest: int | None = None
) -> tuple[str, str] | None:
    """The two terms ``surface`` (one part of a word, lower-case) is made of, in the order of one
    of ``pairs``, split at the first point that gives one (each side at least
    :data:`COMPOUND_PART` characters, each stemmed); ``None`` when it is no such compound.

    ``longest`` is :func:`longest_compound` of ``pairs``, for a caller that asks of many words.
    """
    if not pairs:
        return None
    if longest is None:
        longest = longest_compound(pairs)
    if len(surface) > longest:
        return None
    for cut in range(COMPOUND_PART, len(surface) - COMPOUND_PART + 1):
        parts = (stem(surface[:cut]), stem(surface[cut:]))
        if parts in pairs:
            return parts
    return None


def term_frequencies(
    texts: Sequence[str],
    terms: Sequence[str],
    compounds: frozenset[tuple[str, str]] | None = None,
) -> list[tuple[int, dict[str, int]]]:
    """``(line index, {term: tf})`` for every line that contains a query term, in order.

    A word that is no term but a closed compound of two terms, in the order of one of
    ``compounds`` (by default each two terms one after the other in ``terms``), counts once
    for each (:func:`compound_parts`).

    One pass over all lines joined; the line breaks are matches too, so each match knows its
    line without a search.
    """
    if not terms:
        return []
    wanted = frozenset(terms)
    pairs = adjacent_pairs(terms) if compounds is None else compounds
    longest = longest_compound(pairs)
    joined = "\n".join(texts)
    if joined.count("\n") != len(texts) - 1:
        # A break inside a line would shift the count; to the pattern it is white space anyway.
        joined = "\n".join(text.replace("\n", " ") for text in texts)
    if not joined.islower():
        joined = _split_humps(joined)
    # Each surface's terms: its stem, the two parts of a compound, or none (cached, since a
    # history repeats its words).
    found: dict[str, tuple[str, ...]] = {}
    by_line: dict[int, dict[str, int]] = {}
    line = 0
    tf: dict[str, int] | None = None
    cjk_text = not joined.isascii() and CJK_CHAR.search(joined) is not None
    for surface in _surface_pattern(terms, cjk_text).findall(joined.lower()):
        if surface == "\n":
            line += 1
            tf = None
            continue
        counted = found.get(surface)
        if counted is None:
            term = stem(surface)
            counted = (term,) if term in wanted else (compound_parts(surface, pairs, longest) or ())
            found[surface] = counted
        for term in counted:
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
    scores: dict[int, float], count: int, weights: Sequence[float] = NEIGHBOUR_WEIGHTS
) -> dict[int, float]:
    """Each line's score plus ``weights[d - 1]`` times the score of each match ``d`` lines
    before and after it (``scores`` are of lines ``0 <= index < count``; at most
    ``2 * len(weights)`` additions per match, then one pass in C over the lines).

    A line with no score of its own gets at most ``weights[0]`` times its best neighbour's
    score, however many matches surround it: between two lines that each say a counted word, a
    line that does not never outranks them.
    """
    weights = [(distance, w) for distance, w in enumerate(weights, start=1) if w]
    if not weights:
        return scores
    # Lists indexed by line and padded by the window at both ends, so no share needs a bounds
    # test (what lands in the padding is dropped) and whether a neighbour is a match waits for
    # the end: 1.5x faster than dicts (30 ms against 45 ms for 21K matches among 71K lines).
    # The shares are added in the same order, so the sums are the same to the last bit
    # (tests/reference.py holds the plain loop).
    reach = max(distance for distance, _ in weights)
    received = [0.0] * (count + 2 * reach)
    best = [0.0] * (count + 2 * reach)  # the best neighbour's score; 0.0: none above 0
    for index, score in scores.items():
        at = index + reach
        for distance, weight in weights:
            share = weight * score
            below, above = at - distance, at + distance
            received[below] += share
            received[above] += share
            if score > best[below]:
                best[below] = score
            if score > best[above]:
                best[above] = score
    cap = max(w for _, w in weights)
    spread: dict[int, float] = {}
    for at in itertools.compress(range(len(best)), best):  # lines beside a match
        line = at - reach
        if 0 <= line < count and line not in scores:
            spread[line] = min(received[at], cap * best[at])
    for index, score in scores.items():
        spread[index] = score + received[index + reach]
    return spread


# A line's speaker: an optional bracketed stamp ("[1:56 pm on 8 May, 2023] "), then a name of
# at most three words that starts with a letter, then a colon and a space (or the line's end).
_SPEAKER = re.compile(r"(?:\[[^\]\n]{0,80}\]\s*)?([^\W\d_][\w.'-]*(?: [\w.'-]+){0,2}):(?:\s|$)")


def leading_speaker(text: str) -> str | None:
    """Who says ``text``, lower-cased: the label before its first colon, or None.

    ``Caroline: I went ...``, ``[8 May 2023] Caroline: ...`` and a chat row's ``user: ...``
    have one; ``db_host = x``, ``12:30 done`` and ``see http://x`` have none.
    """
    found = _SPEAKER.match(text)
    return found.group(1).lower() if found else None


def weight_named_speakers(
    scores: dict[int, float], rows: Sequence[str], task: str, weight: float = SPEAKER_WEIGHT
) -> dict[int, float]:
    """Scores of lines whose speaker the task names, times ``weight``.

    A speaker is named when each of its words is a word of the task (any case). Only scored
    lines are looked at, once each.
    """
    words = set(WORD_PATTERN.findall(task.lower()))
    if weight == 1.0 or not words:
        return scores
    named: dict[str, bool] = {}
    out = dict(scores)
    # A named speaker's first word is a task word, and its label starts the line (after an
    # optional "[stamp] "): a line opening with any other character names nobody, which
    # spares the speaker pattern most lines of a long log. Whether a character may open a
    # named speaker's line is decided once per character, not once per line.
    initials = {word[0] for word in words}
    opens: dict[str, bool] = {}
    for index in scores:
        row = rows[index]
        first = row[:1]
        may = opens.get(first)
        if may is None:
            may = opens[first] = first == "[" or first.lower()[:1] in initials
        if not may:
            continue
        speaker = leading_speaker(row)
        if speaker is None:
            continue
        hit = named.get(speaker)
        if hit is None:
            hit = named[speaker] = words.issuperset(WORD_PATTERN.findall(speaker))
        if hit:
            out[index] *= weight
    return out


# Where one request of a task ends: a line break, a sentence's or a list item's end.
_CLAUSE_BREAK = re.compile(r"\n|[;?!]\s|\.\s+(?=[A-Z0-9])|(?:^|\s)\(?\d{1,2}[.)]\s")


def task_clauses(task: str) -> list[list[str]]:
    """The stemmed terms of each request a task makes (its lines, sentences and list items),
    each clause with at least one term."""
    clauses = [
        [t for t in query_terms(part) if not t.isdigit()] for part in _CLAUSE_BREAK.split(task)
    ]
    return [terms for terms in clauses if terms]


def clause_coverage(
    texts: Sequence[str],
    clauses: Sequence[Sequence[str]],
    *,
    segments: Sequence[int] | None = None,
) -> dict[int, float]:
    """For each line that has a term of some clause, the largest share of one clause's words
    it contains, each word weighted by its rarity among the lines (its BM25 idf).

    A task that asks for twenty things names each in a few words; a line that says most of the
    words of one of them ("the licence key in the licensing error") is what that request is
    about, however little it has of the others. Summing over the whole task instead favours
    lines that happen to hold scattered common words.

    With ``segments``, lines with the same segment id are read as one line (each gets the
    words of all): the path in a traceback's last frame is under the word "Traceback".
    """
    return clause_matches(texts, clauses, segments=segments).coverage


def clause_leaders(
    texts: Sequence[str],
    clauses: Sequence[Sequence[str]],
    *,
    segments: Sequence[int] | None = None,
) -> list[tuple[int, float] | None]:
    """For each clause, the line holding the largest share of its words (weighted as in
    :func:`clause_coverage`) and that share; the newest line of a tie; ``None`` when no line
    has a word of it. A task's every request gets the line that answers it best, even one
    that says less of its request than the best lines of other requests say of theirs."""
    return clause_matches(texts, clauses, segments=segments).leaders


#: Two shares of a clause closer than this are a tie (the newer line leads).
SHARE_TIE = 1e-9


@dataclass(frozen=True, slots=True)
class ClauseMatches:
    """:func:`clause_coverage` and :func:`clause_leaders` of the same lines, read once."""

    coverage: dict[int, float]
    leaders: list[tuple[int, float] | None]


def part_count(text: str) -> int:
    """How many words ``text`` holds, identifiers read as their parts (``imagePullPolicy``: 3)."""
    return sum(
        1
        for word in WORD_PATTERN.findall(_split_humps(text).lower())
        for part in word.split("_")
        if part
    )


def clause_matches(
    texts: Sequence[str],
    clauses: Sequence[Sequence[str]],
    *,
    segments: Sequence[int] | None = None,
    ranks: Sequence[int] | None = None,
    parts: Sequence[int] | None = None,
) -> ClauseMatches:
    """Each line's best share of one clause, and each clause's best line (see above).

    With ``ranks`` (one per line), of lines that tie the one with the lowest rank leads, then
    the newest: the caller's own order of preference among equal matches.

    With ``parts`` (one per line: its :func:`part_count`, for lines that are names, not with
    ``segments``), a clause's best line is the one whose share times the square root of its
    precision (the clause's words among the line's parts, at most 1) is the largest: of two
    keys that hold about the same of a request, the one made of it leads
    (``STATSD_PREFIX``, not ``..._JOIN_EXITED_WORKERS_CLEANED``, for "the prefix the worker's
    metrics are sent under"). The leader's share stays the plain share.
    """
    if parts is not None and segments is not None:
        raise ValueError("parts weigh lines that are names; segments join lines")
    shares, keys, found = _clause_shares(texts, clauses, segments)
    by_key = {key: max(held.values(), default=0.0) for key, held in shares.items()}
    clause_sets = [set(clause) for clause in clauses]
    leaders: list[tuple[int, float] | None] = [None] * len(clauses)
    best_score = [0.0] * len(clauses)
    for index in sorted(keys):
        for number, share in shares[keys[index]].items():
            score = share
            if parts is not None:
                held = sum(tf for term, tf in found[index].items() if term in clause_sets[number])
                score = share * math.sqrt(min(1.0, held / max(1, parts[index])))
            best = leaders[number]
            # Shares are sums of floats in no fixed order: equal ones may differ in the last bit.
            if best is None or score > best_score[number] + SHARE_TIE:
                leaders[number], best_score[number] = (index, share), score
                continue
            tie = score >= best_score[number] - SHARE_TIE
            if tie and (ranks is None or ranks[index] <= ranks[best[0]]):
                leaders[number], best_score[number] = (index, share), score
    return ClauseMatches({index: by_key[key] for index, key in keys.items()}, leaders)


def _clause_shares(
    texts: Sequence[str],
    clauses: Sequence[Sequence[str]],
    segments: Sequence[int] | None,
) -> tuple[dict[int, dict[int, float]], dict[int, int], dict[int, dict[str, int]]]:
    """Each segment's share of each clause it has words of (segment -> clause -> share), the
    segment of each line that has a term of some clause, and that line's term counts."""
    terms = list(dict.fromkeys(term for clause in clauses for term in clause))
    # Compounds of one request's words only: the last word of one and the first of the next
    # are not a name.
    compounds = frozenset(pair for clause in clauses for pair in adjacent_pairs(clause))
    hits = term_frequencies(texts, terms, compounds)
    if not hits:
        return {}, {}, {}
    count = len(texts)
    df: dict[str, int] = {}
    for _, tf in hits:
        for term in tf:
            df[term] = df.get(term, 0) + 1
    idf = {t: math.log(1.0 + (count - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in terms}
    # Each term adds its idf to the clauses it is in, so a line costs its own words times the
    # clauses each is in, not every clause of the task (a long task has dozens).
    # Floats summed in a fixed order: a set's order follows each process's string-hash salt.
    totals = [sum(idf[t] for t in dict.fromkeys(clause)) for clause in clauses]
    clauses_of: dict[str, list[int]] = {}
    for number, clause in enumerate(clauses):
        if totals[number] > 0:
            for term in dict.fromkeys(clause):
                clauses_of.setdefault(term, []).append(number)
    words_of: dict[int, dict[str, None]] = {}
    keys: dict[int, int] = {}
    for index, tf in hits:
        key = segments[index] if segments is not None else index
        keys[index] = key
        words_of.setdefault(key, {}).update(dict.fromkeys(tf))
    shares: dict[int, dict[int, float]] = {}
    for key, words in words_of.items():
        sums: dict[int, float] = {}
        for term in words:
            weight = idf[term]
            for number in clauses_of.get(term, ()):
                sums[number] = sums.get(number, 0.0) + weight
        shares[key] = {n: total / totals[n] for n, total in sums.items()}
    return shares, keys, dict(hits)
