"""Paired randomization tests with Holm's correction, and win/tie/loss counts."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...errors import RagEvalError

PERMUTATIONS = 10_000
SEED = 20261129
# Random sign vectors are drawn and summed this many numbers at a time, so memory stays bounded however
# many queries there are (the draws, and so the p-value, are the same as in one block).
_BLOCK = 1 << 20
# Null means within this fraction of the per-query values' size of the observed mean count as ties with it:
# far above floating-point noise (0.1 + 0.2 != 0.3), far below any difference a metric can show.
_TIE = 1e-9


class StatsError(RagEvalError, ValueError):
    """Per-query values a significance test cannot use: unpaired, or not finite numbers."""


def _paired(a: list[float], b: list[float], test: str) -> tuple[np.ndarray, np.ndarray]:
    left, right = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(left) != len(right):
        raise StatsError(
            f"{test}: {len(left)} per-query values against {len(right)}; score both systems on the same queries"
        )
    for values in (left, right):
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            raise StatsError(f"{test}: per-query value number {bad[0] + 1} is {values[bad[0]]}, not a finite number")
    return left, right


def randomization_test(a: list[float], b: list[float], *, permutations: int = PERMUTATIONS, seed: int = SEED) -> float:
    """Two-sided p-value of the mean paired difference ``a - b`` under random sign flips.

    Defined as ``scipy.stats.permutation_test(..., permutation_type="samples")`` defines it: all
    ``2**n`` sign vectors when that is at most ``permutations`` (exact), otherwise ``permutations``
    random ones from a fixed seed with the observed statistic counted once (p never 0); the two-sided
    p-value is twice the smaller one-sided one, capped at 1. Unlike scipy, a null mean within a tolerance
    relative to the size of the per-query values (not of the observed mean) is a tie, so sums equal in
    exact arithmetic stay tied when the observed mean is near 0. Raises :class:`StatsError` on unpaired or
    non-finite values.
    """
    left, right = _paired(a, b, "randomization test")
    diffs = left - right
    n = len(diffs)
    if n == 0:
        return 1.0
    observed = diffs.mean()
    if 2**n <= permutations:
        null = (np.array(list(itertools.product((1.0, -1.0), repeat=n))) * diffs).mean(axis=1)
        adjustment = 0
    else:
        rng = np.random.default_rng(seed)
        rows = max(1, _BLOCK // n)
        null = np.concatenate(
            [
                (rng.choice((1.0, -1.0), size=(min(rows, permutations - start), n)) * diffs).mean(axis=1)
                for start in range(0, permutations, rows)
            ]
        )
        adjustment = 1
    scale = max(float(np.abs(left).max()), float(np.abs(right).max()))
    gamma = _TIE * scale if scale else _TIE
    greater = ((null >= observed - gamma).sum() + adjustment) / (len(null) + adjustment)
    less = ((null <= observed + gamma).sum() + adjustment) / (len(null) + adjustment)
    return float(min(1.0, 2 * min(greater, less)))


def holm(p_values: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order; raises :class:`StatsError` on a p outside [0, 1]."""
    for p in p_values:
        if not 0.0 <= p <= 1.0:  # NaN fails too
            raise StatsError(f"Holm correction: {p!r} is not a p-value (a number from 0 to 1)")
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for position, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - position) * p_values[index]))
        adjusted[index] = running
    return adjusted


def win_tie_loss(a: list[float], b: list[float], *, epsilon: float = 1e-9) -> tuple[int, int, int]:
    """Queries where ``a`` beats, equals or trails ``b``; :class:`StatsError` on unpaired or non-finite values."""
    left, right = _paired(a, b, "win/tie/loss")
    wins = int((left > right + epsilon).sum())
    losses = int((right > left + epsilon).sum())
    return wins, len(left) - wins - losses, losses


def student_t_quantile(probability: float, df: int) -> float:
    """The ``probability`` quantile of Student's t distribution with ``df`` (a positive whole number) degrees of
    freedom: the exact finite series of its distribution function for whole ``df`` (Abramowitz and Stegun
    26.7.3 and 26.7.4, in the angle theta = atan(t / sqrt(df))), inverted by bisection on theta."""
    if not 0.0 < probability < 1.0 or df < 1 or df != int(df):
        raise ValueError(f"Student t quantile: needs 0 < probability < 1 and whole df >= 1, got {probability}, {df}")
    if probability < 0.5:
        return -student_t_quantile(1.0 - probability, df)
    target = 2.0 * probability - 1.0  # P(|T| <= t)
    # The series' coefficients after its leading 1: 2/3, 2*4/(3*5), ... (odd df) or 1/2, 1*3/(2*4), ... (even df).
    k = np.arange(1, (df - 2) // 2 + 1, dtype=float)
    coefficients = np.cumprod(2 * k / (2 * k + 1) if df % 2 else (2 * k - 1) / (2 * k))

    def within(theta: float) -> float:
        cos, sin = math.cos(theta), math.sin(theta)
        powers = cos ** (2 * np.arange(1, len(coefficients) + 1))
        series = 1.0 + float(coefficients @ powers)
        if df % 2:
            return 2 / math.pi * (theta + (sin * cos * series if df > 1 else 0.0))
        return sin * series

    low, high = 0.0, math.pi / 2
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        low, high = (middle, high) if within(middle) < target else (low, middle)
    return math.sqrt(df) * math.tan((low + high) / 2)
