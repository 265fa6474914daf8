"""Routing: which kind of record a task asks for, and which cue decided it.

Cues are English words or Chinese phrases (Simplified and Traditional). Precedence:

1. a reference predicate (``relation: a > b``): relation;
2. a frequency cue ("how many times", "how often", 几次/幾次, 次数/次數, 统计/統計): count;
3. a plain quantity cue ("how many", "count", 多少, 多少个/多少個): count, unless the task
   names a variable or asks for a value (``温度现在是多少？`` asks for 温度's value);
4. a relation cue ("related to", 关系/關係): relation;
5. a variable the history defines, named in the task: state;
6. a value cue ("value of", 当前值/當前值, 的值) when the history has variables: state;
7. a relation label the history uses, named in the task: relation;
8. a state cue ("current", 现在/現在, 目前) when the history has variables: state;
9. otherwise raw; wording cues ("exactly", 原话/原話) mark any route wording-sensitive.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from .counting import names_quoted_terms, terms_named_in
from .mentions import TaskMentions, label_words, words_start_with

__all__ = ["TaskRoute", "route_task"]

# The predicate runs to the end of its clause; labels are separated by ">" (or "->", "＞", "→").
_PREDICATE = re.compile(r"relation\s*[:：]\s*([^\n;；?？!！。]+)", re.IGNORECASE)
_LABEL_SEPARATOR = re.compile(r"\s*(?:->|[>＞→])\s*")
# Where an unknown label's text stops: sentence punctuation, a closing bracket or a quote.
_LABEL_END = re.compile(r"[.,，、:)）\]」』\"“”]")


@dataclass(frozen=True, slots=True)
class _Cues:
    """English patterns and Chinese phrases (Simplified and Traditional) of one kind of cue."""

    english: re.Pattern[str] | None
    chinese: tuple[str, ...] = ()
    not_inside: tuple[str, ...] = ()  # longer words that contain a cue without meaning it

    def find(self, task: str) -> str | None:
        """The first cue in ``task``, described for a route reason."""
        match = self.english.search(task) if self.english else None
        if match:
            return f"English cue '{match.group(0).lower()}'"
        for word in self.not_inside:
            task = task.replace(word, " ")
        for cue in self.chinese:
            if cue in task:
                return f"Chinese cue '{cue}'"
        return None


def _english(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_FREQUENCY = _Cues(
    _english(
        r"\bhow\s+many\s+times\b|\bhow\s+often\b|\bnumber\s+of\s+(?:times|occurrences|mentions)\b"
        r"|\bmost\s+(?:common|frequent)\b|\boccurrences?\b|\bfrequenc(?:y|ies)\b|\btally\b"
    ),
    (
        "多少次",
        "几次",
        "幾次",
        "次数",
        "次數",
        "统计",
        "統計",
        "计数",
        "計數",
        "频率",
        "頻率",
        "最常",
        "出现最多",
        "出現最多",
    ),
)
# "count" asks for counting as a verb or as "the count of", not as the last word of a name
# ("the ledger's replica count", "retry count": a setting whose value is asked).
_QUANTITY = _Cues(
    _english(
        r"\bhow\s+many\b|(?:^|[.!?;:,(\n]\s*|\b(?:please|and|then|to)\s+)count(?:s|ing)?\b"
        r"|\b(?:the|a|total)\s+count\s+of\b|\bcounts\s+of\b|\bcounted\b|\btop\s+\d+"
    ),
    ("多少个", "多少個", "几个", "幾個", "一共", "总共", "總共", "多少"),
)
_RELATION = _Cues(
    _english(
        r"\brelations?(?:hips?)?\b|\brelated\s+to\b|\bconnected\s+to\b|\bpath\s+from\b"
        r"|\blinks?\s+to\b"
    ),
    ("关系", "關係", "关联", "關聯", "路径", "路徑"),
)
_VALUE = _Cues(
    _english(r"\b(?:current|final|latest)\s+value\b|\bvalue\s+of\b|\bset\s+to\b"),
    ("当前值", "當前值", "的值", "什么值", "什麼值", "最终值", "最終值"),
)
_STATE = _Cues(
    _english(
        r"\bvalues?\b|\bcurrent(?:ly)?\b|\bfinal\b|\blatest\b|\bnow\b|\bwhich\s+variables?\b"
        r"|\bvariables?\b"
    ),
    ("当前", "當前", "目前", "现在", "現在", "最终", "最終", "最后", "最後", "值"),
    ("出现在", "出現在"),  # "appears in/at": 出现 + 在, not 现在 ("now")
)
_WORDING = _Cues(
    _english(
        r"\bexact(?:ly)?\b|\bverbatim\b|\bquot(?:e|ed|es|ation)\b|\bword(?:ing|ed)?\b"
        r"|\bphras(?:e|ed|ing)\b|\bliterally\b|\bwhat\s+did\s+\w+\s+(?:say|write|reply|answer)\b"
    ),
    ("原话", "原話", "原文", "逐字", "措辞", "措辭", "怎么说", "怎麼說"),
)


# The task asks for the most frequent words themselves (not for how often one term occurs).
_TOP_WORDS = _english(
    r"\bmost\s+(?:common|frequent|used)\b|\btop\s+\d+|\bcommon(?:est)?\s+(?:words?|terms?)\b"
    r"|\bword\s+(?:counts?|frequenc(?:y|ies))\b|\bfrequenc(?:y|ies)\s+of\s+(?:all|each|every)\b"
)
_TOP_WORDS_ZH = ("最常", "最多", "词频", "詞頻", "高频", "高頻")
_TOP_K = _english(
    r"\btop\s+(\d+)|\b(\d+)\s+(?:most\s+(?:common|frequent|used)|commonest)|前\s*(\d+)"
)


@dataclass(frozen=True, slots=True)
class TaskRoute:
    """A routing decision. ``labels`` is the requested relation label sequence, if any."""

    route: str
    reason: str
    wording_sensitive: bool
    labels: tuple[str, ...]
    count_terms: tuple[str, ...]
    wants_top_terms: bool
    #: How many most frequent words the task asks for ("top 5", "the 10 most common"), if said.
    top_k: int | None = None
    #: The count terms were quoted: each counts exactly as written, without inflections.
    terms_quoted: bool = False


def _continues(char: str) -> bool:
    """Whether ``char`` continues a word (so a label cannot end before it)."""
    return char.isalnum() or char in "_-"


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def _label_in_words(part: str, known: Collection[str]) -> tuple[str | None, str]:
    """The known label with the most words that ``part`` starts with in plain words ("reports
    to" for ``reports_to``, "owned" for ``owns``), and the words after it."""
    words = label_words(part)
    best: tuple[int, str] | None = None
    for label in sorted(known):
        wanted = label_words(label)
        if words_start_with(words, wanted) and (best is None or len(wanted) > best[0]):
            best = (len(wanted), label)
    if best is None:
        return None, ""
    return best[1], " ".join(words[best[0] :])


def requested_labels(task: str, known: Collection[str] = ()) -> tuple[str, ...]:
    """Labels of a ``relation: a > b`` predicate, in order, even inside a sentence.

    Each label is the longest relation label of the history (``known``) that the text at its
    place starts with (as written, else in plain words: ``reports to`` for ``reports_to``),
    or else that text up to sentence punctuation. A label followed by more
    words ends the predicate: "relation: assigned > owns, which archive ..." asks for
    ``assigned > owns``.
    """
    match = _PREDICATE.search(task)
    if not match:
        return ()
    by_length = sorted({_fold(label): label for label in known}.items(), key=lambda kv: -len(kv[0]))
    labels: list[str] = []
    for part in _LABEL_SEPARATOR.split(match[1].strip()):
        folded = _fold(part)
        label, rest = None, ""
        for name, spelling in by_length:
            if folded == name or (folded.startswith(name) and not _continues(folded[len(name)])):
                label, rest = spelling, folded[len(name) :].strip()
                break
        if label is None:
            label, rest = _label_in_words(part, known)
        if label is None:
            head = _LABEL_END.split(part, maxsplit=1)
            label, rest = head[0].strip(), (head[1].strip() if len(head) > 1 else "")
        if not label:
            break
        labels.append(label)
        if rest:  # the sentence goes on: this was the last label
            break
    return tuple(labels)


def route_task(task: str, variables: Collection[str], labels: Collection[str]) -> TaskRoute:
    """Pick the route for ``task`` given the variable names and relation labels in the history."""
    wording = _WORDING.find(task)
    predicate = requested_labels(task, labels)
    wants_top = bool(_TOP_WORDS.search(task)) or any(cue in task for cue in _TOP_WORDS_ZH)
    top_match = _TOP_K.search(task)
    top_k = next((int(n) for n in top_match.groups() if n), None) if top_match else None

    def make(route: str, reason: str) -> TaskRoute:
        counting = route == "count"
        terms = terms_named_in(task) if counting else ()
        return TaskRoute(
            route,
            reason,
            wording is not None,
            predicate,
            terms,
            wants_top and counting,
            top_k if counting else None,
            counting and names_quoted_terms(task),
        )

    if predicate:
        return make("relation", f"reference predicate 'relation: {' > '.join(predicate)}'")
    frequency = _FREQUENCY.find(task)
    if frequency:
        return make("count", frequency)
    mentions = TaskMentions(task)
    named_vars = mentions.variables(sorted(variables))
    value = _VALUE.find(task) if variables else None
    quantity = _QUANTITY.find(task)
    if quantity and not named_vars and not value:
        return make("count", quantity)
    # A quantity cue that lost to a named variable or a value cue is named in the reason.
    over = f" (over the count cue {quantity.split(' ', 2)[2]})" if quantity else ""
    relation_cue = _RELATION.find(task)
    if relation_cue:
        return make("relation", relation_cue)
    if named_vars:
        return make("state", f"task names variable '{named_vars[0]}'{over}")
    if value:
        return make("state", f"{value}{over}")
    named_labels = sorted(label for label in labels if mentions.label(label))
    if named_labels:
        return make("relation", f"task names relation label '{named_labels[0]}'")
    state_cue = _STATE.find(task) if variables else None
    if state_cue:
        return make("state", state_cue)
    if wording:
        return make("raw", f"wording cue ({wording}): source text is kept verbatim")
    return make("raw", "no route cue: plain retrieval question")
