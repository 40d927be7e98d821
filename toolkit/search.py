"""Search an index: compile the query, rank with bm25 (ties by chunk id), filter, snippet."""

from __future__ import annotations

import functools
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from . import impact
from .builders import QueryDefaults
from .builders.lines import iso_date
from .columns import all_field_columns, field_columns
from .errors import CorpusError, IndexFileError, QueryError
from .offsets import decode as decode_offsets
from .processing import QueryProcessing
from .query import CompiledQuery, compile_query, quote
from .records import Chunk, Hit
from .snippets import token_snippet, window_snippet
from .store import Index
from .textio import shown, text_argument
from .tokenizers import Token, Tokenizer, normalise


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


#: Chunk's fields, in order, as columns of ``chunks c``.
CHUNK_FIELDS = ", ".join(f"c.{name}" for name in Chunk._fields)
#: What a keys-only search reads of each hit's row.
KEY_FIELDS = "c.key"
#: Chunks read for a list of ids, driven by the list (CROSS JOIN keeps that order of loops): one rowid lookup
#: per id, no scan.
_BY_IDS = "FROM json_each(?) AS j CROSS JOIN chunks c ON c.id = j.value"

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
    :mod:`rag_eval.processing`; a spec such as ``"stopwords=zh"`` is parsed, as ``build`` parses it); by
    default the processing recorded in the index at build time, and ``QueryProcessing()`` (or ``"none"``) for
    none. ``engine`` ranks with FTS5's bm25 statement (``fts5``) or the impact
    postings (``impact``, same scores and order, see :mod:`rag_eval.impact`); by default the engine
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
            hint="open one with rag_eval.store.Index.open(path)",
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
            hits = _impact_ranked(index, compiled, checked, as_of, category, path_prefix, keys_only)
        elif compiled.expression is not None:
            hits, generation = _ranked(index, compiled, checked, as_of, category, path_prefix, keys_only)
        if not several:
            seen = generation if compiled.expression is not None else _generation(index)
            if seen != index.generation:
                changed = index.refresh()
                # Rows read from the build now recorded, compiled with unchanged settings, stand; anything
                # else (other settings, or no row to tell which build answered) is asked again.
                if changed or not hits or seen != index.generation:
                    return None
        if snippets and hits:
            _add_snippets(index, compiled, hits)
        done = time.perf_counter()
        if explain:
            info = _explain(index, compiled)
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
    postings are read whole when they are small enough (:func:`rag_eval.impact.preload`), so that no query
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


def _impact_ranked(
    index: Index,
    compiled: CompiledQuery,
    limit: int,
    as_of: str | None,
    category: str | None,
    path_prefix: str | None,
    keys_only: bool = False,
) -> list[Hit]:
    """The impact engine's hits, filtered like the FTS5 statement and read from ``chunks`` the same way."""
    reader = index.db.cursor()
    reader.row_factory = None
    accept: impact.Accept | None = None
    if as_of is not None or category is not None or path_prefix is not None:
        where = " AND ".join(_filter_clauses(as_of is not None, category is not None, path_prefix is not None))
        sql = f"SELECT c.id {_BY_IDS} WHERE {where}"
        params = _filter_params(as_of, category, path_prefix)

        def accept(ids: list[int]) -> set[int]:
            return {row[0] for row in reader.execute(sql, [impact.ids_json(ids), *params])}

    return hits_for(index, reader, impact.ranked(index, compiled, limit, accept), keys_only)


def hits_for(index: Index, reader: sqlite3.Cursor, top: list[tuple[int, float]], keys_only: bool = False) -> list[Hit]:
    """Hits for ranked ``(chunk id, score)`` pairs of ``index``, their chunks read from ``chunks`` (only the
    key with ``keys_only``, from a cache of the build's keys); ``reader`` returns plain tuples."""
    if not top:
        return []
    ids = [i for i, _ in top]
    if keys_only:
        chunks = _keys_of(index, reader, ids)
        return [_hit((i, rank, score, "", chunks[i])) for rank, (i, score) in enumerate(top, 1)]
    rows = {row[0]: row[1:] for row in reader.execute(_ROWS_SQL, [impact.ids_json(ids)])}
    if len(rows) < len(ids):
        _check_found(index, ids, rows)
    return [_hit((i, rank, score, "", _chunk(rows[i]))) for rank, (i, score) in enumerate(top, 1)]


def _check_found(index: Index, ids: list[int], found: dict[int, Any]) -> None:
    """Every ranked id has its chunk: postings naming a lost row (a damaged or tampered index) are an error,
    not a KeyError."""
    lost = next((i for i in ids if i not in found), None)
    if lost is not None:
        raise IndexFileError(
            f"{index.path}: damaged index: its postings name chunk {lost}, which its chunks table does not hold",
            hint="rebuild it with: rag-eval index build",
        )


#: ``Hit(*values)`` and ``Chunk(*values)`` without the generated ``__new__``'s Python frame: a run's 100 hits
#: per query took 0.15 ms to build that way, 0.05 ms this way (the values are in field order).
_hit = functools.partial(tuple.__new__, Hit)
_chunk = functools.partial(tuple.__new__, Chunk)


_ROWS_SQL = f"SELECT c.id, {CHUNK_FIELDS} {_BY_IDS}"
_KEYS_SQL = f"SELECT c.id, {KEY_FIELDS} {_BY_IDS}"
#: Chunk keys kept per open index for keys-only searches, which ask for the same rows query after query (a
#: run's 100 hits' keys read by SQL took about as long as ranking them); past this many the cache starts over.
#: The index starts it over for every build it moves to (``Index.keys``).
CACHE_KEYS = 200_000


def _keys_of(index: Index, reader: sqlite3.Cursor, ids: list[int]) -> dict[int, Chunk]:
    """The chunks of ``ids`` in the build ``index`` reads now with their key alone, each read once per build."""
    known = index.keys
    if len(known) > CACHE_KEYS:
        known.clear()
    missing = [i for i in ids if i not in known]
    if missing:
        known.update((i, Chunk(key, "")) for i, key in reader.execute(_KEYS_SQL, [impact.ids_json(missing)]))
        _check_found(index, missing, known)  # only ids just read can be lost: the cached ones were found
    return known


def _rank_order(row: tuple) -> tuple[float, int]:
    return row[1], row[0]


#: What a search with no hit reads after its statement: which build answered (the statement returned no
#: row to carry it). Benchmarks count it as part of the SQL a search issues.
GENERATION_SQL = "SELECT value FROM meta WHERE key = 'generation'"


def _generation(index: Index) -> str | None:
    row = index.db.execute(GENERATION_SQL).fetchone()
    return None if row is None else row[0]


def _ranked(
    index: Index,
    compiled: CompiledQuery,
    limit: int,
    as_of: str | None,
    category: str | None,
    path_prefix: str | None,
    keys_only: bool = False,
) -> tuple[list[Hit], str | None]:
    """The hits and the build generation they were read from: returned by the statement itself, or read
    right after it when it found nothing (None for a phrase-filtered search, which runs in a transaction)."""
    params: list[Any] = [compiled.expression, *_filter_params(as_of, category, path_prefix)]
    ranking = _ranking_sql(index, as_of is not None, category is not None, path_prefix is not None)
    cursor = index.db.cursor()
    cursor.row_factory = None
    if compiled.phrase_filter is None:
        rows = cursor.execute(top_statement(index, ranking, keys_only), [*params, limit]).fetchall()
        if not rows:
            found = cursor.execute(GENERATION_SQL).fetchone()
            return [], None if found is None else found[0]
        rows.sort(key=_rank_order)  # the statement leaves the order to us (see top_statement)
        if keys_only:
            hits = [_hit((row[0], rank, row[1], "", Chunk(row[2], ""))) for rank, row in enumerate(rows, 1)]
        else:
            hits = [_hit((row[0], rank, row[1], "", _chunk(row[2:-1]))) for rank, row in enumerate(rows, 1)]
        return hits, rows[0][-1]
    hits = []
    t2s = index.tokenizer.converts_traditional
    needle = "".join(compiled.phrase_filter.split())
    reader = index.db.cursor()
    reader.row_factory = None
    for chunk_id, score in cursor.execute(ranking, params):
        row = reader.execute(f"SELECT {CHUNK_FIELDS} FROM chunks c WHERE c.id = ?", (chunk_id,)).fetchone()
        chunk = Chunk(*row)
        if any(needle in "".join(normalise(value, t2s=t2s).split()) for value in (chunk.text, chunk.title)):
            hits.append(Hit(chunk_id, len(hits) + 1, score, "", chunk))
            if len(hits) == limit:
                break
    cursor.close()
    return hits, None


def column_weights(index: Index) -> list[float]:
    """bm25's weight for each FTS5 column: title and body weights, times each field's weight.

    FTS5 multiplies a column's weight into the term frequency before saturation, so a weight w also acts
    like k1 / w on that column: a field weight is a saturation knob as much as a weight.
    """
    return weights_for(index.tokenizer, index.defaults)


def weights_for(tokenizer: Tokenizer, defaults: QueryDefaults) -> list[float]:
    """:func:`column_weights` of an index built with ``tokenizer`` and a builder's ``defaults``."""
    if tokenizer.native:
        return [defaults.title_weight, defaults.body_weight]
    return [
        w
        for field in tokenizer.fields
        for w in (defaults.title_weight * field.weight, defaults.body_weight * field.weight)
    ]


def _ranking_sql(index: Index, as_of: bool, category: bool, path_prefix: bool) -> str:
    """The ranking statement for a combination of filters, built once per index (it is on the hot path)."""
    key = (as_of, category, path_prefix)
    cached = index.statements.get(key)
    if cached is None:
        where, join = ["search MATCH ?"], ""
        if as_of or category or path_prefix:
            join = " JOIN chunks c ON c.id = search.rowid"
        where += _filter_clauses(as_of, category, path_prefix)
        weights = ", ".join(repr(weight) for weight in column_weights(index))
        cached = (
            f"SELECT search.rowid AS id, bm25(search, {weights}) AS score FROM search{join} "
            f"WHERE {' AND '.join(where)} ORDER BY score, search.rowid"
        )
        index.statements[key] = cached
    return cached


def _filter_clauses(as_of: bool, category: bool, path_prefix: bool) -> list[str]:
    """The WHERE clauses over ``chunks c`` of a search's filters (both engines use these)."""
    where = []
    if as_of:
        where.append("c.status = 'current' AND (c.expires IS NULL OR c.expires > ?)")
    if category:
        where.append("c.category = ?")
    if path_prefix:
        where.append("substr(c.path, 1, ?) = ?")
    return where


def _filter_params(as_of: str | None, category: str | None, path_prefix: str | None) -> list[Any]:
    """The parameters of :func:`_filter_clauses`, in order."""
    params: list[Any] = []
    if as_of is not None:
        params.append(as_of)
    if category is not None:
        params.append(category)
    if path_prefix is not None:
        params += [len(path_prefix), path_prefix]
    return params


def top_statement(index: Index, ranking: str | None = None, keys_only: bool = False) -> str:
    """The one statement a search without a phrase filter issues: rank and cut in FTS5, then read only
    the top rows of the chunks table (plus the build generation). Parameters: the MATCH expression, any
    filter values, the limit. Benchmarks time it bare to measure rag-eval's own overhead.

    It has no outer ORDER BY: SQLite would copy every row, whole texts included, through a sorter (a
    10 MB passage took the statement from 54 to 220 ms); the caller sorts the few rows by (score, id).
    ``keys_only`` reads the chunk's key alone instead of all its fields.
    """
    ranking = ranking or _ranking_sql(index, False, False, False)
    fields = KEY_FIELDS if keys_only else CHUNK_FIELDS
    name = (keys_only, ranking)
    cached = index.statements.get(name)
    if cached is None:
        # The last column is the build generation, read in the same statement (the same snapshot) as the rows.
        cached = index.statements[name] = (
            f"SELECT r.id, r.score, {fields}, "
            f"(SELECT value FROM meta WHERE key = 'generation') "
            f"FROM ({ranking} LIMIT ?) AS r "
            f"JOIN chunks c ON c.id = r.id"
        )
    return cached


#: A native strategy's hit longer than this many characters gets its snippet made in Python from the strategy's
#: mirror tokens (:func:`token_snippet`, linear) instead of FTS5's ``snippet()``, whose time grows with the square
#: of the matches in the row: 0.58 s against 0.07 s for a 64,000-character line and three terms, and 2 min 14 s
#: for a 7-term query on a 0.96 MB line (2026-12-02). Below it FTS5's is as fast or faster, and it is FTS5's own.
FTS5_SNIPPET_CHARS = 10_000


def _add_snippets(index: Index, compiled: CompiledQuery, hits: list[Hit]) -> None:
    defaults = index.defaults
    tokenizer = index.tokenizer
    if defaults.snippet == "fts5" and tokenizer.native and not tokenizer.overlapping_tokens and hits:
        short = [hit for hit in hits if len(hit.chunk.text) <= FTS5_SNIPPET_CHARS]
        long = [hit for hit in hits if len(hit.chunk.text) > FTS5_SNIPPET_CHARS]
        _fts5_snippets(index, compiled, short)
        _python_snippets(index, compiled, long)
        snippets = {hit.id: hit.snippet for hit in short + long}
        for position, hit in enumerate(hits):
            hits[position] = hit._replace(snippet=snippets[hit.id])
        return
    _python_snippets(index, compiled, hits)


def _fts5_snippets(index: Index, compiled: CompiledQuery, hits: list[Hit]) -> None:
    """FTS5's own ``snippet()`` of each hit's body, in place."""
    defaults = index.defaults
    if hits:
        ids = [hit.id for hit in hits]
        sql = (
            f"SELECT rowid, snippet(search, 1, ?, ?, ?, ?) FROM search WHERE search MATCH ? "
            f"AND rowid IN ({','.join('?' * len(ids))})"
        )
        params = [
            defaults.open_marker,
            defaults.close_marker,
            defaults.ellipsis,
            defaults.snippet_tokens,
            compiled.expression,
            *ids,
        ]
        found = dict(index.db.execute(sql, params).fetchall())
        for position, hit in enumerate(hits):
            hits[position] = hit._replace(snippet=found.get(hit.id, hit.chunk.text))


def _python_snippets(index: Index, compiled: CompiledQuery, hits: list[Hit]) -> None:
    """Snippets made in Python, in place: FTS5-style from tokens (stored offsets, or the strategy's tokens of
    the text), or windows around the highlighted strings, as the builder's defaults say."""
    defaults = index.defaults
    tokenizer = index.tokenizer
    # A native strategy highlights words (a phrase as typed): their tokens are what its mirror's tokens match.
    terms = (
        {term for highlight in compiled.highlight for term in tokenizer.terms(highlight)}
        if tokenizer.native
        else set(compiled.highlight)
    )
    t2s = tokenizer.converts_traditional
    stored: dict[int, list[Token]] = {}
    if defaults.snippet == "fts5" and hits:
        marks = ",".join("?" * len(hits))
        for chunk_id, body, offsets in index.db.execute(
            f"SELECT id, fts_body, offsets FROM chunks WHERE id IN ({marks}) AND offsets IS NOT NULL",
            [h.id for h in hits],
        ):
            stored[chunk_id] = decode_offsets(offsets, body.split(" ") if body else [])
    for position, hit in enumerate(hits):
        if defaults.snippet == "fts5":
            tokens = stored[hit.id] if hit.id in stored else tokenizer.tokenize(hit.chunk.text)
            snippet = token_snippet(
                hit.chunk.text,
                tokens,
                terms,
                open_marker=defaults.open_marker,
                close_marker=defaults.close_marker,
                ellipsis=defaults.ellipsis,
                size=defaults.snippet_tokens,
            )
        else:
            snippet = window_snippet(
                hit.chunk.text,
                compiled.highlight,
                open_marker=defaults.open_marker,
                close_marker=defaults.close_marker,
                ellipsis=defaults.ellipsis,
                window=defaults.window,
                max_highlights=defaults.max_highlights,
                max_len=defaults.max_len,
                t2s=t2s,
            )
        hits[position] = hit._replace(snippet=snippet)


def _explain(index: Index, compiled: CompiledQuery) -> dict[str, Any]:
    def hits(expression: str) -> int:
        return int(index.db.execute("SELECT count(*) FROM search WHERE search MATCH ?", (expression,)).fetchone()[0])

    info: dict[str, Any] = {
        "tokenizer": index.tokenizer.spec,
        "mode": compiled.mode,
        "normalised": compiled.normalised,
        "tokens": list(compiled.terms),
        "dropped": list(compiled.dropped),
        "match": compiled.expression,
        "phrase_filter": compiled.phrase_filter,
        "column_weights": dict(zip(_columns(index), column_weights(index), strict=True)),
    }
    if index.tokenizer.native:
        # FTS5's own tokenizer cuts the query as typed (unicode61 folds case, not full-width forms): the
        # normalised text is not what it read.
        info["normalised"] = None
        info["native"] = "FTS5's own tokenizer reads the query as typed; rag-eval's normalisation is not applied"
    if not compiled.fields:
        info["hits_per_term"] = {term: hits(quote(term)) for term in compiled.terms}
        return info
    info["fields"] = [
        {
            "tokenizer": field.tokenizer.system,
            "weight": field.weight,
            "columns": list(field_columns(number)),
            "tokens": list(terms),
            "hits_per_term": {term: hits(f"{{{' '.join(field_columns(number))}}} : {quote(term)}") for term in terms},
        }
        for number, (field, terms) in enumerate(zip(index.tokenizer.fields, compiled.fields, strict=True))
    ]
    info["note"] = (
        "FTS5 multiplies a column's weight into the term frequency before saturation: "
        "a weight w also acts like k1 / w on that column"
    )
    return info


def _columns(index: Index) -> list[str]:
    return ["fts_title", "text"] if index.tokenizer.native else all_field_columns(len(index.tokenizer.fields))


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
    """Seed 000's agent tool result; the same as :func:`rag_eval.evidence.evidence` (kept for existing callers)."""
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
