"""The randomization test agrees with scipy.stats.permutation_test; Holm's correction by hand."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.stats import scipy_p

from rag_eval.eval.metrics.significance import holm, randomization_test, win_tie_loss

A = [0.9, 0.5, 1.0, 0.3, 0.8, 0.0, 0.6, 0.7]
B = [0.6, 0.5, 0.7, 0.1, 0.9, 0.0, 0.2, 0.4]


def test_exact_case_matches_scipy() -> None:
    # 2**8 = 256 sign vectors: both enumerate them all, so the p-values must agree exactly.
    assert randomization_test(A, B) == pytest.approx(scipy_p(A, B, 10_000), abs=1e-12)


def test_identical_systems_have_p_one() -> None:
    assert randomization_test(A, A) == 1.0


def test_random_case_is_close_to_scipy_and_reproducible() -> None:
    rng = np.random.default_rng(0)
    a = list(rng.random(40))
    b = [x - 0.05 + 0.1 * y for x, y in zip(a, rng.random(40), strict=False)]
    ours = randomization_test(a, b)
    assert ours == randomization_test(a, b)  # fixed seed
    assert ours == pytest.approx(scipy_p(a, b, 10_000), abs=0.02)


def test_holm_by_hand() -> None:
    # Sorted p: 0.01 (x3 = 0.03), 0.02 (x2 = 0.04), 0.04 (x1 = 0.04, kept monotone).
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])


def test_win_tie_loss() -> None:
    assert win_tie_loss(A, B) == (5, 2, 1)
