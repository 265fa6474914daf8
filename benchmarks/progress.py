"""Progress for long benchmark steps (a bar on a terminal, plain lines otherwise) and where the
data-bound benchmarks find their files.

    for case in tqdm(cases, desc="retention", file=sys.stderr): ...   # drop-in for tqdm's
    with step("LoCoMo recall"): ...                                    # start and end lines
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

from tomc._progress import Progress, is_terminal

__all__ = ["DATA_DIR", "data_file", "is_terminal", "reporter", "say", "step", "tqdm"]

T = TypeVar("T")
PREFIX = "bench: "

#: Where data-bound benchmarks read their files at run time (never copied into the repository):
#: ``$TOMC_BENCH_DATA`` if set, else ``../shared/data`` beside the clone.
DATA_DIR = Path(
    os.environ.get("TOMC_BENCH_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)


def data_file(name: str) -> Path:
    """The path of a benchmark data file (it may not exist: callers skip with its name)."""
    return DATA_DIR / name


def say(message: str, stream: IO[str] | None = None) -> None:
    """One progress line on stderr (flushed, so make and CI show it at once)."""
    print(f"{PREFIX}{message}", file=stream if stream is not None else sys.stderr, flush=True)


@contextmanager
def step(label: str, stream: IO[str] | None = None) -> Iterator[None]:
    """A line when a step starts and one when it ends, with its time."""
    say(f"{label} ...", stream)
    started = time.perf_counter()
    yield
    say(f"{label} done in {time.perf_counter() - started:.0f} s", stream)


def _counted(iterable: Iterable[T], progress: Progress) -> Iterator[T]:
    with progress:
        for item in iterable:
            yield item
            progress.update()


def tqdm(
    iterable: Iterable[T],
    desc: str = "",
    total: int | None = None,
    file: IO[str] | None = None,
    **options: Any,
) -> Iterable[T]:
    """tqdm's bar on a terminal; plain progress lines otherwise (same arguments)."""
    stream = file if file is not None else sys.stderr
    if is_terminal(stream):
        from tqdm import tqdm as bar

        return bar(iterable, desc=desc, total=total, file=stream, **options)
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    return _counted(iterable, Progress(desc, total, stream=stream, prefix=PREFIX, bar=False))


def reporter(desc: str) -> tuple[Callable[[str, int, int], None], Callable[[], None]]:
    """A ``progress(label, done, total)`` callback (as :func:`tomc._simulation.simulate.simulate`
    takes) and a function that ends its display."""
    state: dict[str, Progress] = {}

    def progress(label: str, done: int, total: int) -> None:
        if "bar" not in state:
            state["bar"] = Progress(desc, total, prefix=PREFIX)
        bar = state["bar"]
        bar.update(done - bar.done, label)

    def close() -> None:
        if "bar" in state:
            state["bar"].close()

    return progress, close
