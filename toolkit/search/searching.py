"""Search an index: compile the query, ask the engine to rank it (ties by chunk id), then snippets and explain.

The engine is a plug-in found through the registry (:mod:`rag_eval.engines.base`): this module knows only the
contract, never an engine's name or module.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..engines.base import Engine, recorded_engine, search_engine
from ..errors import IndexFileError, QueryError
from ..files.textio import shown
from ..index.processing import QueryProcessing
from ..index.store import Index
from ..records import Hit
from .explain import explanation
from .hit_snippets import add_snippets
from .query import CompiledQuery, compile_query
from .request import SearchRequest
from .sql import current_generation


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
    query: str | SearchRequest,
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
    """Search ``index`` for ``query``: a :class:`~rag_eval.search.request.SearchRequest`, or the query's text with
    the request's parts as keywords (``as_of``, ``category`` and ``path_prefix`` are its filters).

    Interactive searches follow the limits the builder recorded (query length, number of terms, at
    most ``max_results`` hits). ``deep=True`` is for the evaluation harness: no term limit and any
    ``limit``. Ranking is bm25 with the recorded column weights; ties are broken by chunk id ascending,
    so every consumer sees one strict order. ``as_of`` keeps only current chunks whose expiry date is
    strictly after it. ``processing`` removes question words and prunes frequent terms first (see
    :mod:`rag_eval.index.processing`; a spec such as ``"stopwords=zh"`` is parsed, as ``build`` parses it); by
    default the processing recorded in the index at build time, and ``QueryProcessing()`` (or ``"none"``) for
    none. ``engine`` names the engine that ranks (``fts5``: FTS5's bm25 statement; ``impact``: the impact
    postings, same scores and order); by default the engine recorded at build time; a query it cannot answer
    exactly is ranked by its fallback (``explain`` names the engine that answered). ``keys_only=True`` is for run
    writers (``compare``, batch search): each hit's chunk carries its ``key`` and nothing else (``text`` is
    empty), which skips reading the other columns of every hit's row (most of a 100-deep search's time once
    ranking is fast); it excludes snippets.

    One search reads one snapshot of the index: hits, snippets and the explanation come from the same
    build even while the file is rebuilt, and a rebuild with another tokenizer or other defaults since
    the last search is picked up before the query is compiled (never answered with the old tokenizer).
    """
    if not isinstance(index, Index):
        raise QueryError(
            f"index must be an open Index, not {type(index).__name__}",
            hint="open one with rag_eval.index.store.Index.open(path)",
        )
    given = (mode, limit, as_of, category, path_prefix, snippets, deep, explain, processing, engine, keys_only)
    request = _as_request(query, given)
    for _ in range(_ATTEMPTS):
        result = _search_once(index, request)
        if result is not None:
            return result
    raise IndexFileError(f"{index.path}: the index was rebuilt {_ATTEMPTS} times during one search; try again")


#: :func:`search`'s keywords after the query, and their defaults (as they must be when a request is given whole).
_KEYWORDS = (
    "mode",
    "limit",
    "as_of",
    "category",
    "path_prefix",
    "snippets",
    "deep",
    "explain",
    "processing",
    "engine",
    "keys_only",
)
_DEFAULTS = (None, None, None, None, None, True, False, False, None, None, False)


def _as_request(query: str | SearchRequest, given: tuple[Any, ...]) -> SearchRequest:
    """The request :func:`search` was given, or the one its keywords (``given``, in :data:`_KEYWORDS` order) make."""
    if isinstance(query, SearchRequest):
        if given != _DEFAULTS:
            raise QueryError("give a SearchRequest or the search's keywords, not both")
        return query
    return SearchRequest.of(query, **dict(zip(_KEYWORDS, given, strict=True)))


def _search_once(index: Index, request: SearchRequest) -> SearchResult | None:
    """One attempt; None when the index turned out to be rebuilt with other settings (retry)."""
    recorded = index.meta.get("query_processing")
    asked = recorded_engine(index, request.engine)
    # A single statement reads one snapshot by itself and returns the build generation with its rows;
    # anything that issues more statements runs inside one read transaction instead.
    several = _several(index, request, asked)
    with index.reading() if several else index.errors():
        # ``reading`` has just reloaded the meta if the file was rebuilt since: the engine and processing the
        # index records now are the ones to use (an index rebuilt with --engine fts5 has no postings left).
        moved = request.processing is None and index.meta.get("query_processing") != recorded
        if moved or recorded_engine(index, request.engine).system != asked.system:
            return None
        return _answer(index, request, asked, several)


def _several(index: Index, request: SearchRequest, engine: Engine) -> bool:
    """Whether answering ``request`` issues more than one statement (it then needs a read transaction)."""
    defaults = index.defaults
    processing = request.processing if request.processing is not None else index.processing
    return (
        request.explain
        or (request.snippets and defaults.style.tokens)  # FTS5's snippet() or stored offsets are read
        or (request.mode or defaults.mode) == "phrase"
        or index.generation is None
        or (processing is not None and (processing.needs_frequencies or processing.weighted))  # the vocabulary too
        or not engine.one_statement
    )


def _answer(index: Index, request: SearchRequest, asked: Engine, several: bool) -> SearchResult | None:
    """The request answered over the snapshot being read; None when a single statement saw another build."""
    defaults = index.defaults
    processing = request.processing if request.processing is not None else index.processing
    limit = _check_limit(
        defaults.default_limit if request.limit is None else request.limit,
        10**9 if request.deep else defaults.max_results,
    )
    started = time.perf_counter()
    compiled = compile_query(
        index.tokenizer,
        request.query,
        request.mode or defaults.mode,
        max_chars=None if request.deep else defaults.max_query_chars,
        max_terms=None if request.deep else defaults.max_terms,
        processing=processing,
        document_frequency=index.document_frequency,
        chunks=index.chunks,
    )
    tokenized = time.perf_counter()
    answering, fallback = _answering(index, compiled, asked)
    if processing is not None and processing.weighted and compiled.mode != "phrase" and compiled.expression:
        compiled, answering, fallback = _expanded(index, request, compiled, asked, processing)
    hits: list[Hit] = []
    generation = index.generation
    if compiled.expression is not None:
        hits, generation = answering.rank(index, compiled, limit, request.filters, request.keys_only)
    if not several and _saw_another_build(index, compiled, hits, generation):
        return None
    if request.snippets and hits:
        add_snippets(index, compiled, hits)
    done = time.perf_counter()
    info = _explained(index, compiled, answering, fallback, processing) if request.explain else {}
    return SearchResult(compiled, hits, tokenized - started, done - tokenized, info)


def _expanded(
    index: Index, request: SearchRequest, compiled: CompiledQuery, asked: Engine, processing: QueryProcessing
) -> tuple[CompiledQuery, Engine, str | None]:
    """Pseudo-relevance feedback: ``compiled`` ranked once (its feedback chunks), expanded into a weighted query,
    and the engine that answers that (one that declares ``weighted_terms``, else a QueryError)."""
    from .feedback import expand

    answering, _ = _answering(index, compiled, asked)
    answering.check_processing(processing, compiled.mode, "search")
    documents = processing.feedback_settings[0]
    first, _ = answering.rank(index, compiled, documents, request.filters, True)
    expanded = expand(index, compiled, first, processing)
    answering, fallback = _answering(index, expanded, asked)
    answering.check_processing(processing, expanded.mode, f"search (answered by {answering.name}: {fallback})")
    return expanded, answering, fallback


def _answering(index: Index, compiled: CompiledQuery, asked: Engine) -> tuple[Engine, str | None]:
    """The engine that answers ``compiled``, and why it is the asked engine's fallback (None when it is not)."""
    reason = asked.fallback_reason(index, compiled)
    if reason is None:
        return asked, None
    return search_engine(asked.fallback), reason


def _saw_another_build(index: Index, compiled: CompiledQuery, hits: list[Hit], generation: str | None) -> bool:
    """After a single statement: whether it read another build than the one whose settings compiled the query."""
    seen = generation if compiled.expression is not None else current_generation(index)
    if seen == index.generation:
        return False
    changed = index.refresh()
    # Rows read from the build now recorded, compiled with unchanged settings, stand; anything else (other
    # settings, or no row to tell which build answered) is asked again.
    return changed or not hits or seen != index.generation


def _explained(
    index: Index, compiled: CompiledQuery, answering: Engine, fallback: str | None, processing: QueryProcessing | None
) -> dict[str, Any]:
    """What ``explain`` reports: how the index read the query, the engine that answered and why, the processing."""
    info = explanation(index, compiled)
    info["engine"] = answering.name
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
    return info


def warm(index: Index, engine: str | None = None) -> bool:
    """Ready ``index`` for many queries ranked by ``engine`` (default: the index's): the engine prepares it
    (:meth:`~rag_eval.engines.base.Engine.prepare`: the impact engine reads its postings whole when they are small
    enough), so that no query reads what it needs for the first time. True when it is (or already was) all in
    memory."""
    if engine is not None:
        search_engine(engine)
    with index.reading():  # one snapshot, the meta of the build it reads, the index's lock held
        return recorded_engine(index, engine).prepare(index)
