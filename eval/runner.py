"""Run a dataset's queries against one system (tokenizer + builder + query mode) and time everything."""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..builders import get_builder
from ..cache import cache_dir
from ..search import search
from ..store import Index
from ..writer import BuildReport, build
from ..tokenizers import get_tokenizer
from .metrics import RankedDoc
from .records import Dataset

#: Every query retrieves at least this many results, so R@100 and MAP@100 are defined.
DEPTH = 100
WARMUP = 5

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class System:
    """What is compared: a tokenizer spec, a builder spec and a query mode."""

    tokenizer: str
    builder: str
    mode: str

    @property
    def name(self) -> str:
        """A readable, unique label, e.g. ``jieba:mode=precise | sections | or``."""
        return f"{self.tokenizer} | {self.builder} | {self.mode}"


@dataclass
class SystemRun:
    """Everything measured for one system on one dataset."""

    system: System
    tokenizer_spec: str
    builder_spec: str
    run: list[RankedDoc]
    build: dict[str, Any]
    index_path: str
    tokenize_seconds: list[float]
    search_seconds: list[float]
    zero_hit_queries: list[str]
    false_hits: dict[str, int] = field(default_factory=dict)


def corpus_source(dataset: Dataset) -> tuple[Path, str]:
    """Where to build from and the builder a dataset implies (shipped layout, else BEIR passages)."""
    if dataset.meta.get("corpus_dir"):
        return Path(dataset.meta["corpus_dir"]), dataset.meta["builder"]
    return Path(dataset.meta["path"]), "passages"


def index_path(dataset: Dataset, tokenizer_spec: str, builder_spec: str) -> Path:
    """Cache location keyed by the corpus checksum and the full system spec."""
    key = hashlib.sha256(f"{dataset.checksum()}\n{tokenizer_spec}\n{builder_spec}".encode()).hexdigest()[:24]
    return cache_dir() / "indexes" / dataset.checksum()[:16] / f"{key}.sqlite"


def unit_of(key: str) -> str:
    """The qrels unit of a chunk key: a split section ``path#anchor~2`` counts as ``path#anchor``."""
    head, tilde, tail = key.rpartition("~")
    return head if tilde and tail.isdigit() and "#" in head else key


def run_system(dataset: Dataset, system: System, *, depth: int = DEPTH, progress: Progress | None = None) -> SystemRun:
    """Build (or reuse) the system's index, run every query ``depth`` deep, and time each phase."""
    tokenizer = get_tokenizer(system.tokenizer)
    source, default_builder = corpus_source(dataset)
    builder = get_builder(system.builder or default_builder)
    path = index_path(dataset, tokenizer.spec, builder.system)
    report_path = path.with_suffix(".build.json")
    report: dict[str, Any]
    if path.is_file() and report_path.is_file():
        report = json.loads(report_path.read_text(encoding="utf-8")) | {"cached": True}
    else:
        built: BuildReport = build(source, path, builder=builder, tokenizer=tokenizer,
                                   progress=(lambda phase, done, total: progress(f"build {phase}", done, total)) if progress else None)
        report = dict(built.__dict__)
        report_path.write_text(json.dumps(report), encoding="utf-8")
        report["cached"] = False
    to_unit = unit_of if builder.name == "sections" else _same
    as_of = dataset.meta.get("as_of")
    queries = list(dataset.queries.values())
    ranked: list[RankedDoc] = []
    tokenize_times: list[float] = []
    search_times: list[float] = []
    zero_hits: list[str] = []
    false_hits: dict[str, int] = {}
    with Index.open(path) as index:
        for query in queries[:WARMUP]:
            search(index, query.text, mode=system.mode, limit=depth, deep=True, as_of=as_of, snippets=False)
        for number, query in enumerate(queries, start=1):
            result = search(index, query.text, mode=system.mode, limit=depth, deep=True, as_of=as_of, snippets=False)
            tokenize_times.append(result.tokenize_seconds)
            search_times.append(result.search_seconds)
            if not result.hits:
                zero_hits.append(query.id)
            if query.kind == "no-answer":
                false_hits[query.id] = len(result.hits)
            ranked += strict_run(query.id, [(to_unit(h.chunk.key), h.score) for h in result.hits])
            if progress is not None:
                progress("queries", number, len(queries))
    return SystemRun(system, tokenizer.spec, builder.system, ranked, report, str(path), tokenize_times, search_times,
                     zero_hits, false_hits)


def _same(key: str) -> str:
    return key


def strict_run(query_id: str, hits: list[tuple[str, float]]) -> list[RankedDoc]:
    """Keep each unit's best rank, then give strictly decreasing scores in rank order.

    bm25 from FTS5 is lower-is-better and ties are common; the score written is ``-bm25``, lowered
    where needed so each is at least 1e-6 below the previous one, so trec_eval (which breaks ties by
    document id) and every other tool read exactly rag-eval's ranking.
    """
    seen: set[str] = set()
    out: list[RankedDoc] = []
    previous = float("inf")
    for doc_id, bm25 in hits:
        if doc_id in seen:
            continue
        seen.add(doc_id)
        score = min(round(-bm25, 6), round(previous - 1e-6, 6))
        out.append(RankedDoc(query_id, doc_id, len(out) + 1, score))
        previous = score
    return out


def latency_summary(values: list[float]) -> dict[str, float]:
    """min, median, mean, p95, p99 and max, in milliseconds."""
    if not values:
        return {}
    ordered = sorted(values)

    def pct(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]

    return {name: round(value * 1000, 4) for name, value in (
        ("min", ordered[0]), ("median", statistics.median(ordered)), ("mean", statistics.fmean(ordered)),
        ("p95", pct(0.95)), ("p99", pct(0.99)), ("max", ordered[-1]))}


def write_trec_run(runs: list[RankedDoc], path: str | Path, tag: str) -> None:
    """A TREC run file: ``qid Q0 docid rank score tag``, scores strictly decreasing per query."""
    with open(path, "w", encoding="utf-8") as out:
        for doc in runs:
            out.write(f"{doc.query_id} Q0 {doc.doc_id} {doc.rank} {doc.score:.6f} {tag}\n")
