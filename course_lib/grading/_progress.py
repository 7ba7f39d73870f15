"""A progress bar on standard error, for the grader's long runs.

On a terminal it redraws one line (``grading  37/200 [#####.....]  18%  0:12, ~0:53 left``);
elsewhere (a log file, CI) it writes a line at every tenth of the way, so logs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class ProgressBar:
    """Counts ``total`` steps; ``update()`` after each, ``close()`` at the end."""

    def __init__(
        self, total: int, label: str = "grading", stream: TextIO | None = None, *, enabled=True
    ) -> None:
        self.total = max(0, total)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and self.total > 0
        self.done = 0
        self.started = time.monotonic()
        self.drawn = 0.0
        self.tenth = 0
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        if self.enabled and self.terminal:
            self._draw()

    def text(self) -> str:
        fraction = self.done / self.total if self.total else 1.0
        width = 24
        filled = round(width * fraction)
        elapsed = time.monotonic() - self.started
        left = ""
        if 0 < self.done < self.total:
            left = f", ~{_clock(elapsed / self.done * (self.total - self.done))} left"
        bar = "#" * filled + "." * (width - filled)
        return (
            f"{self.label} {self.done:>{len(str(self.total))}}/{self.total} [{bar}] "
            f"{fraction:4.0%}  {_clock(elapsed)}{left}"
        )

    def _draw(self) -> None:
        self.stream.write("\r" + self.text() + "\033[K")
        self.stream.flush()
        self.drawn = time.monotonic()

    def update(self, steps: int = 1) -> None:
        self.done = min(self.total, self.done + steps)
        if not self.enabled:
            return
        if self.terminal:
            if time.monotonic() - self.drawn >= 0.1 or self.done == self.total:
                self._draw()
        elif self.done * 10 // self.total > self.tenth:
            self.tenth = self.done * 10 // self.total
            self.stream.write(self.text() + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.terminal:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False
