"""Same-run speed ratio of the impact engine against FTS5's statement, and proof the gate can fail."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from speedgate import handbook_queries

from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search

SPECS = ["unigram", "bigram", "jieba", "unigram^2+bigram"]
ROUNDS = 5
#: impact / FTS5 search phase (tokenization excluded, 10 hits with provenance), median over handbook queries
#: of each query's best of 5: measured 0.40 (unigram), 0.66 (bigram), 0.61 (jieba) on the 2-core
#: development machine under load; later, with blocks, 0.29, 0.57, 0.55 and 0.30 for the hybrid
#: unigram^2+bigram. 1.5 fails when the engine loses its lead over FTS5 by half again.
IMPACT_RATIO_BOUND = 1.5


#: The same with rank-safe pruning forced on every query (``impact_rank.PRUNE = True``; by default only queries led
#: by one long list are pruned, none at the handbook's size): measured 0.60 (unigram) and 0.89 (jieba) on the
#: same machine (unpruned 0.30 and 0.57 in that run); 1.5 fails when pruning becomes slower than FTS5's
#: statement by half.
PRUNED_RATIO_BOUND = 1.5


def impact_ratio(index_path: Path, queries: list[str], *, prune: bool | None = None) -> float:
    """Median over queries of (best impact search phase) / (best FTS5 search phase), alternating rounds."""
    import rag_eval.engines.impact.rank as impact_rank

    impact_rank.PRUNE, default = prune, impact_rank.PRUNE
    try:
        return _ratio(index_path, queries)
    finally:
        impact_rank.PRUNE = default


def _ratio(index_path: Path, queries: list[str]) -> float:
    with Index.open(index_path) as index:
        ratios = []
        for query in queries:
            fast, plain = [], []
            for _ in range(ROUNDS):
                fast.append(search(index, query, snippets=False, engine="impact").search_seconds)
                plain.append(search(index, query, snippets=False, engine="fts5").search_seconds)
            ratios.append(min(fast) / min(plain))
    return statistics.median(ratios)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from rag_eval.eval.datasets.shipped import corpus_dir

    folder = tmp_path_factory.mktemp("impact")
    paths = {}
    for spec in SPECS:
        paths[spec] = folder / f"{spec}.sqlite"
        build(corpus_dir("handbook"), paths[spec], builder="sections", tokenizer=spec, engine="impact")
    return paths


@pytest.mark.parametrize("spec", SPECS)
def test_impact_engine_ratio(benchmark, spec: str, indexes: dict[str, Path]) -> None:
    benchmark.group = f"impact:{spec}"
    ratio = benchmark.pedantic(impact_ratio, args=(indexes[spec], handbook_queries()[:120]), rounds=1, iterations=1)
    benchmark.extra_info.update({"impact_ratio_p50": round(ratio, 3), "bound": IMPACT_RATIO_BOUND})
    assert ratio <= IMPACT_RATIO_BOUND, f"{spec}: impact engine {ratio:.2f}x FTS5's statement"


def test_the_impact_gate_fails_on_an_injected_slowdown(
    benchmark, indexes: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression guard: a 2 ms delay in the impact ranking must push the ratio over the bound."""
    import time

    import rag_eval.engines.impact as impact

    original = impact.ranked

    def slow(*args, **kwargs):
        time.sleep(0.002)
        return original(*args, **kwargs)

    monkeypatch.setattr(impact, "ranked", slow)
    ratio = benchmark.pedantic(impact_ratio, args=(indexes["bigram"], handbook_queries()[:30]), rounds=1, iterations=1)
    assert ratio > IMPACT_RATIO_BOUND


@pytest.mark.parametrize("spec", ["unigram", "jieba"])
def test_pruned_impact_engine_ratio(benchmark, spec: str, indexes: dict[str, Path]) -> None:
    benchmark.group = f"impact-pruned:{spec}"
    ratio = benchmark.pedantic(
        impact_ratio, args=(indexes[spec], handbook_queries()[:120]), kwargs={"prune": True}, rounds=1, iterations=1
    )
    benchmark.extra_info.update({"pruned_ratio_p50": round(ratio, 3), "bound": PRUNED_RATIO_BOUND})
    assert ratio <= PRUNED_RATIO_BOUND, f"{spec}: pruned impact engine {ratio:.2f}x FTS5's statement"


def test_the_pruned_gate_fails_on_an_injected_slowdown(
    benchmark, indexes: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression guard: a 2 ms delay in MaxScore must push the pruned ratio over its bound."""
    import time

    import rag_eval.engines.impact.rank as impact_rank

    original = impact_rank._Scorer.maxscore

    def slow(self, k):
        time.sleep(0.002)
        return original(self, k)

    monkeypatch.setattr(impact_rank._Scorer, "maxscore", slow)
    ratio = benchmark.pedantic(
        impact_ratio, args=(indexes["unigram"], handbook_queries()[:30]), kwargs={"prune": True}, rounds=1, iterations=1
    )
    assert ratio > PRUNED_RATIO_BOUND
