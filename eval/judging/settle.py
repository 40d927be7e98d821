"""Monte Carlo completions of a partly judged pool: a relevance model learned from the grades so far, the
systems' mean nDCG@10 on each completion, and which judgment would tell most about the winner.

The relevance model is a Bayesian logistic regression of "grade > 0" on one feature, the mean over systems
of a passage's nDCG discount (1 for a passage every system ranks first, 0 for one no system ranks in its top
10), in two regimes: before a query's first relevant passage, and after it. Public sets have about one
relevant passage per query, so once it is found the rest are almost never relevant; the handbook has
several. Both regimes are learned online; their priors were fitted on the handbook (``PRIOR``). Each
completion draws its own model parameters from the Laplace posterior, so confidence includes what the
model does not yet know, then walks each query's unjudged passages best-first: the "before" regime applies
until one is drawn relevant, the "after" regime from then on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Prior mean and standard deviation of (intercept, slope) per regime. The means are the maximum-likelihood
#: fits on the handbook's complete pool (``reports/judging.md``); the deviations are wide so that a set with
#: one relevant passage per query (the public sets: no relevant passage after the first) is learned quickly.
PRIOR = {
    "before": ((-3.7, 7.1), (1.0, 2.0)),
    "after": ((-3.3, 7.8), (2.0, 4.0)),
}
#: A relevant passage's grade is 2 with a Beta(1, 1) prior probability, learned from the grades so far.
NEWTON_STEPS = 20
#: Standard deviation of a query's own shift of the log-odds of relevance (queries differ: some have one
#: relevant passage, some ten); set on the handbook (reports/judging.md).
QUERY_SPREAD = 1.0
#: Model parameters are drawn this many times per decision; each draw serves samples / BLOCKS completions.
BLOCKS = 25


@dataclass(frozen=True)
class Completions:
    """Sampled full judgments of the pool and what they imply for each system."""

    rows: np.ndarray  # (open,) the unjudged pairs
    grades: np.ndarray  # (open, samples) their grade in every completion
    scores: np.ndarray  # (systems, samples) mean nDCG@10 in every completion
    per_query: np.ndarray  # (systems, queries, samples) each query's nDCG@10 over the number of valid queries
    winners: np.ndarray  # (systems, samples) True where the system has the top score (ties all True)
    relevant: np.ndarray  # (samples,) the valid queries (with a relevant passage) in every completion, at least 1


#: The largest x whose e^x is finite in float64 (about 709.78).
_LOG_MAX = float(np.log(np.finfo(np.float64).max))


def sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-z) elementwise, never overflowing.

    e^-z is computed only where it is finite; where it would overflow (-z above log of the largest float,
    a sigmoid below 1e-308) the value is 0, which is what 1 / (1 + inf) gave: results are the same bit for bit.
    """
    exponent = -np.asarray(z, dtype=np.float64)
    overflow = exponent > _LOG_MAX
    return np.where(overflow, 0.0, 1.0 / (1.0 + np.exp(np.where(overflow, 0.0, exponent))))


def fit_logistic(
    x: np.ndarray, y: np.ndarray, prior: tuple[tuple[float, float], tuple[float, float]]
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mode and covariance (Laplace) of (intercept, slope) of a logistic regression of y on x."""
    mean0 = np.array(prior[0], dtype=float)
    precision0 = np.diag(1.0 / np.square(prior[1]))
    design = np.column_stack([np.ones_like(x), x])
    theta = mean0.copy()
    hessian = precision0

    def log_posterior(at: np.ndarray) -> float:
        z = design @ at
        return float(y @ z - np.logaddexp(0.0, z).sum() - 0.5 * (at - mean0) @ precision0 @ (at - mean0))

    current = log_posterior(theta)
    for _ in range(NEWTON_STEPS):
        p = sigmoid(design @ theta)
        gradient = design.T @ (y - p) - precision0 @ (theta - mean0)
        hessian = precision0 + (design * (p * (1 - p))[:, None]).T @ design
        step = np.linalg.solve(hessian, gradient)
        # Damped: a full Newton step can overshoot the mode of this concave posterior and then swing between two
        # far points for ever (seen with a few hundred passages judged mostly not relevant); halve it until the
        # posterior does not fall. Where the full step is taken, the fit is the undamped one exactly.
        for _halving in range(60):
            tried = log_posterior(theta + step)
            if tried >= current or not np.isfinite(current):
                break
            step = step / 2
        theta = theta + step
        current = log_posterior(theta)
        if np.abs(step).max() < 1e-8:
            break
    p = sigmoid(design @ theta)
    hessian = precision0 + (design * (p * (1 - p))[:, None]).T @ design
    return theta, np.linalg.inv(hessian)


class PoolModel:
    """The fixed structure of a pool (pairs grouped by query, best-first) and its random numbers."""

    def __init__(self, disc: np.ndarray, qidx: np.ndarray, n_queries: int, samples: int, seed: int) -> None:
        self.disc = disc  # (pairs, systems): each system's nDCG discount of each pair, 0 when not in its top 10
        self.qidx = qidx  # (pairs,), non-decreasing: pairs are grouped by query, best-first within one
        self.n_queries = n_queries
        n_pairs, n_systems = disc.shape
        # parameter draws: ``blocks`` of them, each shared by ``samples // blocks`` completions
        self.blocks = max(1, min(BLOCKS, samples))
        self.samples = samples // self.blocks * self.blocks
        self.feature = disc.mean(axis=1) if n_systems else np.zeros(n_pairs)
        rng = np.random.default_rng(seed)
        # common random numbers: the same grades always give the same completions
        self.uniform = rng.random((n_pairs, self.samples), dtype=np.float32)
        self.level = rng.random((n_pairs, self.samples), dtype=np.float32)
        self.normal = {regime: rng.standard_normal((2, self.blocks)) for regime in PRIOR}
        self.query_shift = QUERY_SPREAD * rng.standard_normal((n_queries, self.blocks))

    def probabilities(self, grades: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Per regime, (rows, blocks) probabilities of relevance under parameters drawn from its posterior."""
        judged = ~np.isnan(grades)
        relevant = np.where(judged, grades > 0, False)
        found = np.bincount(self.qidx, weights=relevant, minlength=self.n_queries)
        # a judged pair belongs to the "after" regime when another pair of its query was judged relevant
        after = (found[self.qidx] - relevant) > 0
        out = {}
        for regime, fitted in (("before", judged & ~after), ("after", judged & after)):
            theta, covariance = fit_logistic(self.feature[fitted], relevant[fitted].astype(float), PRIOR[regime])
            draws = theta[:, None] + np.linalg.cholesky(covariance) @ self.normal[regime]
            logits = (
                draws[0][None, :] + self.feature[rows, None] * draws[1][None, :] + self.query_shift[self.qidx[rows]]
            )
            out[regime] = sigmoid(logits).astype(np.float32)
        return out

    def _draw(self, p: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(rows, samples) True where a completion's uniform number falls below its block's probability."""
        n = rows.size
        shaped = self.uniform[rows].reshape(n, self.blocks, self.samples // self.blocks)
        return (shaped < p[:, :, None]).reshape(n, self.samples)

    def completions(self, grades: np.ndarray) -> Completions:
        """Sample completions of the pool given the grades so far (NaN = unjudged)."""
        judged = ~np.isnan(grades)
        known = np.where(judged, grades, 0.0)
        rows = np.flatnonzero(~judged)
        found = (np.bincount(self.qidx, weights=known > 0, minlength=self.n_queries) > 0)[self.qidx[rows]]
        p = self.probabilities(grades, rows)
        hit_before = self._draw(p["before"], rows)
        hit_after = self._draw(p["after"], rows)
        # walk each query best-first: "before" draws until the first relevant one, "after" draws behind it
        running = np.cumsum(hit_before, axis=0, dtype=np.int32)
        starts = np.searchsorted(self.qidx[rows], self.qidx[rows], side="left")
        offset = np.vstack([np.zeros((1, self.samples), dtype=np.int32), running])[starts]
        earlier = running - offset - hit_before
        relevant = np.where(found[:, None], hit_after, np.where(earlier > 0, hit_after, hit_before))
        positives = known[judged & (known > 0)]
        share_two = (1.0 + np.count_nonzero(positives >= 2)) / (2.0 + positives.size)
        drawn = np.where(relevant, np.where(self.level[rows] < share_two, 2.0, 1.0), 0.0).astype(np.float32)
        per_query, relevant = self.per_query(known, judged, rows, drawn)
        scores = per_query.sum(axis=1)
        winners = scores >= scores.max(axis=0, keepdims=True) - 1e-9
        return Completions(rows, drawn, scores, per_query, winners, relevant)

    def per_query(
        self, known: np.ndarray, judged: np.ndarray, rows: np.ndarray, drawn: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(systems, queries, samples) nDCG@10 divided by the number of queries with a positive grade (so the
        sum over queries is the mean), for the recorded grades and the drawn grades of the unjudged rows; and
        that number per sample (at least 1)."""
        fixed = np.where(judged, known, 0.0)
        q = self.qidx[rows]
        idcg = np.zeros((self.n_queries, self.samples))
        previous = 0.0
        for level in np.union1d(np.unique(fixed[fixed > 0]), np.unique(drawn[drawn > 0])):
            counts = np.bincount(self.qidx, weights=fixed >= level, minlength=self.n_queries)[:, None]
            counts = counts + _by_query(drawn >= level, q, self.n_queries)
            idcg += (level - previous) * CUMULATIVE[np.minimum(counts, CUT).astype(np.int64)]
            previous = float(level)
        valid = idcg > 0
        count = np.maximum(valid.sum(axis=0), 1)
        inverse = np.where(valid, 1.0 / np.where(valid, idcg, 1.0), 0.0) / count
        return np.array(
            [
                (
                    np.bincount(self.qidx, weights=self.disc[:, s] * fixed, minlength=self.n_queries)[:, None]
                    + _by_query(self.disc[rows, s][:, None] * drawn, q, self.n_queries)
                )
                * inverse
                for s in range(self.disc.shape[1])
            ]
        ), count


def _by_query(values: np.ndarray, qidx: np.ndarray, n_queries: int) -> np.ndarray:
    """(queries, samples) sums of the rows of ``values`` per query; ``qidx`` (non-decreasing) names each row's."""
    out = np.zeros((n_queries, values.shape[1]))
    if qidx.size:
        queries, starts = np.unique(qidx, return_index=True)
        out[queries] = np.add.reduceat(values.astype(np.float64), starts, axis=0)
    return out


CUT = 10
#: Ideal DCG of k passages of gain 1, k = 0..CUT.
CUMULATIVE = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(2, CUT + 2)))])


def query_uncertainty(completions: Completions, leader: int) -> np.ndarray:
    """Per query, how much its unknown grades can still move the leader's lead over each other system: the
    variance of its share of each difference, weighted by how close that race is (a normal density at the
    race's z-score, over the race's variance). Zero for a query whose grades are all known."""
    per_query = completions.per_query
    n_systems, n_queries, _ = per_query.shape
    out = np.zeros(n_queries)
    for other in range(n_systems):
        if other == leader:
            continue
        difference = per_query[leader] - per_query[other]  # (queries, samples)
        total = difference.sum(axis=0)
        variance = float(total.var())
        if variance <= 1e-18:
            continue
        z = float(total.mean()) / math.sqrt(variance)
        out += math.exp(-0.5 * z * z) / variance * difference.var(axis=1)
    return out
