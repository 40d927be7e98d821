"""The impact engine's public face: which engine a build records and a search uses, which queries the engine
answers exactly, and every name callers import, re-exported from the modules that hold them.

The engine ranks with FTS5's own bm25, exactly, from per-term postings: :mod:`rag_eval.engines.impact.write` writes
them at build time (its docstring describes the format and why the scores are FTS5's bit for bit),
:mod:`rag_eval.engines.impact.read` reads, checks and caches them, and :mod:`rag_eval.engines.impact.rank` ranks a
query with them (MaxScore pruning included) on the numpy helpers of :mod:`rag_eval.engines.impact.arrays`.

Settings such as ``PRUNE`` or ``CACHE_BYTES`` are re-exported to be read: to change one, set it on the module
that uses it (``impact_rank.PRUNE``, ``impact_read.CACHE_BYTES``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...errors import QueryError
from .rank import (
    CHECK_FRACTION,
    CHECK_POSTINGS,
    CHECK_SHARE,
    CUT_MIN_POSTINGS,
    DISTINCT_COST,
    LOOKUP_COST,
    POOL_POSTINGS,
    PRUNE,
    PRUNE_MIN_POSTINGS,
    PRUNE_SHARE,
    Accept,
    Ranking,
    query_keys,
    ranked,
)
from .read import (
    BEST_ROWS,
    CACHE_BYTES,
    CLAMPED_IDF,
    ENTRY_BYTES,
    PRELOAD_BYTES,
    Postings,
    has_impacts,
    idf,
    postings_bytes,
    postings_table,
    preload,
    stored_postings,
)
from .write import (
    BLOCK_POSTINGS,
    BLOCK_TERMS,
    BLOCKS_TABLE,
    FTS5_TOKEN_BYTES,
    K1,
    LEGACY_TABLE,
    TABLES,
    B,
    field_key,
    write_impacts,
)

if TYPE_CHECKING:
    from ...index.store import Index
    from ...search.query import CompiledQuery
    from ...tokenizers import Tokenizer

__all__ = [
    "BEST_ROWS",
    "BLOCKS_TABLE",
    "BLOCK_POSTINGS",
    "BLOCK_TERMS",
    "BUILD_ENGINES",
    "CACHE_BYTES",
    "CHECK_FRACTION",
    "CHECK_POSTINGS",
    "CHECK_SHARE",
    "CLAMPED_IDF",
    "CUT_MIN_POSTINGS",
    "DISTINCT_COST",
    "ENGINES",
    "ENTRY_BYTES",
    "FTS5_TOKEN_BYTES",
    "K1",
    "LEGACY_TABLE",
    "LOOKUP_COST",
    "POOL_POSTINGS",
    "PRELOAD_BYTES",
    "PRUNE",
    "PRUNE_MIN_POSTINGS",
    "PRUNE_SHARE",
    "TABLES",
    "Accept",
    "B",
    "Postings",
    "Ranking",
    "build_engine",
    "check_engine",
    "fallback_reason",
    "field_key",
    "has_impacts",
    "ids_json",
    "idf",
    "postings_bytes",
    "postings_table",
    "preload",
    "query_keys",
    "ranked",
    "stored_postings",
    "write_impacts",
]


#: The engines a system can rank with: FTS5's bm25 statement, or the impact postings (same scores).
ENGINES = ("fts5", "impact")

#: What a build may be asked for: an engine, or ``auto`` (the default), which :func:`build_engine` resolves.
BUILD_ENGINES = ("auto", *ENGINES)


def build_engine(choice: object) -> str:
    """The engine a build records for ``choice``: ``auto`` is the impact engine.

    Measured on cmrc2018_dev_trial_sent and its 3x and 10x replicas for all six strategies
    (reports/latency.md, reports/engines.md): the same ranking bit for bit, and faster than FTS5's statement
    end to end for every strategy at every size (even for unicode61 at 1x; 30 to 70x for unigram, jieba
    and pkuseg at 10x), for a larger file (1.6 to 12 MB of postings at 13.5k rows) and a longer build; for
    two hybrids there, the same ranking on all 4,218 questions and 6 to 10x faster at p95 (reports/latency.md,
    "Hybrids").
    """
    if choice == "auto":
        return "impact"
    return check_engine(choice)


def check_engine(name: object) -> str:
    """``name`` if it is an engine, else one QueryError naming the choices."""
    if name not in ENGINES:
        raise QueryError(f"unknown engine {name!r}; choose from: {', '.join(ENGINES)}")
    return str(name)


def fallback_reason(index: Index, compiled: CompiledQuery) -> str | None:
    """Why the impact engine cannot answer ``compiled`` exactly (FTS5 answers then), or None when it can."""
    if compiled.mode not in ("or", "and") or compiled.phrase_filter is not None:
        return f"{compiled.mode} queries are answered by FTS5"
    for term in compiled.terms:
        if _too_long(term):
            return f"FTS5 keeps only the first {FTS5_TOKEN_BYTES:,} bytes of a {len(term):,}-character term"
        if not _single_token(index.tokenizer, term):
            return f"FTS5 reads the quoted term {term!r} as a phrase of several tokens"
    return None


def _too_long(term: str) -> bool:
    """Whether FTS5 may hold ``term`` cut short: it keeps fewer than :data:`FTS5_TOKEN_BYTES` bytes whole."""
    return len(term) * 4 >= FTS5_TOKEN_BYTES and len(term.encode("utf-8", "surrogatepass")) >= FTS5_TOKEN_BYTES


def _single_token(tokenizer: Tokenizer, term: str) -> bool:
    """Whether FTS5 tokenizes the quoted ``term`` into exactly the one token ``term``."""
    if tokenizer.native:
        return tokenizer.terms(term) == [term]  # the Python mirror gives FTS5's tokens (test_fts5_parity)
    # A Python strategy's column: FTS5's ascii tokenizer splits on whitespace and control characters and
    # folds A-Z; a term with none of them is one token, itself.
    return bool(term) and not any(c <= " " or c == "\x7f" or "A" <= c <= "Z" for c in term)


def ids_json(ids: list[int]) -> str:
    """Chunk ids as one JSON array parameter (``json_each``), free of SQLite's limit on variables."""
    return json.dumps(ids)
