"""The Pareto front of systems over several objectives (quality up, latency and index size down)."""

from __future__ import annotations

from collections.abc import Sequence


def dominates(a: Sequence[float], b: Sequence[float], maximise: Sequence[bool]) -> bool:
    """Whether ``a`` is at least as good as ``b`` on every objective and better on one."""
    at_least = all((x >= y) if up else (x <= y) for x, y, up in zip(a, b, maximise, strict=True))
    better = any((x > y) if up else (x < y) for x, y, up in zip(a, b, maximise, strict=True))
    return at_least and better


def front(points: Sequence[Sequence[float]], maximise: Sequence[bool]) -> list[int]:
    """Indexes of the points no other point dominates, in input order (O(n^2): spaces are small)."""
    return [
        i
        for i, point in enumerate(points)
        if not any(dominates(other, point, maximise) for j, other in enumerate(points) if j != i)
    ]
