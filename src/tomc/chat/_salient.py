"""Which lines of a tool's output stand out from the ordinary ones around them.

An agent's tool output is mostly filler for the question at hand (the body of a file, a run of
similar log lines); what it needs later is often the line that is different: an error or a
warning, a traceback frame, a URL, a ticket or a hash, a version pin, a sentence among code, a
JSON record among plain log lines. The work memory ranks such lines above ordinary lines of
their call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .._core.values import TRACEBACK_START

__all__ = ["salient", "traceback_blocks"]

# Lines that stand out in a tool's output: a level or an error, a traceback frame, a URL, a
# ticket, a hash or a long id, a version pin. One search per kind, each behind what it cannot
# match without: words, or a cheaper pattern (Python's regex engine tries every alternative at
# every position of a line: one pattern of all of them took 7 us a line, the largest part of a
# whole build's ranking).
_SALIENT: tuple[tuple[tuple[str, ...] | re.Pattern[str], re.Pattern[str]], ...] = (
    (
        ("ERROR", "WARN", "FATAL", "CRITICAL", "FAIL", "Traceback", "Exception", "panic"),
        re.compile(
            r"\b(?:ERROR|WARN(?:ING)?|FATAL|CRITICAL|FAIL(?:ED|URE)?|Traceback|Exception|panic)\b"
        ),
    ),
    (("Error",), re.compile(r"\b[A-Za-z]+Error\b")),
    (("File",), re.compile(r"^\s*File \"")),
    (("://",), re.compile(r"https?://")),
    (re.compile(r"[A-Z0-9]-\d"), re.compile(r"\b[A-Z][A-Z0-9]+-\d+\b")),
    (re.compile(r"=\d"), re.compile(r"[\w.-]==?\d")),
    (re.compile(r"\d\.\d+\.\d"), re.compile(r"\b[vV]?\d+\.\d+\.\d+\b")),
    (re.compile(r"[0-9a-f]{10}"), re.compile(r"\b[0-9a-f]{10,}\b")),
)
_PROSE = re.compile(r"\s*(?:[-*#>]+\s*)?[A-Z][a-z]+(?: [\w'’,()-]+){5,}[.!?:]?\s*")


def _shape(line: str) -> str:
    """What kind of line this is, to find one unlike its neighbours."""
    stripped = line.lstrip()
    if stripped[:1] in "{[" and stripped.rstrip()[-1:] in "}]":
        return "record"
    if _PROSE.fullmatch(line):
        return "prose"
    return "other"


def salient(lines: Sequence[str]) -> list[bool]:
    """Which lines stand out: by what they say (:data:`_SALIENT`), or as a sentence or a JSON
    record among lines of another kind (a note inside code, an event inside a plain log)."""
    shapes = [_shape(line) for line in lines]
    out = []
    last = len(lines) - 1
    for index, line in enumerate(lines):
        shape = shapes[index]
        unlike = (
            shape != "other"
            and (index == 0 or shapes[index - 1] != shape)
            and (index == last or shapes[index + 1] != shape)
        )
        out.append(unlike or _says_so(line))
    return out


def _says_so(line: str) -> bool:
    """Whether ``line`` says what stands out (:data:`_SALIENT`)."""
    for needs, pattern in _SALIENT:
        if isinstance(needs, tuple):
            if any(text in line for text in needs) and pattern.search(line):
                return True
        elif needs.search(line) and pattern.search(line):
            return True
    return False


def traceback_blocks(lines: Sequence[str]) -> list[int]:
    """For each line, the index of the traceback it belongs to (its first line), else -1.

    A Python traceback is one piece of evidence: its title, every frame (the indented lines),
    and the exception line that ends it. Its last frame names the file where the error was
    raised, in words that are those of code; the words that say what it is are on the title.
    """
    out = [-1] * len(lines)
    start = -1
    for index, line in enumerate(lines):
        if TRACEBACK_START.match(line):
            start = index
            out[index] = start
        elif start >= 0:
            out[index] = start
            if not line[:1].isspace():
                start = -1  # the exception line ends it
    return out
