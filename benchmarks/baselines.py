"""What users would pick instead: a recency trimmer and the bm25s library, same budget."""

from __future__ import annotations

from collections.abc import Sequence

from tomc._core.tokens import LexicalCounter

_COUNTER = LexicalCounter()


def lines_of(history: str) -> list[str]:
    return [line for line in history.splitlines() if line.strip()]


def recency_truncation(lines: Sequence[str], budget: int) -> str:
    """Keep the newest lines that fit, stopping at the first that does not (a plain trimmer)."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = _COUNTER.count(line)
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    return "".join(line + "\n" for line in reversed(kept))


def bm25s_index(lines: Sequence[str]):
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(list(lines), stopwords="en", show_progress=False), show_progress=False
    )
    return retriever


def bm25s_select(lines: Sequence[str], task: str, budget: int, retriever=None) -> str:
    """Rank lines with bm25s for the task and pack the best that fit, in source order."""
    import bm25s

    if retriever is None:
        retriever = bm25s_index(lines)
    query = bm25s.tokenize([task], stopwords="en", show_progress=False)
    if not query.vocab:
        order = list(range(len(lines) - 1, -1, -1))
    else:
        docs, scores = retriever.retrieve(query, k=len(lines), show_progress=False, n_threads=1)
        order = [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]
        seen = set(order)
        order += [i for i in range(len(lines) - 1, -1, -1) if i not in seen]
    kept = []
    used = 0
    for index in order:
        cost = _COUNTER.count(lines[index])
        if used + cost <= budget:
            kept.append(index)
            used += cost
    return "".join(lines[i] + "\n" for i in sorted(kept))
