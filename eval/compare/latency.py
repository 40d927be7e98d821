"""Latency that measures the strategy, not the machine: how often each question is timed, the 95% intervals of
the search p50 and p95, which systems' latencies can be told apart, and the machine's load while they ran.

A question's time is the fastest of its ``repeat`` runs: a slower run is the same work plus time the process
was not running (another process had the core, a page fault, a timer), which says nothing about the strategy
(as Python's ``timeit`` documentation puts it: "the lowest value gives a lower bound for how fast your machine
can run the given code snippet; higher values ... are typically ... caused by other processes interfering").
On a 2-core machine with two other CPU-bound processes, one run per question put most strategies' p95 at 4 to
29 ms, the scheduler's time slices, whatever their p50 (reports/latency.md, "Stable latency"); :mod:`.timing`
interleaves the repeats of the systems compared.

The intervals are percentile bootstrap intervals over the questions (``RESAMPLES`` resamples, seeded): how much
the p50 and p95 move with the sample of questions. Two systems answer the same questions, so each pair is
compared on the same resamples (paired): their p50s (or p95s) cannot be told apart when the 95% interval of the
difference holds 0.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import RagEvalError

if TYPE_CHECKING:  # numpy is imported where the intervals are computed: the command line loads this module
    import numpy as np

#: Runs per question in ``compare`` (its ``--repeat``): its time is the fastest. Five keep a question's time
#: free of the machine's pauses unless all five are hit (measured in reports/latency.md).
DEFAULT_REPEAT = 5
MAX_REPEAT = 100
RESAMPLES = 1000
LEVEL = 0.95
#: The statistics given intervals, as ``latency_ms`` names them (``median`` is the p50).
STATISTICS = ("median", "p95")
#: Resampled values held at once (resamples x questions): the bootstrap runs in blocks of about this many.
_BLOCK = 2_000_000


def check_repeat(repeat: object) -> int:
    """``repeat`` as runs per question: a whole number from 1 to ``MAX_REPEAT``, else one error."""
    if type(repeat) is not int or not 1 <= repeat <= MAX_REPEAT:
        raise RagEvalError(
            f"--repeat must be a whole number from 1 to {MAX_REPEAT}, not {repeat!r}",
            hint=f"the default, {DEFAULT_REPEAT}, times each question {DEFAULT_REPEAT} times and keeps the fastest",
        )
    return repeat


def load_average() -> list[float] | None:
    """The machine's load average over 1, 5 and 15 minutes (None where the system has none)."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def percentile_index(count: int, fraction: float) -> int:
    """The sorted sample's index ``latency_summary`` reports as the ``fraction`` percentile (nearest rank)."""
    return min(count - 1, int(round(fraction * (count - 1))))


def _statistic(ordered: np.ndarray, name: str) -> np.ndarray:
    """``name`` of each row of sorted resamples, as ``latency_summary`` computes it of one sample."""
    import numpy as np

    if name == "median":
        return np.median(ordered, axis=-1)
    return ordered[..., percentile_index(ordered.shape[-1], float(name[1:]) / 100)]


def resampled(samples: dict[str, Sequence[float]], *, seed: int | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Per system and statistic, its value on each of ``RESAMPLES`` bootstrap resamples of the questions; every
    system is resampled with the same draws (they answered the same questions, in the same order). The seed is
    the significance tests' (``stats.SEED``) unless given."""
    import numpy as np

    from ..metrics.significance import SEED

    sizes = {len(values) for values in samples.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError("every system needs the same, non-zero number of questions")
    count = sizes.pop()
    rng = np.random.default_rng(SEED if seed is None else seed)
    block = max(1, _BLOCK // count)
    found: dict[str, dict[str, list[np.ndarray]]] = {name: {s: [] for s in STATISTICS} for name in samples}
    arrays = {name: np.asarray(values, dtype=float) for name, values in samples.items()}
    for start in range(0, RESAMPLES, block):
        picks = rng.integers(0, count, size=(min(block, RESAMPLES - start), count))
        for name, values in arrays.items():
            ordered = np.sort(values[picks], axis=1)
            for statistic in STATISTICS:
                found[name][statistic].append(_statistic(ordered, statistic))
    return {
        name: {s: np.concatenate(parts) for s, parts in by_statistic.items()} for name, by_statistic in found.items()
    }


def interval(values: np.ndarray) -> list[float]:
    """The central ``LEVEL`` percentile interval of bootstrap values, in ms to 4 decimals."""
    import numpy as np

    tail = (1 - LEVEL) / 2
    return [round(float(np.quantile(values, tail)), 4), round(float(np.quantile(values, 1 - tail)), 4)]


def intervals_and_pairs(rows: list[dict[str, Any]], *, seed: int | None = None) -> list[dict[str, Any]]:
    """Give each timed row its ``latency_ci95_ms`` (search median and p95) and return, for every pair of them
    and each statistic, the difference's 95% interval and which is faster (None: they cannot be told apart).

    Rows are timed when they hold ``latency_samples_ms["search"]`` (one time per question); rows with another
    number of questions than the first timed one (none in a comparison) are left out."""
    timed = [row for row in rows if (row.get("latency_samples_ms") or {}).get("search")]
    if not timed:
        return []
    count = len(timed[0]["latency_samples_ms"]["search"])
    timed = [row for row in timed if len(row["latency_samples_ms"]["search"]) == count]
    boot = resampled({row["name"]: row["latency_samples_ms"]["search"] for row in timed}, seed=seed)
    for row in timed:
        row["latency_ci95_ms"] = {"search": {s: interval(boot[row["name"]][s]) for s in STATISTICS}}
    pairs = []
    for a, b in itertools.combinations(timed, 2):
        for statistic in STATISTICS:
            low, high = interval(boot[b["name"]][statistic] - boot[a["name"]][statistic])
            point_a = a["latency_ms"]["search"][statistic]
            point_b = b["latency_ms"]["search"][statistic]
            faster = a["name"] if low > 0 else b["name"] if high < 0 else None
            pairs.append(
                {
                    "a": a["name"],
                    "b": b["name"],
                    "statistic": statistic,
                    # b's value over a's: how many times slower b is (None when a's is 0)
                    "ratio": round(point_b / point_a, 3) if point_a > 0 else None,
                    "difference_ci95_ms": [low, high],
                    "faster": faster,
                }
            )
    return pairs
