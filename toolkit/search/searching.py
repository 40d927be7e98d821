"""Search an index: compile the query, rank with bm25 (ties by chunk id), filter, snippet."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..builders.lines import iso_date
from ..engines import impact
from ..errors import CorpusError, IndexFileError, QueryError
from ..files.textio import shown, text_argument
from ..index.store import Index
from ..records import Hit
from .explain import explanation
from .hit_snippets import add_snippets
from .processing import QueryProcessing
from .query import CompiledQuery, compile_query
from .sql import CHUNK_FIELDS as CHUNK_FIELDS
from .sql import GENERATION_SQL as GENERATION_SQL
from .sql import KEY_FIELDS as KEY_FIELDS
from .sql import current_generation, fts5_ranked, impact_ranked
from .sql import hits_for as hits_for
from .sql import top_statement as top_statement
from .sql import weights_for as weights_for


@dataclass
class SearchResult:
    """Hits in rank order plus what was run and how long each phase took."""

    query: CompiledQuery
    hits: list[Hit]
    tokenize_seconds: float
    search_seconds: float
    explain: dict[str, Any] = field(default_factory=dict)


def _check_limit(limit: object, maximum: int) -> int:
    if type(limit) is not int or not 1 <= limit <= maximum:
        raise QueryError(f"limit must be an integer from 1 to {maximum}, not {shown(limit)}")
    return limit


#: A search is retried when the index was rebuilt with other settings while it ran; more than this many
#: rebuilds during one search is reported rather than retried forever.
_ATTEMPTS = 5


def search(
    index: Index,
    query: str,
    *,
    mode: str | None = None,
    limit: int | None = None,
    as_of: str | None = None,
    category: str | None = None,
    path_prefix: str | None = None,
    snippets: bool = True,
    deep: bool = False,
    explain: bool = False,
    processing: QueryProcessing | str | None = None,
    engine: str | None = None,
    keys_only: bool = False,
) -> SearchResult:
    """Search ``index`` for ``query``.

    Interactive searches follow the limits the builder recorded (query length, number of terms, at
    most ``max_results`` hits). ``deep=True`` is for the evaluation harness: no term limit and any
    ``limit``. Ranking is bm25 with the recorded column weights; ties are broken by chunk id ascending,
    so every consumer sees one strict order. ``as_of`` keeps only current chunks whose expiry date is
    strictly after it. ``processing`` removes question words and prunes frequent terms first (see
    :mod:`rag_eval.search.processing`; a spec such as ``"stopwords=zh"`` is parsed, as ``build`` parses it); by
    default the processing recorded in the index at build time, and ``QueryProcessing()`` (or ``"none"``) for
    none. ``engine`` ranks with FTS5's bm25 statement (``fts5``) or the impact
    postings (``impact``, same scores and order, see :mod:`rag_eval.engines.impact`); by default the engine
    recorded at build time. ``keys_only=True`` is for run writers (``compare``, batch search): each hit's
    chunk carries its ``key`` and nothing else (``text`` is empty), which skips reading the other columns
    of every hit's row (most of a 100-deep search's time once ranking is fast); it excludes snippets.

    One search reads one snapshot of the index: hits, snippets and the explanation come from the same
    build even while the file is rebuilt, and a rebuild with another tokenizer or other defaults since
    the last search is picked up before the query is compiled (never answered with the old tokenizer).
    """
    if not isinstance(index, Index):
        raise QueryError(
            f"index must be an open Index, not {type(index).__name__}",
            hint="open one with rag_eval.index.store.Index.open(path)",
        )
    if isinstance(processing, str):
        processing = QueryProcessing.parse(text_argument(processing, "processing", QueryError))
    elif processing is not None and not isinstance(processing, QueryProcessing):
        raise QueryError(
            f"processing must be a QueryProcessing or a spec such as 'stopwords=zh', not {type(processing).__name__}"
        )
    for value, name in ((category, "category"), (path_prefix, "path_prefix")):
        if value is not None:
            text_argument(value, name, QueryError)
    if as_of is not None:
        try:
            iso_date(as_of, "as-of date")
        except CorpusError as exc:
            raise QueryError(str(exc)) from None
    if engine is not None:
        impact.check_engine(engine)
    if keys_only and snippets:
        raise QueryError("a keys-only search has no snippets: pass snippets=False")
    for _ in range(_ATTEMPTS):
        result = _search_once(
            index,
            query,
            mode,
            limit,
            as_of,
            category,
            path_prefix,
            snippets,
            deep,
            explain,
            processing,
            engine,
            keys_only,
        )
        if result is not None:
            return result
    raise IndexFileError(f"{index.path}: the index was rebuilt {_ATTEMPTS} times during one search; try again")


def _search_once(
    index: Index,
    query: str,
    mode: str | None,
    limit: int | None,
    as_of: str | None,
    category: str | None,
    path_prefix: str | None,
    snippets: bool,
    deep: bool,
    explain: bool,
    processing: QueryProcessing | None = None,
    engine: str | None = None,
    keys_only: bool = False,
) -> SearchResult | None:
    """One attempt; None when the index turned out to be rebuilt with other settings (retry)."""
    defaults = index.defaults
    asked_engine, recorded = engine, index.meta.get("query_processing")
    chosen = processing is not None
    processing = processing if processing is not None else index.processing
    engine = _asked_engine(index, engine)
    # A single statement reads one snapshot by itself and returns the build generation with its rows;
    # anything that issues more statements runs inside one read transaction instead.
    several = (
        explain
        or (snippets and defaults.snippet == "fts5")
        or (mode or defaults.mode) == "phrase"
        or index.generation is None
        or (processing is not None and processing.needs_frequencies)  # reads the vocabulary too
        or engine == "impact"
    )
    with index.reading() if several else index.errors():
        # ``reading`` has just reloaded the meta if the file was rebuilt since: the engine and processing the
        # index records now are the ones to use (an index rebuilt with --engine fts5 has no postings left).
        moved = not chosen and index.meta.get("query_processing") != recorded
        if moved or _asked_engine(index, asked_engine) != engine:
            return None
        if engine not in impact.ENGINES:
            raise IndexFileError(f"{index.path}: damaged index meta: engine is {engine!r}", hint="rebuild it")
        defaults = index.defaults
        mode = mode or defaults.mode
        checked = _check_limit(
            defaults.default_limit if limit is None else limit, 10**9 if deep else defaults.max_results
        )
        started = time.perf_counter()
        compiled = compile_query(
            index.tokenizer,
            query,
            mode,
            max_chars=None if deep else defaults.max_query_chars,
            max_terms=None if deep else defaults.max_terms,
            processing=processing,
            document_frequency=index.document_frequency,
            chunks=index.chunks,
        )
        tokenized = time.perf_counter()
        hits: list[Hit] = []
        info: dict[str, Any] = {}
        generation = index.generation
        answered, fallback = _engine(index, compiled, engine)
        if compiled.expression is not None and answered == "impact":
            hits = impact_ranked(index, compiled, checked, as_of, category, path_prefix, keys_only)
        elif compiled.expression is not None:
            hits, generation = fts5_ranked(index, compiled, checked, as_of, category, path_prefix, keys_only)
        if not several:
            seen = generation if compiled.expression is not None else current_generation(index)
            if seen != index.generation:
                changed = index.refresh()
                # Rows read from the build now recorded, compiled with unchanged settings, stand; anything
                # else (other settings, or no row to tell which build answered) is asked again.
                if changed or not hits or seen != index.generation:
                    return None
        if snippets and hits:
            add_snippets(index, compiled, hits)
        done = time.perf_counter()
        if explain:
            info = explanation(index, compiled)
            info["engine"] = answered
            if fallback is not None:
                info["engine_fallback"] = fallback
            if processing is not None and processing.active:
                info["processing"] = {
                    "spec": processing.system,
                    "removed": list(compiled.removed),
                    "pruned": list(compiled.pruned),
                    "document_frequency": dict(compiled.frequencies),
                    "chunks": index.chunks,
                }
    return SearchResult(compiled, hits, tokenized - started, done - tokenized, info)


def warm(index: Index, engine: str | None = None) -> bool:
    """Ready ``index`` for many queries ranked by ``engine`` (default: the index's): the impact engine's
    postings are read whole when they are small enough (:func:`rag_eval.engines.impact.preload`), so that no query
    reads its terms' blocks for the first time. True when they were (or already are) all in memory."""
    if engine is not None:
        impact.check_engine(engine)
    with index.reading():  # one snapshot, the meta of the build it reads, the index's lock held
        if _asked_engine(index, engine) != "impact":
            return False
        return impact.preload(index)


def _asked_engine(index: Index, engine: str | None) -> str:
    """The engine a search of ``index`` asks for: ``engine``, else the one the index recorded, else fts5 (an
    index built before engines were recorded)."""
    return engine or index.meta.get("engine") or "fts5"


def _engine(index: Index, compiled: CompiledQuery, engine: str) -> tuple[str, str | None]:
    """The engine that answers, and why FTS5 answers when the impact engine was asked for."""
    if engine != "impact":
        return engine, None
    present = index.statements.get("impacts")
    if present is None:
        present = index.statements["impacts"] = "yes" if impact.has_impacts(index) else "no"
    if present == "no" and len(index.tokenizer.fields) > 1:
        # Hybrids built before their fields had postings (an ``impact`` build wrote none then).
        return "fts5", "this hybrid index holds no impact postings; rebuild it with --engine impact"
    if present == "no":
        raise QueryError(
            f"{index.path}: this index holds no impact postings",
            hint="rebuild it with: rag-eval index build --engine impact",
        )
    reason = impact.fallback_reason(index, compiled)
    return ("fts5", reason) if reason is not None else ("impact", None)


def search_tool(
    index: Index,
    query: str,
    *,
    as_of: str | None,
    limit: int | None = None,
    mode: str | None = None,
    category: str | None = None,
    path_prefix: str | None = None,
    explain: bool = False,
    processing: QueryProcessing | str | None = None,
    engine: str | None = None,
) -> dict[str, Any]:
    """Seed 000's agent tool result; the same as :func:`rag_eval.search.evidence.evidence` (kept for old callers)."""
    from .evidence import evidence

    return evidence(
        index,
        query,
        as_of=as_of,
        limit=limit,
        mode=mode,
        category=category,
        path_prefix=path_prefix,
        explain=explain,
        processing=processing,
        engine=engine,
    )
