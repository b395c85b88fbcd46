"""Progress of long steps on stderr, the way pip and cargo show it: a live bar (tqdm) on a
terminal; elsewhere (a log file, a CI job, a pipe) at most one plain line every
:data:`LINE_PERIOD_SEC` seconds, never a carriage return; nothing with ``-q``.

Every verb with progress uses :func:`progress_bar`::

    with progress_bar("device", total=len(samples), unit="samples", quiet=args.quiet) as bar:
        for sample in samples:
            ...
            bar.update(1)
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

#: Off a terminal, the least time between two progress lines.
LINE_PERIOD_SEC = 5.0


class ProgressBar:
    """``total`` units of work: :meth:`update` as they are done, :meth:`close` at the end."""

    def __init__(self, label: str, total: int, unit: str, stream: IO[str], quiet: bool,
                 period_sec: float = LINE_PERIOD_SEC) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.n = 0
        self._stream = stream
        self._quiet = quiet
        self._period = period_sec
        self._began = time.monotonic()
        self._last_line = self._began
        self._bar: Any = None
        if not quiet and _is_terminal(stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=f"{label:<12}", unit=f" {unit}", file=stream,
                             dynamic_ncols=True)

    def update(self, done: int = 1) -> None:
        """``done`` more units are finished."""
        self.n += done
        if self._bar is not None:
            self._bar.update(done)
            return
        if self._quiet:
            return
        now = time.monotonic()
        if now - self._last_line >= self._period and self.n < self.total:
            self._last_line = now
            rate = self.n / (now - self._began) if now > self._began else 0.0
            share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
            self._stream.write(f"{self.label}: {self.n}/{self.total} {self.unit}{share}, "
                               f"{rate:.1f} {self.unit}/s\n")
            self._stream.flush()

    def set(self, done: int, total: int | None = None) -> None:
        """``done`` units are finished in all (``total`` ignored: it is fixed)."""
        if done > self.n:
            self.update(done - self.n)

    def close(self) -> None:
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.close()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_bar(label: str, total: int, unit: str = "samples", *, quiet: bool = False,
                 stream: IO[str] | None = None) -> ProgressBar:
    """Progress of ``total`` ``unit`` on ``stream`` (default stderr): a bar on a terminal,
    else a line every few seconds; nothing when ``quiet``."""
    return ProgressBar(label, total, unit, stream if stream is not None else sys.stderr, quiet)
