"""Routing: which kind of record a task asks for, and which cue decided it.

Precedence: a reference predicate (``relation: a > b``), then count cues, relation cues, state
cues (English, Chinese, or a variable the history defines), then wording cues. A task with no
cue is a plain retrieval question (route ``raw``).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from .lexicon import CJK_RANGES, CJK_STOP_CHARS, STOPWORDS, word_tokens

__all__ = ["Route", "route_task"]

_PREDICATE = re.compile(r"relation\s*[:：]\s*([^\n;?]+)", re.IGNORECASE)
_COUNT_EN = re.compile(
    r"\bhow\s+(?:many|often)\b|\bcount(?:s|ed|ing)?\b|\bnumber\s+of\s+(?:times|occurrences|mentions)\b"
    r"|\bmost\s+(?:common|frequent)\b|\boccurrences?\b|\bfrequenc(?:y|ies)\b|\btally\b",
    re.IGNORECASE,
)
_RELATION_EN = re.compile(
    r"\brelations?(?:hips?)?\b|\brelated\s+to\b|\bconnected\s+to\b|\bpath\s+from\b|\blinks?\s+to\b",
    re.IGNORECASE,
)
_STATE_EN = re.compile(
    r"\bvalue\s+of\b|\bvalues?\b|\bcurrent(?:ly)?\b|\bfinal\b|\blatest\b|\bset\s+to\b"
    r"|\bwhich\s+variables?\b|\bvariables?\b",
    re.IGNORECASE,
)
_WORDING_EN = re.compile(
    r"\bexact(?:ly)?\b|\bverbatim\b|\bquot(?:e|ed|es|ation)\b|\bword(?:ing|ed)?\b|\bphras(?:e|ed|ing)\b"
    r"|\bliterally\b|\bwhat\s+did\s+\w+\s+(?:say|write|reply|answer)\b",
    re.IGNORECASE,
)
_COUNT_ZH = ("多少次", "几次", "次数", "多少", "统计", "计数", "频率", "出现")
_STATE_ZH = ("当前", "目前", "现在", "最终", "最后", "值")
_RELATION_ZH = ("关系", "关联", "路径")
_WORDING_ZH = ("原话", "原文", "逐字", "措辞", "怎么说")

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
_TASK_WORD = re.compile(r"\w[\w\-]*(?:\.[\w\-]+)*")
_QUOTED = re.compile(r"[\"“”'‘’「『]([^\"“”'‘’「」『』]{1,80})[\"“”'‘’」』]")
_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")
_ZH_FRAME = re.compile(
    "多少次|几次|次数|多少|统计|计数|频率|出现了|出现|一共|总共|文本|历史|中|里|了|的|词|字|个|是|在|有"
)


@dataclass(frozen=True, slots=True)
class Route:
    """A routing decision. ``labels`` is the requested relation label sequence, if any."""

    route: str
    reason: str
    wording_sensitive: bool
    labels: tuple[str, ...]
    count_terms: tuple[str, ...]
    wants_top_terms: bool


def _first_cue(task: str, pattern: re.Pattern[str], chinese: tuple[str, ...]) -> str | None:
    match = pattern.search(task)
    if match:
        return f"English cue '{match.group(0).lower()}'"
    for cue in chinese:
        if cue in task:
            return f"Chinese cue '{cue}'"
    return None


def requested_labels(task: str) -> tuple[str, ...]:
    """Labels of a ``relation: a > b`` predicate, in order."""
    match = _PREDICATE.search(task)
    if not match:
        return ()
    return tuple(part.strip() for part in re.split(r"[>＞]|->", match[1]) if part.strip())


def count_terms_of(task: str) -> tuple[str, ...]:
    """What a counting task names: quoted terms, else its content words and CJK phrases."""
    quoted = [q.strip().lower() for q in _QUOTED.findall(task) if q.strip()]
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


def names_in_task(names: Collection[str], raw_words: set[str], task_words: set[str]) -> list[str]:
    """Variable names the task mentions; stopword-like names ("a", "it") only in exact case."""
    found = []
    for name in names:
        folded = name.casefold()
        if name in raw_words or (folded in task_words and folded not in STOPWORDS):
            found.append(name)
    return found


def task_words(task: str) -> tuple[set[str], set[str]]:
    """The task's identifier-like words, as written and case-folded."""
    raw = set(_TASK_WORD.findall(task))
    return raw, {word.casefold() for word in raw}


def route_task(task: str, variables: Collection[str], labels: Collection[str]) -> Route:
    """Pick the route for ``task`` given the variable names and relation labels in the history."""
    wording = _first_cue(task, _WORDING_EN, _WORDING_ZH)
    predicate = requested_labels(task)
    count_cue = _first_cue(task, _COUNT_EN, _COUNT_ZH)
    wants_top = bool(re.search(r"\bmost\s+(?:common|frequent)\b|\btop\s+\d+", task, re.I)) or (
        "最常" in task or "最多" in task
    )

    def make(route: str, reason: str) -> Route:
        terms = count_terms_of(task) if route == "count" else ()
        return Route(
            route, reason, wording is not None, predicate, terms, wants_top and route == "count"
        )

    if predicate:
        return make("relation", f"reference predicate 'relation: {' > '.join(predicate)}'")
    if count_cue:
        return make("count", count_cue)
    relation_cue = _first_cue(task, _RELATION_EN, _RELATION_ZH)
    if relation_cue:
        return make("relation", relation_cue)
    raw_words, folded_words = task_words(task)
    named_labels = sorted(label for label in labels if label.casefold() in folded_words)
    state_cue = _first_cue(task, _STATE_EN, _STATE_ZH)
    named_vars = names_in_task(variables, raw_words, folded_words)
    if named_vars:
        return make("state", f"task names variable '{named_vars[0]}'")
    if named_labels:
        return make("relation", f"task names relation label '{named_labels[0]}'")
    if state_cue and variables:
        return make("state", state_cue)
    if wording:
        return make("raw", f"wording cue ({wording}): source text is kept verbatim")
    return make("raw", "no route cue: plain retrieval question")
