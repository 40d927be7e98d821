"""The relevance model's fit reaches the posterior mode: undamped Newton steps swung between two far points for
ever on some pools (a few hundred passages, mostly judged not relevant), and the model then drew from nonsense."""

from __future__ import annotations

import numpy as np

from rag_eval.eval.judging import settle


def test_the_fit_is_the_posterior_mode_on_every_pool_shape() -> None:
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(400):
        n = int(rng.integers(1, 400))
        x = rng.random(n) * rng.random()
        y = (rng.random(n) < rng.random() * 0.3).astype(float)
        if rng.random() < 0.3:
            y[:] = 0.0
        for regime in ("before", "after"):
            mean, deviation = (np.array(v, dtype=float) for v in settle.PRIOR[regime])
            theta, covariance = settle.fit_logistic(x, y, settle.PRIOR[regime])
            design = np.column_stack([np.ones_like(x), x])
            gradient = design.T @ (y - settle.sigmoid(design @ theta)) - (theta - mean) / np.square(deviation)
            worst = max(worst, float(np.abs(gradient).max()))
            assert np.all(np.isfinite(covariance)) and np.all(np.linalg.eigvalsh(covariance) > 0)
    assert worst < 1e-5
