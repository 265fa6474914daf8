"""Progress of a long command: a bar on a terminal, plain lines otherwise.

``tomc simulate`` and the benchmark suite use it. On a terminal one line is redrawn in place;
into a file, a pipe or CI output it writes a line at the start, about every tenth of the way
(or every 30 s) and at the end, so logs stay readable and never go quiet for minutes.
"""

from __future__ import annotations

import sys
import time
from typing import IO

__all__ = ["Progress", "is_terminal"]

#: Lines at most this far apart (seconds) when the output is not a terminal.
PLAIN_INTERVAL_S = 30.0
BAR_WIDTH = 24


def is_terminal(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default: stderr) is an interactive terminal."""
    stream = stream if stream is not None else sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """Counts steps of a task of ``total`` steps (``None``: unknown) under the name ``desc``.

    ``prefix`` starts every plain line (``"bench: "``, ``"tomc: "``). ``bar`` forces the
    terminal bar on or off (default: on when ``stream`` is a terminal).
    """

    def __init__(
        self,
        desc: str,
        total: int | None = None,
        *,
        stream: IO[str] | None = None,
        prefix: str = "",
        bar: bool | None = None,
    ) -> None:
        self.desc = desc
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.prefix = prefix
        self.bar = is_terminal(self.stream) if bar is None else bar
        self.started = self._last = time.perf_counter()
        self._next_share = 0.1
        self._closed = False
        self._width = 0
        if self.bar:
            self._draw("")
        else:
            self._line(f"{self._count()}")

    def _count(self) -> str:
        return f"{self.done:,}/{self.total:,}" if self.total is not None else f"{self.done:,}"

    def _line(self, text: str) -> None:
        print(f"{self.prefix}{self.desc}: {text}", file=self.stream, flush=True)

    def _draw(self, label: str) -> None:
        elapsed = time.perf_counter() - self.started
        if self.total:
            filled = min(BAR_WIDTH, BAR_WIDTH * self.done // self.total)
            meter = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
        else:
            meter = ""
        text = f"{self.desc} {meter}{self._count()} {elapsed:.0f}s {label}".rstrip()
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write(f"\r{text}{' ' * pad}")
        self.stream.flush()

    def update(self, steps: int = 1, label: str = "") -> None:
        """``steps`` more steps are done; ``label`` names the step now running (bar only)."""
        self.done += steps
        now = time.perf_counter()
        if self.bar:
            self._draw(label)
            return
        share = self.done / self.total if self.total else 0.0
        finished = self.total is not None and self.done >= self.total
        if not finished and (
            (self.total and share >= self._next_share) or now - self._last >= PLAIN_INTERVAL_S
        ):
            shown = f"; now {label}" if label else ""
            self._line(f"{self._count()} ({now - self.started:.0f} s){shown}")
            self._last = now
            while self.total and self._next_share <= share:
                self._next_share += 0.1

    def close(self) -> None:
        """The last line: the count and the time taken."""
        if self._closed:
            return
        self._closed = True
        elapsed = time.perf_counter() - self.started
        if self.bar:
            self._draw("")
            self.stream.write("\n")
            self.stream.flush()
        else:
            self._line(f"{self._count()} done in {elapsed:.0f} s")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
