"""Test oracles: small, obviously correct, slow twins of the state replay, relation joins,
counts, BM25 and packing. The property tests compare the fast code with these on random input;
nothing in the package imports them.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Collection, Sequence

from tomc._core.lexicon import CJK_CHAR, WORD_PATTERN, inflections, stem, word_tokens
from tomc._core.operations import Copy, Relation, Set
from tomc._core.result import UNKNOWN
from tomc.chat._action_log import LoggedCall, folded


def reference_state(
    program: Sequence[tuple[int, Set | Copy]],
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (value, supporting units)}`` by literal replay with whole-tuple copies."""
    state: dict[str, tuple[str, tuple[int, ...]]] = {}
    for unit, op in program:
        if isinstance(op, Set):
            state[op.name] = (op.value, (unit,))
        elif op.source in state:
            value, chain = state[op.source]
            state[op.target] = (value, (*chain, unit))
        else:
            state[op.target] = (UNKNOWN, (unit,))
    return state


def reference_paths(
    relations: Sequence[tuple[int, Relation]], labels: Sequence[str]
) -> set[tuple[tuple[str, ...], tuple[int, ...]]]:
    """Every path following ``labels`` exactly, as ``(casefolded nodes, supporting units)``.

    Brute force over all edge sequences of the right length; an edge is used at most once per
    path, and duplicate statements of one edge are merged.
    """

    def norm(text: str) -> str:
        return " ".join(text.casefold().split())

    edges: dict[tuple[str, str, str], set[int]] = {}
    for unit, rel in relations:
        edges.setdefault((norm(rel.source), norm(rel.label), norm(rel.target)), set()).add(unit)
    wanted = [norm(label) for label in labels]
    paths = set()
    for sequence in itertools.permutations(edges, len(wanted)):
        if any(edge[1] != label for edge, label in zip(sequence, wanted, strict=True)):
            continue
        if any(a[2] != b[0] for a, b in itertools.pairwise(sequence)):
            continue
        nodes = (sequence[0][0], *(edge[2] for edge in sequence))
        units = tuple(sorted(set().union(*(edges[edge] for edge in sequence))))
        paths.add((nodes, units))
    return paths


def _is_word_char(char: str) -> bool:
    """A character that continues a word: a word character that is not CJK."""
    return WORD_PATTERN.fullmatch(char) is not None and not CJK_CHAR.match(char)


def _phrase_occurrences(text: str, phrase: str) -> int:
    """Non-overlapping occurrences of ``phrase``'s words separated by any white space, not
    inside a longer word, scanning left to right one character at a time."""
    words = phrase.split()
    found = 0
    start = 0
    while start < len(text):
        end = start
        for k, word in enumerate(words):
            if k:  # at least one white-space character between words
                gap = end
                while end < len(text) and text[end].isspace():
                    end += 1
                if end == gap:
                    break
            if text.startswith(word, end):
                end += len(word)
            else:
                break
        else:
            before_ok = start == 0 or not (
                _is_word_char(text[start - 1]) and _is_word_char(phrase[0])
            )
            after_ok = end == len(text) or not (
                _is_word_char(text[end]) and _is_word_char(phrase[-1])
            )
            if before_ok and after_ok:
                found += 1
                start = end
                continue
        start += 1
    return found


def reference_counts(
    texts: Sequence[str], term: str, *, inflect: bool = False
) -> tuple[int, tuple[int, ...]]:
    """``(occurrences, units containing it)`` of one term.

    A CJK term counts substrings; a single word counts equal word tokens (with ``inflect``,
    tokens that are any of its :func:`tomc._core.lexicon.inflections`); anything else (a hyphenated
    word, a phrase, a term with punctuation) counts whole-word phrase occurrences.
    """
    occurrences = 0
    units = []
    for index, text in enumerate(texts):
        if CJK_CHAR.search(term):
            n = text.lower().count(term)
        elif WORD_PATTERN.fullmatch(term):
            forms = inflections(term) if inflect else {term}
            n = sum(1 for token in WORD_PATTERN.findall(text.lower()) if token in forms)
        else:
            n = _phrase_occurrences(text.lower(), term)
        if n:
            occurrences += n
            units.append(index)
    return occurrences, tuple(units)


def reference_top_terms(texts: Sequence[str], k: int) -> list[tuple[str, int, tuple[int, ...]]]:
    """The ``k`` most frequent content words (ties alphabetical), each with its occurrences
    and lines, by counting every word of every line."""
    from tomc._core.lexicon import is_content_word

    words = sorted(
        {
            token
            for text in texts
            for token in WORD_PATTERN.findall(text.lower())
            if is_content_word(token) and not CJK_CHAR.match(token)
        }
    )
    counted = [(word, *reference_counts(texts, word)) for word in words]
    counted.sort(key=lambda row: (-row[1], row[0]))
    return counted[:k]


def _endings(base: str) -> set[str]:
    """Every spelling of base+s, base+ed and base+ing under any of the usual rules."""
    out = {base, base + "s", base + "es", base + "ed", base + "d", base + "ing"}
    if base.endswith("y"):
        out |= {base[:-1] + "ies", base[:-1] + "ied"}
    if base.endswith("e"):
        out.add(base[:-1] + "ing")
    out |= {base + base[-1] + "ed", base + base[-1] + "ing"}
    return out


def reference_related(form: str, word: str) -> bool:
    """Whether ``form`` and ``word`` are spellings of one base's -s, -ed or -ing forms (the
    base itself included), trying every prefix of ``word`` (plus ``e`` or ``y``) as a base."""
    if form == word:
        return True
    for cut in range(3, len(word) + 1):
        for base in (word[:cut], word[:cut] + "e", word[:cut] + "y"):
            endings = _endings(base)
            if word in endings and form in endings:
                return True
    return False


def reference_pack(tokens: Sequence[int], budget: int) -> list[int]:
    """Greedy whole-row packing in priority order: take a row whenever it still fits."""
    taken = []
    used = 0
    for index, cost in enumerate(tokens):
        if used + cost <= budget:
            taken.append(index)
            used += cost
    return taken


def _humps_split(text: str) -> str:
    """``maxBatch`` -> ``max_Batch``: an underscore wherever [a-z0-9] meets [A-Z]."""
    out = []
    for position, char in enumerate(text):
        before = text[position - 1] if position else ""
        if "A" <= char <= "Z" and ("a" <= before <= "z" or "0" <= before <= "9"):
            out.append("_")
        out.append(char)
    return "".join(out)


def _split_compound(
    part: str, terms: Collection[str], pairs: Collection[tuple[str, str]]
) -> list[str]:
    """``part`` stemmed; when that is no term, the two terms of one of ``pairs`` it is a
    closed compound of: the first cut (each side three characters or more) whose two stemmed
    sides are a pair, in order."""
    whole = stem(part)
    if whole not in terms:
        for cut in range(3, len(part) - 2):
            if (stem(part[:cut]), stem(part[cut:])) in pairs:
                return [stem(part[:cut]), stem(part[cut:])]
    return [whole]


def _line_terms(
    text: str, terms: Collection[str] = (), pairs: Collection[tuple[str, str]] = ()
) -> list[str]:
    """A line's stemmed terms: the parts of its words, each word split where a lower-case
    letter or digit meets a capital and at each ``_``; a part whose stem is no term of
    ``terms`` but that is a closed compound of one of ``pairs``, as both terms."""
    return [
        term
        for token in word_tokens(_humps_split(text))
        for part in token.split("_")
        if part
        for term in _split_compound(part, terms, pairs)
    ]


def reference_bm25(
    texts: Sequence[str], lengths: Sequence[int], terms: Sequence[str], k1: float, b: float
) -> dict[int, float]:
    """Textbook BM25 over fully stemmed lines; lines without a query term are left out.

    A line's tokens are the parts of its words: a word is split where a lower-case letter or
    digit meets a capital and at each ``_``, then each part is stemmed (query terms here hold no
    ``_``; a term written as an identifier is matched whole, tested on its own). A part that
    is no query term but a closed compound of two terms one after the other in ``terms`` is
    both."""
    pairs = set(itertools.pairwise(terms))
    stemmed = [_line_terms(text, set(terms), pairs) for text in texts]
    n = len(texts)
    average = (sum(lengths) / n) or 1.0
    scores: dict[int, float] = {}
    for term in dict.fromkeys(terms):
        df = sum(1 for tokens in stemmed if term in tokens)
        if not df:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for index, tokens in enumerate(stemmed):
            tf = tokens.count(term)
            if tf:
                norm = k1 * (1.0 - b + b * lengths[index] / average)
                scores[index] = scores.get(index, 0.0) + idf * tf * (k1 + 1.0) / (tf + norm)
    return scores


def reference_spread(
    scores: dict[int, float], count: int, weights: Sequence[float]
) -> dict[int, float]:
    """Line by line: a match's score plus the shares of the matches around it; a line with no
    score of its own gets the shares, at most the largest weight times its best neighbour's
    score (one above 0). The shares are added in the order of ``scores``, as the fast code adds
    them, so the sums agree to the last bit."""
    spread: dict[int, float] = {}
    for line in range(count):
        received, best, reached = 0.0, 0.0, False
        for other, score in scores.items():
            distance = abs(other - line)
            if 1 <= distance <= len(weights) and weights[distance - 1]:
                received += weights[distance - 1] * score
                best, reached = max(best, score), True
        if line in scores:
            spread[line] = scores[line] + received
        elif reached and best > 0.0:
            spread[line] = min(received, max(w for w in weights if w) * best)
    return spread


def reference_best_first(scores: dict[int, float]) -> list[int]:
    """Lines by score, best first, equal scores newer first: one sort on ``(-score, -line)``."""
    return sorted(scores, key=lambda line: (-scores[line], -line))


def _clause_words(
    texts: Sequence[str], clauses: Sequence[Sequence[str]], segments: Sequence[int] | None
) -> tuple[list[set[str]], set[str], dict[str, float], dict[int, set[str]], list[int]]:
    """Each line's words, the clauses' terms, their BM25 idf over the lines, the terms each
    segment holds, and each line's segment."""
    terms = {term for clause in clauses for term in clause}
    pairs = {pair for clause in clauses for pair in itertools.pairwise(clause)}
    stemmed = [set(_line_terms(text, terms, pairs)) for text in texts]
    n = len(texts)
    idf = {}
    for term in terms:
        df = sum(1 for words in stemmed if term in words)
        idf[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    key = list(segments) if segments is not None else list(range(n))
    segment_words: dict[int, set[str]] = {}
    for index, words in enumerate(stemmed):
        segment_words.setdefault(key[index], set()).update(words & terms)
    return stemmed, terms, idf, segment_words, key


def reference_clause_coverage(
    texts: Sequence[str], clauses: Sequence[Sequence[str]], segments: Sequence[int] | None = None
) -> dict[int, float]:
    """For each line holding a term of some clause: the best, over clauses, of the idf-weighted
    share of the clause's words the line (or its whole segment) holds. Words are read as in
    :func:`reference_bm25`; idf is BM25's, over the lines."""
    stemmed, terms, idf, segment_words, key = _clause_words(texts, clauses, segments)
    out = {}
    for index, words in enumerate(stemmed):
        if not words & terms:
            continue
        held = segment_words[key[index]]
        out[index] = max(
            sum(idf[t] for t in set(clause) if t in held) / sum(idf[t] for t in set(clause))
            for clause in clauses
            if clause
        )
    return out


def reference_clause_leaders(
    texts: Sequence[str],
    clauses: Sequence[Sequence[str]],
    segments: Sequence[int] | None = None,
    ranks: Sequence[int] | None = None,
    parts: Sequence[int] | None = None,
) -> list[tuple[int, float] | None]:
    """For each clause: the last line whose (segment's) idf-weighted share of the clause's words
    is the largest, with that share; ``None`` when no line holds a word of it. Shares as in
    :func:`reference_clause_coverage`, per clause. With ``ranks``, of the lines with the
    largest share, the last of those with the lowest rank. With ``parts`` (each line's number
    of parts), lines are compared by share x sqrt(min(1, the clause's term occurrences in the
    line / its parts)), the leader keeping its plain share."""
    stemmed, terms, idf, segment_words, key = _clause_words(texts, clauses, segments)
    pairs = {pair for clause in clauses for pair in itertools.pairwise(clause)}
    counted = [_line_terms(text, terms, pairs) for text in texts]
    leaders: list[tuple[int, float] | None] = []
    for clause in clauses:
        best, best_score, best_size = None, 0.0, 0
        total = sum(idf[t] for t in set(clause))
        for index, words in enumerate(stemmed):
            held = segment_words[key[index]]
            if not words & terms or not held & set(clause) or total <= 0:
                continue
            share = sum(idf[t] for t in set(clause) if t in held) / total
            score = share
            if parts is not None:
                occurrences = sum(1 for t in counted[index] if t in set(clause))
                score = share * math.sqrt(min(1.0, occurrences / max(1, parts[index])))
            size = ranks[index] if ranks is not None else 0
            # Float sums: scores within 1e-9 are a tie.
            larger = best is None or score > best_score + 1e-9
            if larger or (best is not None and score >= best_score - 1e-9 and size <= best_size):
                best, best_score, best_size = (index, share), score, size
        leaders.append(best)
    return leaders


def reference_mentions(texts: Sequence[str], name: str) -> list[int]:
    """The lines that contain ``name`` with no identifier character (a letter, digit or ``_``
    that is not CJK) right before or after it; a name is searched at every position."""

    def ident(char: str) -> bool:
        return (char.isalnum() or char == "_") and not CJK_CHAR.match(char)

    found = []
    for unit, text in enumerate(texts):
        for start in range(len(text) - len(name) + 1):
            end = start + len(name)
            if text[start:end] != name:
                continue
            if (start == 0 or not ident(text[start - 1])) and (
                end == len(text) or not ident(text[end])
            ):
                found.append(unit)
                break
    return found


def reference_split_cost(
    groups: Sequence[LoggedCall], group: LoggedCall, count: Callable[[str], int]
) -> int:
    """What the action log's cost changes by when ``group`` (keeping no line yet) gets one, by
    rendering the folded row it sat in (or between) and its two halves and counting them."""
    if group.header and not group.number:
        return 0  # an output without its call has a line of its own already

    def in_row(other: LoggedCall) -> bool:
        return not other.kept and bool(other.number or not other.header)

    start = end = group.order
    while start > 0 and in_row(groups[start - 1]):
        start -= 1
    while end + 1 < len(groups) and in_row(groups[end + 1]):
        end += 1
    row = [g for g in groups[start : end + 1] if g.number]
    before = [g for g in row if g.order < group.order]
    after = [g for g in row if g.order > group.order]

    def cost(lines: list[str]) -> int:
        return count("\n".join(lines) + "\n") if lines else 0

    return cost(folded(before)) + cost(folded(after)) - cost(folded(row))


#: What stands out in a line, as one pattern of every kind (the fast twin searches each kind
#: behind what it cannot match without).
REFERENCE_SALIENT = re.compile(
    r"\b(?:ERROR|WARN(?:ING)?|FATAL|CRITICAL|FAIL(?:ED|URE)?|Traceback|Exception|panic)\b"
    r"|\b[A-Za-z]+Error\b|^\s*File \"|https?://|\b[A-Z][A-Z0-9]+-\d+\b|\b[0-9a-f]{10,}\b"
    r"|[\w.-]==?\d|\b[vV]?\d+\.\d+\.\d+\b"
)
