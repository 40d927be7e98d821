"""tools/power_table.py and the table it wrote (eval/data/power_table.json), which detectable_difference reads:
its vectorised test against eval.stats.randomization_test, its thresholds against the test's decisions, the
shipped values against a fresh computation and, at six queries, against the power known in closed form."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import math
import tomllib
from types import ModuleType

import numpy as np
import pytest
from helpers import REPO

from rag_eval.eval.compare.agreement import ALPHA, POWER, power_table
from rag_eval.eval.metrics.significance import PERMUTATIONS, SEED, randomization_test

scipy_stats = pytest.importorskip("scipy.stats")
scipy_optimize = pytest.importorskip("scipy.optimize")

ROOT = REPO
SHIPPED = ROOT / "eval" / "data" / "power_table.json"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("power_table_tool", ROOT / "tools" / "power_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def table() -> dict:
    return json.loads(SHIPPED.read_text(encoding="utf-8"))


def effect(table: dict, n: int) -> float:
    return table["effect"][str(n)]


@pytest.mark.parametrize("n", [1, 2, 6, 13, 14, 30, 101])
def test_vectorised_test_equals_randomization_test(tool: ModuleType, n: int) -> None:
    rng = np.random.default_rng(n)
    diffs = rng.normal(0.2, 1, (20, n))
    diffs[:5] = np.round(diffs[:5], 1)  # ties among the null means
    diffs[5] = 0.0
    diffs[6] = 0.1
    ours = tool.p_values(diffs)
    assert ours.tolist() == [randomization_test(list(row), [0.0] * n) for row in diffs]


@pytest.mark.parametrize("n", [6, 9, 14, 40])
def test_thresholds_give_the_tests_decisions(tool: ModuleType, n: int) -> None:
    z = np.random.default_rng(100 + n).standard_normal((60, n))
    upper, lower = tool.rejection_thresholds(z)
    for c in (-0.9, -0.2, 0.3, 0.8, 1.6):
        rejects = [randomization_test(list(c + row), [0.0] * n) <= ALPHA for row in z]
        assert ((c > upper) | (c < lower)).tolist() == rejects, c


def test_the_tool_refuses_sizes_that_cannot_reach_alpha(tool: ModuleType) -> None:
    with pytest.raises(ValueError, match="cannot reach alpha"):
        tool.smallest_effect(5, simulations=10)


def test_table_records_what_it_was_computed_with(table: dict) -> None:
    assert (table["alpha"], table["power"]) == (ALPHA, POWER)
    assert (table["permutations"], table["permutation_seed"]) == (PERMUTATIONS, SEED)
    assert (ROOT / table["tool"]).is_file()
    assert sorted(map(int, table["effect"])) == list(range(6, 101))
    assert table["power_standard_error"] == round(math.sqrt(POWER * (1 - POWER) / table["simulations"]), 4) <= 0.003
    assert power_table() == table  # what detectable_difference reads


@pytest.mark.parametrize("n", [6, 11, 14])
def test_shipped_table_is_what_the_tool_computes(tool: ModuleType, table: dict, n: int) -> None:
    # smallest_effect is deterministic given n, the simulations and the seed.
    assert round(tool.smallest_effect(n, table["simulations"], table["seed"]), 4) == effect(table, n)


def six_query_power(c: float) -> float:
    """At six queries the exact test rejects only when all six differences share a sign (p = 2/64)."""
    return scipy_stats.norm.cdf(c) ** 6 + scipy_stats.norm.cdf(-c) ** 6


def test_six_queries_match_the_closed_form(table: dict) -> None:
    exact = scipy_optimize.brentq(lambda c: six_query_power(c) - POWER, 0.5, 5.0, xtol=1e-12)
    error = 4 * table["power_standard_error"]
    assert abs(six_query_power(effect(table, 6)) - POWER) <= error
    slope = (six_query_power(exact + 1e-6) - six_query_power(exact - 1e-6)) / 2e-6
    assert effect(table, 6) == pytest.approx(exact, abs=error / slope)


def test_table_falls_with_more_queries_towards_the_normal_approximation(table: dict) -> None:
    z = scipy_stats.norm.ppf(1 - ALPHA / 2) + scipy_stats.norm.ppf(POWER)
    for n in range(6, 100):
        assert effect(table, n + 1) <= effect(table, n) + 0.005, n  # Monte Carlo noise at large n is ~0.001
    for n in range(6, 91):
        assert effect(table, n + 10) < effect(table, n), n
    # c(n) sqrt(n) is the factor the normal approximation puts at z = 2.80: larger at every size, close at 100.
    assert all(effect(table, n) * math.sqrt(n) > 0.99 * z for n in range(6, 101))
    assert effect(table, 6) * math.sqrt(6) > 1.5 * z
    assert 1.0 <= effect(table, 100) * math.sqrt(100) / z <= 1.03


def test_table_ships_in_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folder = ROOT / setuptools["package-dir"]["rag_eval.eval"]
    relative = SHIPPED.relative_to(folder).as_posix()
    assert any(fnmatch.fnmatch(relative, pattern) for pattern in setuptools["package-data"]["rag_eval.eval"])
