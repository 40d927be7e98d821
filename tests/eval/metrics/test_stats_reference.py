"""eval.stats against reference implementations: exact enumeration with fractions, an exact null
distribution by convolution, scipy.stats.permutation_test and Holm's definition; edge cases; and the
bootstrap intervals and detectable difference the reports state next to the tests' p-values."""

from __future__ import annotations

import itertools
import math
import tracemalloc
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_eval.errors import RagEvalError
from rag_eval.eval.compare.agreement import ALPHA, POWER, detectable_difference, power_table, smallest_p
from rag_eval.eval.compare.agreement import test_reach as reach_in_words  # not collected as a test under this name
from rag_eval.eval.compare.statistics import BOOTSTRAP, bootstrap_ci
from rag_eval.eval.metrics import significance as stats
from rag_eval.eval.metrics.significance import (
    PERMUTATIONS,
    StatsError,
    holm,
    randomization_test,
    student_t_quantile,
    win_tie_loss,
)

scipy_stats = pytest.importorskip("scipy.stats")
from helpers.stats import scipy_p  # noqa: E402 - after the skip: test_stats needs scipy too

GRIDS = st.sampled_from([1, 3, 7, 10, 20, 100, 1000])


def exact_p(diffs: list[Fraction]) -> float:
    """Two-sided sign-flip p-value over all 2**n sign vectors, in exact arithmetic."""
    observed = sum(diffs)
    greater = less = 0
    for signs in itertools.product((1, -1), repeat=len(diffs)):
        total = sum(s * d for s, d in zip(signs, diffs, strict=True))
        greater += total >= observed
        less += total <= observed
    return min(1.0, 2 * min(greater, less) / 2 ** len(diffs))


def convolved_p(diffs: list[int]) -> float:
    """The same p-value for integer differences, from the exact null distribution of the signed sum."""
    counts = Counter({0: 1})
    for d in diffs:
        step: Counter[int] = Counter()
        for total, count in counts.items():
            step[total + d] += count
            step[total - d] += count
        counts = step
    observed = sum(diffs)
    greater = sum(c for t, c in counts.items() if t >= observed)
    less = sum(c for t, c in counts.items() if t <= observed)
    return min(1.0, 2 * min(greater, less) / 2 ** len(diffs))


def on_grid(numerators: list[int], grid: int) -> list[float]:
    return [k / grid for k in numerators]


def scores(size: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, 1000), min_size=size, max_size=size)


# --- the randomization test: exact enumeration -------------------------------------------------------------


@given(st.integers(1, 10).flatmap(lambda n: st.tuples(scores(n), scores(n))), GRIDS)
def test_exact_case_matches_enumeration_in_exact_arithmetic(pair: tuple[list[int], list[int]], grid: int) -> None:
    a, b = ([k % (grid + 1) for k in side] for side in pair)
    expected = exact_p([Fraction(x - y, grid) for x, y in zip(a, b, strict=True)])
    assert randomization_test(on_grid(a, grid), on_grid(b, grid)) == expected


@pytest.mark.parametrize(
    ("a", "b", "grid", "expected"),
    [
        # Equal means (true p = 1), but the float mean of the differences is a few 1e-17 off zero.
        ([2, 1, 1, 1, 1, 3, 2, 2, 0], [3, 1, 3, 3, 0, 2, 0, 1, 0], 3, 1.0),
        ([1, 4, 3, 7, 5, 4, 2, 3, 4, 3], [3, 5, 1, 4, 1, 7, 1, 5, 3, 6], 7, 1.0),
        # A non-zero mean whose tied null sums differ from it by float noise larger than 1e-14 of it.
        ([522, 733, 630, 873, 524, 617, 482, 770, 383], [655, 993, 107, 385, 651, 960, 694, 780, 301], 1000, 0.984375),
    ],
)
def test_float_noise_does_not_break_ties(a: list[int], b: list[int], grid: int, expected: float) -> None:
    # Regression: the tie tolerance was relative to the observed mean, so near a zero mean sums equal in
    # exact arithmetic fell outside it and p came out too small (0.828 instead of 1.0 for the first case).
    assert exact_p([Fraction(x - y, grid) for x, y in zip(a, b, strict=True)]) == expected
    assert randomization_test(on_grid(a, grid), on_grid(b, grid)) == expected


def test_exact_case_matches_scipy_on_untied_values() -> None:
    rng = np.random.default_rng(7)
    for n in range(2, 14):  # scipy needs two observations
        a, b = list(rng.random(n)), list(rng.random(n))
        assert randomization_test(a, b) == pytest.approx(scipy_p(a, b, PERMUTATIONS), abs=1e-12), n


@given(st.integers(1, 10).flatmap(lambda n: st.tuples(scores(n), scores(n))), GRIDS)
def test_swapping_systems_or_rescaling_keeps_p(pair: tuple[list[int], list[int]], grid: int) -> None:
    a, b = on_grid(pair[0], grid), on_grid(pair[1], grid)
    p = randomization_test(a, b)
    assert randomization_test(b, a) == p
    assert randomization_test([x * 100 for x in a], [y * 100 for y in b]) == p


# --- the randomization test: Monte Carlo ---------------------------------------------------------------------


@pytest.mark.parametrize(("n", "shift"), [(14, 2), (20, 1), (30, 0), (60, 1), (200, 0)])
def test_monte_carlo_case_is_within_its_error_of_the_exact_p(n: int, shift: int) -> None:
    rng = np.random.default_rng(n)
    diffs = [int(d) for d in rng.integers(-6, 7, n) + shift]
    expected = convolved_p(diffs)
    ours = randomization_test([d / 10 for d in diffs], [0.0] * n)
    assert ours == randomization_test([d / 10 for d in diffs], [0.0] * n)  # fixed seed
    one_sided = max(expected / 2, 1e-3)
    error = 2 * math.sqrt(one_sided * (1 - one_sided) / PERMUTATIONS)  # p is twice a one-sided estimate
    assert abs(ours - expected) <= 4.5 * error + 2 / (PERMUTATIONS + 1)


def test_monte_carlo_case_matches_scipy_within_error() -> None:
    rng = np.random.default_rng(11)
    a = list(rng.random(25))
    b = [x - 0.04 + 0.2 * (y - 0.5) for x, y in zip(a, rng.random(25), strict=True)]
    reference = scipy_p(a, b, PERMUTATIONS, random_state=3)
    one_sided = reference / 2
    error = 2 * math.sqrt(2 * one_sided * (1 - one_sided) / PERMUTATIONS)  # two independent estimates
    assert randomization_test(a, b) == pytest.approx(reference, abs=4.5 * error)


def test_block_size_does_not_change_the_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    a, b = list(rng.random(50)), list(rng.random(50))
    p = randomization_test(a, b)
    monkeypatch.setattr(stats, "_BLOCK", 333)
    assert randomization_test(a, b) == p


def test_very_many_queries_run_in_bounded_memory() -> None:
    # Regression: all 10,000 x n random signs were held at once (800 MB at 5,000 queries, 8.9 GB on the
    # 55,578 MS MARCO dev queries), an out-of-memory crash instead of a p-value.
    rng = np.random.default_rng(2)
    a, b = list(rng.random(5_000)), list(rng.random(5_000))
    tracemalloc.start()
    try:
        p = randomization_test(a, b)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100e6
    assert 0.0 < p <= 1.0


# --- the randomization test: edge cases ----------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 13, 14, 40])
def test_identical_systems_have_p_one(n: int) -> None:
    values = [k / 7 for k in range(n)]
    assert randomization_test(values, values) == 1.0


@pytest.mark.parametrize("value", [0.0, 0.3, 1.0])
def test_one_query_cannot_be_significant(value: float) -> None:
    assert randomization_test([value], [0.5]) == 1.0


@pytest.mark.parametrize("n", range(1, 14))
def test_equal_differences_give_the_smallest_exact_p(n: int) -> None:
    # The value the few-queries warning quotes (agreement.smallest_p) is the one the test gives.
    assert randomization_test([0.7] * n, [0.6] * n) == smallest_p(n) == 2.0 ** (1 - n)


def test_equal_differences_in_the_monte_carlo_case() -> None:
    # Only the observed sign vector reaches the observed mean; counted once, as scipy does.
    assert randomization_test([0.7] * 30, [0.6] * 30) == pytest.approx(2 / (PERMUTATIONS + 1))


def test_zero_differences_do_not_move_p() -> None:
    base_a, base_b = [0.9, 0.8, 0.7, 0.6, 0.2], [0.5, 0.6, 0.7, 0.1, 0.3]
    padded = randomization_test(base_a + [0.4] * 6, base_b + [0.4] * 6)
    assert padded == randomization_test(base_a, base_b)


BAD_VALUES = [float("nan"), float("inf"), float("-inf")]


@pytest.mark.parametrize("bad", BAD_VALUES)
@pytest.mark.parametrize("n", [3, 20])
@pytest.mark.parametrize("side", ["a", "b"])
def test_non_finite_values_are_refused(bad: float, n: int, side: str) -> None:
    # Regression: NaN or inf made every comparison false, so p came out 0.0 (or 1/10,001): "significant".
    clean = [0.5] * n
    dirty = [bad] + [0.4] * (n - 1)
    a, b = (dirty, clean) if side == "a" else (clean, dirty)
    with pytest.raises(StatsError, match="not a finite number"):
        randomization_test(a, b)


@pytest.mark.parametrize(("a", "b"), [([0.9], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]), ([0.9, 0.2], [0.1, 0.2, 0.3])])
def test_unpaired_values_are_refused(a: list[float], b: list[float]) -> None:
    # Regression: one value against six was broadcast into six pairs and tested (p = 0.03125).
    with pytest.raises(StatsError, match="same queries") as raised:
        randomization_test(a, b)
    assert isinstance(raised.value, RagEvalError)
    assert isinstance(raised.value, ValueError)


# --- Holm's correction --------------------------------------------------------------------------------------


def holm_by_definition(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment written from its definition (statsmodels is not installed): the
    adjusted p of a hypothesis is the largest (m - rank) * p over the hypotheses with p no larger, capped at 1."""
    m = len(p_values)
    rank = {i: r for r, i in enumerate(sorted(range(m), key=lambda i: p_values[i]))}
    return [
        min(1.0, max((m - rank[j]) * p_values[j] for j in range(m) if p_values[j] <= p_values[i])) for i in range(m)
    ]


@given(st.lists(st.one_of(st.floats(0, 1), st.sampled_from([0.0, 0.01, 0.05, 1.0])), max_size=12))
def test_holm_matches_its_definition(p_values: list[float]) -> None:
    adjusted = holm(p_values)
    assert adjusted == pytest.approx(holm_by_definition(p_values), rel=1e-12, abs=1e-15)
    m = len(p_values)
    for p, q in zip(p_values, adjusted, strict=True):
        assert p <= q <= min(1.0, m * p) + 1e-15  # between unadjusted and Bonferroni
    for i, j in itertools.product(range(m), repeat=2):
        if p_values[i] <= p_values[j]:
            assert adjusted[i] <= adjusted[j]  # order kept


@pytest.mark.parametrize("bad", [float("nan"), 1.5, -0.1])
def test_holm_refuses_what_is_not_a_p_value(bad: float) -> None:
    # Regression: a NaN p sorted anywhere and turned itself and every later p into 1.0; 2.0 and -0.5
    # came back as 1.0 and 0.0.
    with pytest.raises(StatsError, match="not a p-value"):
        holm([0.01, bad, 0.02])


# --- win / tie / loss ----------------------------------------------------------------------------------------


@given(st.integers(0, 12).flatmap(lambda n: st.tuples(scores(n), scores(n))))
def test_win_tie_loss_counts_every_query_once(pair: tuple[list[int], list[int]]) -> None:
    a, b = on_grid(pair[0], 100), on_grid(pair[1], 100)
    wins, ties, losses = win_tie_loss(a, b)
    assert (wins, ties, losses) == (
        sum(x > y for x, y in pair_ints(pair)),
        sum(x == y for x, y in pair_ints(pair)),
        sum(x < y for x, y in pair_ints(pair)),
    )
    assert win_tie_loss(b, a) == (losses, ties, wins)


def pair_ints(pair: tuple[list[int], list[int]]) -> list[tuple[int, int]]:
    return list(zip(pair[0], pair[1], strict=True))


def test_win_tie_loss_refuses_unpaired_or_non_finite_values() -> None:
    # Regression: [1, 1, 1] against [0] was (1, 2, 0), two unpaired queries counted as ties; NaN was a tie.
    with pytest.raises(StatsError, match="same queries"):
        win_tie_loss([1.0, 1.0, 1.0], [0.0])
    with pytest.raises(StatsError, match="not a finite number"):
        win_tie_loss([float("nan")], [0.0])


# --- what the reports state next to the p-values -------------------------------------------------------------


def bootstrap_coverage(n: int, replicates: int = 300) -> float:
    rng = np.random.default_rng(n)
    mean = 2 / (2 + 3)  # Beta(2, 3), skewed and bounded like a per-query metric
    hits = 0
    for _ in range(replicates):
        low, high = bootstrap_ci(list(rng.beta(2, 3, n)))
        hits += low <= mean <= high
    return hits / replicates


def test_bootstrap_interval_covers_the_mean_at_fifty_queries() -> None:
    assert 0.90 <= bootstrap_coverage(50) <= 0.99


@pytest.mark.parametrize(("n", "least"), [(10, 0.92), (25, 0.92), (5, 0.88)])
def test_bootstrap_interval_keeps_its_coverage_on_a_small_judged_set(n: int, least: float) -> None:
    # Regression: the percentile bootstrap labelled 95% covered 87% at 10 queries and 81% at 5 (these draws).
    # Five values resample into few distinct means: the expanded interval reaches about 91% there, not 95%.
    assert least <= bootstrap_coverage(n) <= 0.99


@pytest.mark.parametrize("n", [2, 3, 10, 40])
def test_bootstrap_interval_is_the_expanded_percentile_interval(n: int) -> None:
    values = list(np.random.default_rng(n).random(n))
    means = np.asarray(values)[np.random.default_rng(stats.SEED).integers(0, n, size=(BOOTSTRAP, n))].mean(axis=1)
    tail = scipy_stats.norm.cdf(-math.sqrt(n / (n - 1)) * scipy_stats.t.ppf(0.975, n - 1))
    expected = [round(float(np.quantile(means, q)), 4) for q in (tail, 1 - tail)]
    assert bootstrap_ci(values) == expected
    assert bootstrap_ci(values) == bootstrap_ci(values)  # seeded


def test_bootstrap_interval_on_degenerate_input() -> None:
    assert bootstrap_ci([]) == [0.0, 0.0]
    assert bootstrap_ci([0.3] * 7) == [0.3, 0.3]
    assert bootstrap_ci([0.3]) == [0.3, 0.3]


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 6, 9, 10, 24, 49, 99, 100, 1001, 55_577])
@pytest.mark.parametrize("probability", [0.5, 0.6, 0.9, 0.975, 0.995, 0.99999, 0.025, 0.3])
def test_student_t_quantile_matches_scipy(df: int, probability: float) -> None:
    expected = scipy_stats.t.ppf(probability, df)
    assert student_t_quantile(probability, df) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("probability", "df"), [(0.0, 3), (1.0, 3), (float("nan"), 3), (0.9, 0), (0.9, 2.5)])
def test_student_t_quantile_refuses_what_it_cannot_compute(probability: float, df: int) -> None:
    with pytest.raises(ValueError, match="Student t quantile"):
        student_t_quantile(probability, df)


@pytest.mark.parametrize("n", [6, 7, 13, 14, 25, 100])
def test_detectable_difference_is_the_tables_effect_times_the_spread(n: int) -> None:
    diffs = list(np.random.default_rng(n).normal(0.05, 0.3, n))
    expected = power_table()["effect"][str(n)] * np.std(diffs, ddof=1)
    assert detectable_difference(diffs) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("n", [101, 150, 1000])
def test_detectable_difference_above_the_table_scales_its_last_effect(n: int) -> None:
    diffs = list(np.random.default_rng(n).normal(0.05, 0.3, n))
    last = power_table()["effect"]["100"]
    expected = last * math.sqrt(100 / n) * np.std(diffs, ddof=1)
    assert detectable_difference(diffs) == pytest.approx(expected, rel=1e-12)
    # That is the normal approximation (z_{1-a/2} + z_power) sd / sqrt(n) times the table's ratio to it at 100.
    ratio = last * math.sqrt(100) / (scipy_stats.norm.ppf(1 - ALPHA / 2) + scipy_stats.norm.ppf(POWER))
    assert 1.0 <= ratio <= 1.03


@pytest.mark.parametrize("n", range(1, 10))
def test_detectable_difference_is_none_exactly_when_the_test_cannot_reach_alpha(n: int) -> None:
    reachable = randomization_test([0.7] * n, [0.6] * n) <= ALPHA
    assert (detectable_difference([0.1 * (k % 3) for k in range(n)]) is not None) == (reachable and n >= 2)


def power_at_stated_difference(n: int, simulations: int = 500) -> float:
    """Power of the project's randomization test on n normal per-query differences with standard deviation 1
    and the mean stated as detectable from n differences whose standard deviation is exactly 1."""
    rng = np.random.default_rng(n)
    spread = rng.normal(0, 1, n)
    shift = detectable_difference(list((spread - spread.mean()) / spread.std(ddof=1)))
    assert shift is not None
    hits = sum(randomization_test(list(rng.normal(shift, 1, n)), [0.0] * n) <= ALPHA for _ in range(simulations))
    return hits / simulations


@pytest.mark.parametrize("n", [6, 8, 12, 25])
def test_stated_detectable_difference_has_the_stated_power(n: int) -> None:
    # Regression: the normal approximation (z_{1-a/2} + z_power) sd / sqrt(n) ignored the sign-flip test's
    # small-sample penalty; at 6 queries the stated difference was detected about 44% of the time, not 80%.
    # 500 simulations: the standard error of a power of 0.8 is 0.018.
    assert power_at_stated_difference(n) >= POWER - 0.1


@pytest.mark.parametrize(
    "diffs",
    [[0.0] * 10, [0.1] * 10, [0.4 - 0.3] * 4 + [0.2 - 0.1] * 4, [-0.25] * 30, [0.1] * 150],
)
def test_identical_systems_do_not_promise_a_zero_detectable_difference(diffs: list[float]) -> None:
    # Regression: per-query differences that do not vary (up to float noise) gave sd 0 and a stated detectable
    # difference of 0.000; there is no spread to size one from.
    assert detectable_difference(diffs) is None
    reach = reach_in_words(len(diffs), None, "nDCG@10", "from a")
    assert "no spread" in reach and "cannot be expected to detect any difference" not in reach


def test_reach_states_alpha_before_holm() -> None:
    reach = reach_in_words(10, 0.2, "nDCG@10", "from the spread of a and b")
    assert "of about 0.200 or more" in reach and f"alpha {ALPHA} before Holm's correction" in reach
