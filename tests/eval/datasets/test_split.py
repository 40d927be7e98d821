"""Dev/test splits by query-id hash, and the Pareto front over several objectives."""

from __future__ import annotations

import pytest

from rag_eval.errors import RagEvalError
from rag_eval.eval.datasets.records import Dataset, Passage, Query
from rag_eval.eval.datasets.split import dev_share, split_ids, subset
from rag_eval.eval.reporting.pareto import dominates, front


def test_the_split_depends_on_the_query_id_alone() -> None:
    ids = [f"q{n}" for n in range(2000)]
    dev, test = split_ids(ids, 0.5)
    assert sorted(dev + test) == sorted(ids) and not set(dev) & set(test)
    assert 900 < len(dev) < 1100  # about half
    shuffled_dev, _ = split_ids(list(reversed(ids)), 0.5)
    assert sorted(shuffled_dev) == sorted(dev)  # order of the input does not matter
    fewer_dev, _ = split_ids(ids[:500], 0.5)
    assert fewer_dev == [i for i in dev if i in set(ids[:500])]  # other queries do not matter
    assert dev_share("q1") == dev_share("q1") and 0 <= dev_share("q1") < 1
    assert split_ids(ids, 0.5, salt="other")[0] != dev


@pytest.mark.parametrize("fraction", [0, 1, -0.5, 1.5])
def test_a_dev_fraction_outside_zero_and_one_is_refused(fraction: float) -> None:
    with pytest.raises(RagEvalError, match="dev fraction"):
        split_ids(["q1"], fraction)


def test_a_subset_keeps_the_corpus_and_only_its_queries_judgements() -> None:
    dataset = Dataset(
        "d",
        {"p1": Passage("p1", "", "x")},
        {"q1": Query("q1", "a"), "q2": Query("q2", "b")},
        {"q1": {"p1": 1}, "q2": {"p1": 2}},
        {"path": "/x"},
    )
    part = subset(dataset, ["q2"], "test")
    assert part.corpus == dataset.corpus and list(part.queries) == ["q2"] and part.qrels == {"q2": {"p1": 2}}
    assert part.meta == {"path": "/x", "split": "test"} and part.id == "d[test]"


def test_the_front_keeps_exactly_the_non_dominated_points() -> None:
    # (nDCG up, p95 down, MB down)
    points = [(0.80, 2.0, 10.0), (0.80, 1.0, 10.0), (0.70, 0.5, 5.0), (0.90, 3.0, 30.0), (0.60, 0.6, 6.0)]
    assert front(points, (True, False, False)) == [1, 2, 3]
    assert dominates(points[1], points[0], (True, False, False)) and not dominates(
        points[0], points[0], (True, False, False)
    )
