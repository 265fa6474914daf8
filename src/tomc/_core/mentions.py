"""Which names a task mentions: variables, relation entities and labels.

- An identifier is a whole word of the task, compared case-insensitively, except that a name
  that is also a stopword ("a", "it") must match in exact case. An identifier glued to CJK
  text is still a word: ``deploy_target的当前值`` mentions ``deploy_target``.
- An entity can also be mentioned as a phrase of whole words, with ``_`` and ``-`` read as
  spaces: "the deploy pipeline" mentions ``deploy_pipeline``.
- A name with CJK characters is mentioned when it occurs anywhere in the task's text, because
  Chinese and Japanese do not separate words with spaces: ``温度的当前值是什么？`` mentions
  ``温度``. One CJK character alone is too common to count as a mention.
- A relation label is also mentioned in plain words: its words in order, with ``_`` and ``-``
  read as spaces, in any case and any regular inflection ("who reports to whom" mentions
  ``reports_to``, "what does erin own" mentions ``owns``); a label that is one stopword
  ("is", "has") must be written as it is.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from .lexicon import CJK_CHAR, STOPWORDS, WORD_CHAR, inflections, stem

__all__ = ["TaskMentions", "label_words", "words_start_with"]

_TASK_WORD = re.compile(rf"{WORD_CHAR}(?:{WORD_CHAR}|-)*(?:\.(?:{WORD_CHAR}|-)+)*")
_NOT_WORD = re.compile(r"[^\w\s-]")


def spaced(text: str) -> str:
    """Case-folded, with ``_`` and ``-`` read as spaces: deploy_pipeline ~ "deploy pipeline"."""
    return " ".join(re.sub(r"[_\-]+", " ", text.casefold()).split())


_PLAIN_WORD = re.compile(rf"{WORD_CHAR}+")


def label_words(text: str) -> tuple[str, ...]:
    """The words of ``text`` as a label is compared: case-folded, ``_`` and ``-`` read as
    spaces (``Reports_To`` gives ``("reports", "to")``)."""
    return tuple(_PLAIN_WORD.findall(spaced(text)))


def _same_word(written: str, label: str) -> bool:
    """Whether ``written`` is ``label`` or one of its regular forms (owned ~ owns, deploys ~
    deploy): the same stem, or one is an inflection of the other."""
    return (
        written == label
        or stem(written) == stem(label)
        or written in inflections(label)
        or label in inflections(written)
    )


def words_start_with(words: Sequence[str], label: Sequence[str], at: int = 0) -> bool:
    """Whether ``words[at:]`` begins with the label's words, each in some regular form."""
    if not label or len(words) - at < len(label):
        return False
    return all(_same_word(words[at + k], word) for k, word in enumerate(label))


class TaskMentions:
    """The words of one task, and which names it mentions."""

    def __init__(self, task: str) -> None:
        self.words = set(_TASK_WORD.findall(task))
        self.folded_words = {word.casefold() for word in self.words}
        self._phrase_text = " " + spaced(_NOT_WORD.sub(" ", task)) + " "
        self._folded_task = task.casefold()
        self._plain = label_words(task)

    def _cjk_inside(self, names: Collection[str]) -> set[str]:
        """The CJK names that occur in the task, longest first: a name found only inside a
        longer one that was found (温度 inside 室内温度) is not mentioned on its own."""
        text = self._folded_task
        found = set()
        candidates = (n for n in names if len(n) >= 2 and CJK_CHAR.search(n))
        for name in sorted(candidates, key=lambda n: (-len(n), n)):
            folded = name.casefold()
            if folded in text:
                found.add(name)
                text = text.replace(folded, " ")
        return found

    def variables(self, names: Collection[str]) -> list[str]:
        """The variables the task names, in the order given."""
        inside = self._cjk_inside(names)
        found = []
        for name in names:
            folded = name.casefold()
            if (
                name in self.words
                or (folded in self.folded_words and folded not in STOPWORDS)
                or name in inside
            ):
                found.append(name)
        return found

    def entities(self, nodes: Collection[str]) -> set[str]:
        """The entities the task names: as a word, a phrase of words, or CJK text."""
        found = self._cjk_inside(nodes)
        for node in nodes:
            phrase = spaced(node)
            if node.casefold() in self.folded_words or (
                phrase and f" {phrase} " in self._phrase_text
            ):
                found.add(node)
        return found

    def label(self, label: str) -> bool:
        """Whether the task names this relation label: as a word, in plain words (any case,
        spaces for ``_``, regular inflections), or in CJK inside its text."""
        if label.casefold() in STOPWORDS:
            return label in self.words
        if label.casefold() in self.folded_words or self._cjk_inside([label]):
            return True
        words = label_words(label)
        return any(words_start_with(self._plain, words, at) for at in range(len(self._plain)))
