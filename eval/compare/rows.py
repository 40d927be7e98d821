"""The rows of ``rag-eval compare``: a run checked against the corpus and scored, and a system's row with its
scores, latency, build and index figures."""

from __future__ import annotations

import sqlite3
from typing import Any

from ...engines.base import get_engine
from ...errors import IndexFileError, RagEvalError
from ...files.paths import sqlite_uri
from ...measure import latency_summary
from ...records import RankedDoc
from ...tokenizers import get_tokenizer
from ..datasets.records import NO_ANSWER, Dataset, Qrel
from ..metrics.measures import evaluate
from .runner import System, SystemRun
from .statistics import bootstrap_ci


def count_tokens_per_passage(index_path: str) -> float:
    # mode=rw: never create a file under the cached index's name (compare holds it in use, but a hand may remove it).
    try:
        db = sqlite3.connect(sqlite_uri(index_path, "mode=rw"), uri=True)
    except sqlite3.Error as exc:
        raise IndexFileError(f"{index_path}: the cached index went while compare ran ({exc}); run again") from None
    try:
        db.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, 'search', 'row')")
        tokens = db.execute("SELECT coalesce(sum(cnt), 0) FROM temp.vocab").fetchone()[0]
        chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return round(tokens / chunks, 1) if chunks else 0.0
    finally:
        db.close()


def scored_run(
    qrels: list[Qrel], run: list[RankedDoc], metrics: list[str], judged: list[str]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Means and per-query values over the judged queries; nothing to evaluate without judgments."""
    if not judged:
        return {}, {}
    return evaluate(qrels, run, metrics)


def check_units(run: list[RankedDoc], corpus_ids: set[str], name: str, dataset: Dataset) -> None:
    """Refuse a run that returns ids the dataset's corpus does not have.

    Every id a system returns must be a corpus id (the ids qrels use): that is exact, and a system that
    finds nothing relevant still passes. Ids of another unit (a file path where the qrels name sections,
    a chunk where they name passages) would otherwise score 0 without a word.
    """
    unknown = sorted({doc.doc_id for doc in run} - corpus_ids)
    if not unknown:
        return
    returned = len({doc.doc_id for doc in run})
    example = next(iter(sorted(corpus_ids)), "")
    raise RagEvalError(
        f"{name}: {len(unknown)} of the {returned} ids it returns are not ids of dataset "
        f"{dataset.id!r}, e.g. {unknown[0]!r}, where the corpus and qrels use ids like {example!r}",
        hint="the system's units do not match the dataset's (another builder, another corpus or another id scheme)",
    )


def system_row(
    dataset: Dataset,
    system: System,
    result: SystemRun,
    means: dict[str, float],
    values: dict[str, dict[str, float]],
    metrics: list[str],
    curve: list[str],
    tokens_per_passage: float,
) -> dict[str, Any]:
    """A system's row (report.json's shape): its metrics and intervals, latency, build, tokens per passage and
    unanswerable questions."""
    no_answer = [q for q in dataset.queries.values() if q.kind == NO_ANSWER]
    false_hit = sum(1 for q in no_answer if result.false_hits.get(q.id, 0) > 0)
    build = result.build
    seconds = sum(result.tokenize_seconds) + sum(result.search_seconds)
    return {
        "name": system.name,
        "tokenizer": result.tokenizer_spec,
        "builder": result.builder_spec,
        "mode": system.mode,
        "engine": _engine(system, result),
        "metrics": {m: round(means[m], 4) for m in metrics},
        "ci95": {m: bootstrap_ci([values[q][m] for q in values]) for m in metrics},
        "recall_curve": {m: round(means[m], 4) for m in curve},
        "latency_ms": _latency(result),
        "latency_samples_ms": {"search": [round(v * 1000, 4) for v in result.search_seconds]},
        # queries answered per second, one after another: tokenize and search, as a caller waits
        "qps": round(len(result.search_seconds) / seconds, 1) if seconds > 0 else None,
        "build": _build(build),
        # A native strategy tokenizes inside FTS5, during the write: no tokenization of its own to time.
        "tokenize_chars_per_second": (
            round(sum(len(p.title) + len(p.text) for p in dataset.corpus.values()) / build["tokenize_seconds"])
            if build.get("tokenize_seconds") and not get_tokenizer(system.tokenizer).native
            else None
        ),
        "tokens_per_passage": tokens_per_passage,
        "zero_hit_queries": len(result.zero_hit_queries),
        "no_answer_queries": len(no_answer),
        "no_answer_false_hit_rate": round(false_hit / len(no_answer), 4) if no_answer else None,
    }


def _engine(system: System, result: SystemRun) -> dict[str, Any]:
    """The engine that ranked the row, as it declares itself, and what it measured."""
    engine = get_engine(system.engine)
    declared = {"name": engine.name, "spec": result.engine_spec, "exact": engine.exact, "build": engine.build_engine}
    return declared | result.engine_stats


def _latency(result: SystemRun) -> dict[str, Any]:
    """Tokenize and search per question (each the fastest of its repeats), and each question's first search."""
    return {
        "tokenize": latency_summary(result.tokenize_seconds),
        "search": latency_summary(result.search_seconds),
        # each question's ranked run alone, as one timing per question measured it (with --repeat 1: "search")
        **(
            {"search_first_run": latency_summary(result.first_search_seconds)}
            if result.repeat > 1 and result.first_search_seconds
            else {}
        ),
    }


def _build(build: dict[str, Any]) -> dict[str, Any]:
    """The build's times, size, chunks and whether the cache held it; the process pool: workers, how they started,
    their model-load times, CPU/wall speed-up."""
    own = ("seconds", "tokenizer_load_seconds", "tokenize_seconds", "write_seconds", "index_bytes", "chunks", "cached")
    pool = ("workers", "start_method", "worker_load_seconds", "tokenize_speedup")
    return {k: build.get(k) for k in own} | {k: (build.get("extra") or {}).get(k) for k in pool}
