"""Paired randomization tests with Holm's correction, and win/tie/loss counts."""

from __future__ import annotations

import itertools

import numpy as np

PERMUTATIONS = 10_000
SEED = 20261129


def randomization_test(a: list[float], b: list[float], *, permutations: int = PERMUTATIONS, seed: int = SEED) -> float:
    """Two-sided p-value of the mean paired difference ``a - b`` under random sign flips.

    Defined as ``scipy.stats.permutation_test(..., permutation_type="samples")`` defines it: all
    ``2**n`` sign vectors when that is at most ``permutations`` (exact), otherwise ``permutations``
    random ones from a fixed seed with the observed statistic counted once (p never 0); the two-sided
    p-value is twice the smaller one-sided one, capped at 1.
    """
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = len(diffs)
    if n == 0:
        return 1.0
    observed = diffs.mean()
    if 2**n <= permutations:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        adjustment = 0
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice((1.0, -1.0), size=(permutations, n))
        adjustment = 1
    null = (signs * diffs).mean(axis=1)
    # Relative tolerance as scipy uses, so floating-point noise does not decide ties with the observed value.
    gamma = abs(1e-14 * observed) if observed else 1e-14
    greater = ((null >= observed - gamma).sum() + adjustment) / (len(null) + adjustment)
    less = ((null <= observed + gamma).sum() + adjustment) / (len(null) + adjustment)
    return float(min(1.0, 2 * min(greater, less)))


def holm(p_values: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for position, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - position) * p_values[index]))
        adjusted[index] = running
    return adjusted


def win_tie_loss(a: list[float], b: list[float], *, epsilon: float = 1e-9) -> tuple[int, int, int]:
    """Queries where ``a`` beats, equals or trails ``b``."""
    wins = sum(x > y + epsilon for x, y in zip(a, b, strict=False))
    losses = sum(y > x + epsilon for x, y in zip(a, b, strict=False))
    return wins, len(a) - wins - losses, losses
