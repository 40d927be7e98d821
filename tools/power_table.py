"""The smallest standardized mean difference c(n) = delta / sd that the project's paired randomization test
(``rag_eval.eval.metrics.significance.randomization_test``: two-sided sign flips, exact up to 13 queries, 10,000
seeded sign vectors above) detects at alpha 0.05 with power 0.8, for n = 6 .. 100 per-query differences drawn from
N(delta, sd**2); ``rag_eval.eval.compare.agreement.detectable_difference`` states c(n) * sd.

    nice .venv/bin/python tools/power_table.py > eval/data/power_table.json

The test is scale-free, so its power depends only on c and n. For each n the same ``SIMULATIONS`` standard
normal datasets z (seeded by n) serve every c (common random numbers): the null mean of sign vector s on
c + z is c * mean(s) + s.z / n, so the test rejects c + z exactly when c lies above one threshold or below
another, both found once per dataset from the null distribution; the power at c is the share of datasets
whose thresholds c passes, and c(n) the smallest c with power >= 0.8, found by bisection. The Monte Carlo
standard error of a power near 0.8 is sqrt(0.8 * 0.2 / SIMULATIONS), 0.0028 at 20,000 datasets (about 0.4% of
c(n)). Sizes run in ``--workers`` processes; about three minutes with two.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from rag_eval.eval.compare.agreement import ALPHA, POWER, smallest_p
from rag_eval.eval.metrics.significance import _TIE, PERMUTATIONS, SEED

SIMULATIONS = 20_000
SIMULATION_SEED = 6
SIZES = range(6, 101)
# Null means are computed for this many datasets at a time (about 40 MB with 10,000 sign vectors).
_CHUNK = 500


def sign_vectors(n: int, permutations: int = PERMUTATIONS, seed: int = SEED) -> tuple[np.ndarray, int]:
    """The sign vectors ``randomization_test`` uses on ``n`` queries, and the count it adds for the observed
    statistic: all ``2**n`` (exact, 0) when that is at most ``permutations``, else its seeded draws (1)."""
    if 2**n <= permutations:
        return np.array(list(itertools.product((1.0, -1.0), repeat=n))), 0
    return np.random.default_rng(seed).choice((1.0, -1.0), size=(permutations, n)), 1


def p_values(diffs: np.ndarray, permutations: int = PERMUTATIONS, seed: int = SEED) -> np.ndarray:
    """``randomization_test(row, [0.0] * n)`` for every row of ``diffs`` (datasets x queries), at once."""
    n = diffs.shape[1]
    signs, adjustment = sign_vectors(n, permutations, seed)
    null = diffs @ signs.T / n
    observed = diffs.mean(axis=1, keepdims=True)
    scale = np.abs(diffs).max(axis=1, keepdims=True)
    gamma = np.where(scale > 0, _TIE * scale, _TIE)
    greater = ((null >= observed - gamma).sum(axis=1) + adjustment) / (len(signs) + adjustment)
    less = ((null <= observed + gamma).sum(axis=1) + adjustment) / (len(signs) + adjustment)
    return np.minimum(1.0, 2 * np.minimum(greater, less))


def rejection_thresholds(
    z: np.ndarray, alpha: float = ALPHA, permutations: int = PERMUTATIONS, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``z`` (datasets x queries): thresholds ``upper`` and ``lower`` such that the test at
    ``alpha`` rejects on ``c + z`` when ``c > upper`` or ``c < lower`` (equality has probability 0)."""
    n = z.shape[1]
    signs, adjustment = sign_vectors(n, permutations, seed)
    total = len(signs) + adjustment
    # The largest count of null means at or beyond the observed one that still gives p <= alpha.
    most = -1
    while 2 * ((most + 1 + adjustment) / total) <= alpha:
        most += 1
    all_plus = signs.min(axis=1) > 0  # tied with the observed mean whatever c is
    spare = most - int(all_plus.sum())
    if spare < 0:
        return np.full(len(z), np.inf), np.full(len(z), -np.inf)
    moving = signs[~all_plus]
    # Null mean k is at or above the observed one exactly when c <= t_k = (s_k.z / n - mean z) / (1 - mean s_k)
    # = (s_k.z - sum z) / (n - sum s_k).
    scale = 1 / (n - moving.sum(axis=1))
    upper, lower = np.empty(len(z)), np.empty(len(z))
    high = len(moving) - 1 - spare
    for start in range(0, len(z), _CHUNK):
        rows = z[start : start + _CHUNK]
        t = rows @ moving.T
        t -= rows.sum(axis=1, keepdims=True)
        t *= scale
        t.partition([spare, high], axis=1)
        upper[start : start + _CHUNK] = t[:, high]
        lower[start : start + _CHUNK] = t[:, spare]
    return upper, lower


def power_at(c: float, upper: np.ndarray, lower: np.ndarray) -> float:
    """The share of datasets on which the test rejects at effect ``c``."""
    return float(((c > upper) | (c < lower)).mean())


def smallest_effect(
    n: int,
    simulations: int = SIMULATIONS,
    seed: int = SIMULATION_SEED,
    alpha: float = ALPHA,
    power: float = POWER,
) -> float:
    """c(n): the smallest c >= 0 whose simulated power on ``n`` queries reaches ``power`` (bisection on the
    power of the same ``simulations`` datasets at every c); deterministic given its arguments."""
    if smallest_p(n) > alpha:
        raise ValueError(f"{n} queries: the sign-flip test cannot reach alpha {alpha}")
    z = np.random.default_rng([seed, n]).standard_normal((simulations, n))
    upper, lower = rejection_thresholds(z, alpha)
    low, high = 0.0, 1.0
    while power_at(high, upper, lower) < power:
        low, high = high, 2 * high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if power_at(middle, upper, lower) < power else (low, middle)
    return high


def table(
    sizes: range = SIZES, simulations: int = SIMULATIONS, seed: int = SIMULATION_SEED, workers: int = 1
) -> dict[str, object]:
    """The power table with the parameters it was computed with, as ``eval/data/power_table.json`` holds it."""
    effects = {}
    find = functools.partial(smallest_effect, simulations=simulations, seed=seed)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for n, c in zip(sizes, pool.map(find, sizes), strict=True):
            effects[str(n)] = round(c, 4)
            print(f"n={n} c={effects[str(n)]}", file=sys.stderr, flush=True)
    return {
        "tool": "tools/power_table.py",
        "test": "rag_eval.eval.metrics.significance.randomization_test: two-sided sign flips, "
        "exact when 2**n <= permutations",
        "differences": "normal: per-query differences drawn from N(c * sd, sd**2)",
        "alpha": ALPHA,
        "power": POWER,
        "permutations": PERMUTATIONS,
        "permutation_seed": SEED,
        "simulations": simulations,
        "seed": seed,
        "power_standard_error": round(math.sqrt(POWER * (1 - POWER) / simulations), 4),
        "effect": effects,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=SIMULATIONS)
    parser.add_argument("--seed", type=int, default=SIMULATION_SEED)
    parser.add_argument("--largest", type=int, default=SIZES[-1])
    parser.add_argument("--workers", type=int, default=2)
    options = parser.parse_args()
    # The workers are the parallelism: a BLAS thread pool in each of them only competes for the same cores.
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    found = table(range(SIZES[0], options.largest + 1), options.simulations, options.seed, options.workers)
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
