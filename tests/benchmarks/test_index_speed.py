"""Index build throughput and query latency per strategy, and the toolkit's overhead over bare FTS5.

The corpus is the shipped bench-zh text as BEIR passages (one paragraph each); queries are 200
substrings of 4 to 12 characters drawn from it with a fixed seed.
Run with: pytest tests/benchmarks -o addopts="" --benchmark-only
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path

import pytest
from helpers import ALL_SPECS
from helpers.benchtext import bench_text

from rag_eval.engines.fts5 import top_statement
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search

MODES = ("and", "or", "phrase")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bench-corpus")
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for number, paragraph in enumerate(bench_text()):
            out.write(json.dumps({"_id": f"p{number}", "title": "", "text": paragraph}, ensure_ascii=False) + "\n")
    return folder


@pytest.fixture(scope="module")
def queries() -> list[str]:
    rng = random.Random(2026)
    paragraphs = [p for p in bench_text() if len(p) >= 40]
    found = []
    while len(found) < 200:
        paragraph = rng.choice(paragraphs)
        start = rng.randrange(0, len(paragraph) - 12)
        found.append(paragraph[start : start + rng.randint(4, 12)])
    return found


_INDEXES: dict[str, Path] = {}


def index_for(spec: str, corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if spec not in _INDEXES:
        path = tmp_path_factory.mktemp("bench-index") / "index.sqlite"
        # FTS5 alone: the saved baselines of these benchmarks predate impact postings (the default since
        # 2026-12-01), whose own speed is measured by test_impact_speed.py.
        build(corpus, path, builder="passages", tokenizer=spec, engine="fts5")
        _INDEXES[spec] = path
    return _INDEXES[spec]


@pytest.fixture(scope="module")
def lines_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The benchmark text as a lines corpus: one document per part, one line per paragraph."""
    folder = tmp_path_factory.mktemp("bench-lines")
    paragraphs = bench_text()
    manifest = []
    for part in range(9):
        name = f"part-{part}.txt"
        (folder / name).write_text("\n".join(paragraphs[part::9]) + "\n", encoding="utf-8")
        manifest.append(
            {"doc_id": f"part-{part}", "revision": "r1", "status": "current", "expires": None, "path": name}
        )
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


BUILDERS = ["passages", "lines", "sections"]


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("spec", ALL_SPECS)
def test_build_throughput(benchmark, spec: str, builder: str, corpus: Path, lines_corpus: Path, tmp_path: Path) -> None:
    """passages and lines: the benchmark text (786 paragraphs, 810 lines); sections: the shipped handbook
    (391 chunks)."""
    from rag_eval.eval.datasets.shipped import corpus_dir

    benchmark.group = f"build:{spec.split(':')[0]}"
    source = {"passages": corpus, "lines": lines_corpus, "sections": corpus_dir("handbook")}[builder]
    counter = iter(range(1000))

    def run():
        return build(source, tmp_path / f"index-{next(counter)}.sqlite", builder=builder, tokenizer=spec, engine="fts5")

    report = benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    median = benchmark.stats.stats.median
    benchmark.extra_info.update(
        {
            "spec": spec,
            "builder": builder,
            "chunks": report.chunks,
            "index_bytes": report.index_bytes,
            "chunks_per_second": round(report.chunks / median),
            "tokenize_seconds": round(report.tokenize_seconds, 4),
            "write_seconds": round(report.write_seconds, 4),
        }
    )
    if builder != "sections":
        characters = sum(map(len, bench_text()))
        benchmark.extra_info.update({"characters": characters, "chars_per_second": round(characters / median)})
    lines = sum(1 for paragraph in bench_text() for line in paragraph.split("\n") if line.strip())
    assert report.chunks == {"sections": 391, "lines": lines, "passages": len(bench_text())}[builder]


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spec", ALL_SPECS)
def test_query_latency(
    benchmark, spec: str, mode: str, corpus: Path, queries: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    benchmark.group = f"query:{spec.split(':')[0]}"
    index = Index.open(index_for(spec, corpus, tmp_path_factory))
    for query in queries[:20]:  # warm-up, excluded
        search(index, query, mode=mode)
    tokenize: list[float] = []
    match: list[float] = []

    def run() -> int:
        hits = 0
        for query in queries:
            result = search(index, query, mode=mode)
            tokenize.append(result.tokenize_seconds)
            match.append(result.search_seconds)
            hits += len(result.hits)
        return hits

    hits = benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    benchmark.extra_info.update(
        {
            "spec": spec,
            "mode": mode,
            "queries": len(queries),
            "hits": hits,
            "tokenize_p50_ms": round(statistics.median(tokenize) * 1e3, 4),
            "tokenize_p95_ms": round(_percentile(tokenize, 0.95) * 1e3, 4),
            "search_p50_ms": round(statistics.median(match) * 1e3, 4),
            "search_p95_ms": round(_percentile(match, 0.95) * 1e3, 4),
        }
    )
    index.close()


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_toolkit_overhead_over_bare_fts5(
    benchmark, spec: str, corpus: Path, queries: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Per query: best of 5 of the toolkit's search phase (tokenization excluded) against the exact SQL
    statement it issues, run bare on the same index; the p50 of the per-query ratios is the overhead."""
    benchmark.group = f"overhead:{spec.split(':')[0]}"
    index = Index.open(index_for(spec, corpus, tmp_path_factory))
    defaults = index.defaults
    statement = top_statement(index)
    cursor = index.db.cursor()
    cursor.row_factory = None

    def measure() -> list[float]:
        ratios = []
        for query in queries:
            compiled = search(index, query, mode="or", snippets=False).query
            if compiled.expression is None:
                continue
            toolkit = min(search(index, query, mode="or", snippets=False).search_seconds for _ in range(5))
            bare = []
            for _ in range(5):
                started = time.perf_counter()
                cursor.execute(statement, (compiled.expression, defaults.default_limit)).fetchall()
                bare.append(time.perf_counter() - started)
            ratios.append(toolkit / min(bare))
        return ratios

    ratios = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info.update(
        {
            "spec": spec,
            "queries_with_terms": len(ratios),
            "overhead_p50": round(statistics.median(ratios) - 1, 4),
            "overhead_p95": round(_percentile(ratios, 0.95) - 1, 4),
        }
    )
    index.close()
