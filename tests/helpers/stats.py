"""scipy's permutation test, the reference for the randomization test."""

from __future__ import annotations

import numpy as np
import pytest

scipy_stats = pytest.importorskip("scipy.stats")


def scipy_p(a: list[float], b: list[float], n_resamples: int, random_state: int = 1) -> float:
    result = scipy_stats.permutation_test(
        (np.array(a), np.array(b)),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        n_resamples=n_resamples,
        alternative="two-sided",
        random_state=random_state,
    )
    return float(result.pvalue)
