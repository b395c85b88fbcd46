"""Timing a model on the device: the device time evaluator's limits, the checks of a timing request
against them, how long the host waits for one, and the seconds it answers with their statistics.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from project_api.errors import SessionError

if TYPE_CHECKING:

    pass



#: The device time evaluator's limits (crt/src/time_evaluator/time_evaluator.c; TVM's are alike):
#: runs per round and rounds per :meth:`Session.time` call.
MAX_TIMING_NUMBER = 1_000_000_000

MAX_TIMING_REPEAT = 65536

#: A timing call's wait is this many times the work it asks for (per-run time measured on the
#: device x runs), plus the session's usual per-reply wait.
TIMING_WAIT_FACTOR = 2.0


@dataclass(frozen=True)
class TimingResult:
    """Device-measured seconds per call, one entry per repeat, with summary statistics."""

    results: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results)

    def __str__(self) -> str:
        return (
            f"mean {self.mean * 1e3:.4f} ms, median {self.median * 1e3:.4f} ms, "
            f"min {self.min * 1e3:.4f} ms, max {self.max * 1e3:.4f} ms, std {self.std * 1e3:.4f} ms "
            f"({len(self.results)} repeats)"
        )


def _check_timing(number: int, repeat: int, min_repeat_ms: int) -> None:
    for what, value, top in (("number", number, MAX_TIMING_NUMBER),
                             ("repeat", repeat, MAX_TIMING_REPEAT)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise SessionError(f"time(): {what} must be an integer; got {value!r}")
        if not 1 <= int(value) <= top:
            raise SessionError(
                f"time(): {what} {value} is out of range; the device's time evaluator takes "
                f"1 <= {what} <= {top}"
            )
    if isinstance(min_repeat_ms, bool) or not isinstance(min_repeat_ms, int | np.integer) or (
        not 0 <= int(min_repeat_ms) < 2**63
    ):
        raise SessionError(f"time(): min_repeat_ms must be an integer >= 0; got {min_repeat_ms!r}")
