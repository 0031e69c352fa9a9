"""Documents per time bin (pure): round widths, bins aligned on multiples of the width."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

NICE_BIN_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)




def bin_width(span_s: float, target_bins: int = 30) -> int:
    """The smallest round width (1 s, 2 s, 5 s, … 1 day) giving at most `target_bins` bins over `span_s`."""
    for width in NICE_BIN_SECONDS:
        if span_s / width <= target_bins:
            return width
    return int(math.ceil(span_s / target_bins / 86400)) * 86400


@dataclass
class TimeBins:
    width_s: int
    starts: list[float]  # seconds since the origin, one per bin
    counts: dict[str, list[int]]  # category → documents per bin


def bin_times(offsets: dict[str, Sequence[float]], target_bins: int = 30) -> TimeBins:
    """Documents per time bin for each category; `offsets` are seconds since the run started. Bins are
    aligned on multiples of the width, so the same run always bins the same way."""
    every = [t for values in offsets.values() for t in values]
    if not every:
        return TimeBins(1, [], {k: [] for k in offsets})
    low, high = min(every), max(every)
    width = bin_width(max(high - low, 1e-9), target_bins)
    first = math.floor(low / width)
    n = math.floor(high / width) - first + 1
    counts = {}
    for category, values in offsets.items():
        per_bin = [0] * n
        for t in values:
            per_bin[math.floor(t / width) - first] += 1
        counts[category] = per_bin
    return TimeBins(width, [(first + i) * width for i in range(n)], counts)


def time_unit(span_s: float) -> tuple[float, str]:
    """Divisor and label for an axis spanning `span_s` seconds."""
    if span_s <= 600:
        return 1.0, "s"
    if span_s <= 10 * 3600:
        return 60.0, "min"
    return 3600.0, "h"
