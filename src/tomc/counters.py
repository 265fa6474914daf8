"""Token counters: the lexical estimate (default) and exact BPE counts from shipped vocabularies.

A counter is anything with ``name: str`` and ``count(text) -> int``. The packer counts every
row once as ``row + "\\n"`` and re-counts the joined memory at the end, so a counter must be
additive over newline-terminated rows; both built-in counters are (BPE pre-tokens never cross a
line break into the next row's text).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .errors import CounterUnavailableError, InvalidOptionError
from .lexicon import LEXICAL_PATTERN

__all__ = ["BpeCounter", "LexicalCounter", "TokenCounter", "get_counter"]

@runtime_checkable
class TokenCounter(Protocol):
    """What the compiler needs from a counter."""

    name: str

    def count(self, text: str) -> int: ...


@dataclass(frozen=True)
class LexicalCounter:
    """The default estimate: word runs, single CJK characters and single punctuation marks.

    It is a deterministic, dependency-free estimate, not what a provider bills.
    """

    name: str = "lexical"

    def count(self, text: str) -> int:
        return len(LEXICAL_PATTERN.findall(text))

    def tokenize(self, text: str) -> list[str]:
        return LEXICAL_PATTERN.findall(text)


@dataclass(frozen=True)
class BpeCounter:
    """Exact OpenAI BPE counts (``cl100k_base``, ``o200k_base``) from ``bpe-openai``.

    ``bpe-openai`` ships the vocabulary files inside the wheel, so counting never touches the
    network (``tiktoken`` would download them and fail offline).
    """

    encoding: str
    name: str = ""
    _encoder: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.encoding not in BPE_ENCODINGS:
            raise InvalidOptionError(
                f"unknown BPE encoding {self.encoding!r}; use one of "
                + ", ".join(f"'bpe:{name}'" for name in BPE_ENCODINGS)
            )
        try:
            import bpe_openai
        except ImportError as exc:
            raise CounterUnavailableError(
                f"counter 'bpe:{self.encoding}' needs the optional bpe extra: "
                "pip install 'tomc[bpe]' (it ships the vocabulary; no download at run time)"
            ) from exc
        object.__setattr__(self, "_encoder", bpe_openai.get_encoding(self.encoding))
        object.__setattr__(self, "name", f"bpe:{self.encoding}")

    def count(self, text: str) -> int:
        return len(self._encoder.encode_ordinary(text))


BPE_ENCODINGS = ("o200k_base", "cl100k_base")
COUNTER_NAMES = ("lexical", *(f"bpe:{name}" for name in BPE_ENCODINGS))


def get_counter(spec: str | TokenCounter = "lexical") -> TokenCounter:
    """Resolve ``"lexical"``, ``"bpe:<encoding>"`` or a counter object to a counter."""
    if isinstance(spec, str):
        if spec == "lexical":
            return LexicalCounter()
        if spec.startswith("bpe:"):
            return BpeCounter(spec[4:])
        if spec in BPE_ENCODINGS or spec == "bpe":
            raise InvalidOptionError(
                f"counter {spec!r} is ambiguous: name the encoding, e.g. 'bpe:o200k_base'"
            )
        raise InvalidOptionError(
            f"unknown counter {spec!r}; use one of {', '.join(map(repr, COUNTER_NAMES))} "
            "or an object with name and count(text)"
        )
    if isinstance(spec, TokenCounter) and callable(getattr(spec, "count", None)):
        return spec
    raise InvalidOptionError(
        f"counter must be a name or an object with name and count(text), not {type(spec).__name__}"
    )
