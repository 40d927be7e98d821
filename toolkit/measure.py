"""How long and how much: latency summaries and this process's resident memory, as compare and the engines
report them."""

from __future__ import annotations

import os
import statistics


def latency_summary(values: list[float]) -> dict[str, float]:
    """min, median, mean, p95, p99 and max, in milliseconds."""
    if not values:
        return {}
    ordered = sorted(values)

    def pct(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]

    return {
        name: round(value * 1000, 4)
        for name, value in (
            ("min", ordered[0]),
            ("median", statistics.median(ordered)),
            ("mean", statistics.fmean(ordered)),
            ("p95", pct(0.95)),
            ("p99", pct(0.99)),
            ("max", ordered[-1]),
        )
    }


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux ``/proc/self/statm``), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
