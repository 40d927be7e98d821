"""Search an index: compile the query, rank with bm25 (ties by chunk id), filter, snippet."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .builders.lines import iso_date
from .errors import CorpusError, QueryError
from .query import CompiledQuery, compile_query, quote
from .records import Hit
from .snippets import token_snippet, window_snippet
from .store import Index
from .tokenizers import normalise


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
        raise QueryError(f"limit must be an integer from 1 to {maximum}, not {limit!r}")
    return limit


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
) -> SearchResult:
    """Search ``index`` for ``query``.

    Interactive searches follow the limits the builder recorded (query length, number of terms, at
    most ``max_results`` hits). ``deep=True`` is for the evaluation harness: no term limit and any
    ``limit``. Ranking is bm25 with the recorded column weights; ties are broken by chunk id ascending,
    so every consumer sees one strict order. ``as_of`` keeps only current chunks whose expiry date is
    strictly after it.
    """
    defaults = index.defaults
    mode = mode or defaults.mode
    limit = _check_limit(defaults.default_limit if limit is None else limit, 10**9 if deep else defaults.max_results)
    if as_of is not None:
        try:
            iso_date(as_of, "as_of")
        except CorpusError as exc:
            raise QueryError(str(exc)) from None
    started = time.perf_counter()
    compiled = compile_query(
        index.tokenizer, query, mode,
        max_chars=None if deep else defaults.max_query_chars,
        max_terms=None if deep else defaults.max_terms,
    )
    tokenized = time.perf_counter()
    hits: list[Hit] = []
    info: dict[str, Any] = {}
    if compiled.expression is not None:
        hits = _ranked(index, compiled, limit, as_of, category, path_prefix)
        if snippets:
            _add_snippets(index, compiled, hits)
    done = time.perf_counter()
    if explain:
        info = _explain(index, compiled)
    return SearchResult(compiled, hits, tokenized - started, done - tokenized, info)


def _ranked(index: Index, compiled: CompiledQuery, limit: int, as_of: str | None, category: str | None,
            path_prefix: str | None) -> list[Hit]:
    defaults = index.defaults
    where = ["search MATCH ?"]
    params: list[Any] = [compiled.expression]
    join = ""
    if as_of is not None or category is not None or path_prefix is not None:
        join = " JOIN chunks c ON c.id = search.rowid"
        if as_of is not None:
            where.append("c.status = 'current' AND (c.expires IS NULL OR c.expires > ?)")
            params.append(as_of)
        if category is not None:
            where.append("c.category = ?")
            params.append(category)
        if path_prefix is not None:
            where.append("substr(c.path, 1, ?) = ?")
            params += [len(path_prefix), path_prefix]
    sql = (f"SELECT search.rowid AS id, bm25(search, {defaults.title_weight!r}, {defaults.body_weight!r}) AS score "
           f"FROM search{join} WHERE {' AND '.join(where)} ORDER BY score, search.rowid")
    if compiled.phrase_filter is None:
        sql += " LIMIT ?"
        params.append(limit)
    ranked: list[tuple[int, float]] = []
    cursor = index.db.execute(sql, params)
    if compiled.phrase_filter is None:
        ranked = [(row[0], row[1]) for row in cursor]
        rows = _chunk_rows(index, [i for i, _ in ranked])
    else:
        rows = {}
        t2s = bool(index.tokenizer.options.get("t2s"))
        needle = "".join(compiled.phrase_filter.split())
        for chunk_id, score in cursor:
            row = _chunk_rows(index, [chunk_id])[chunk_id]
            if any(needle in "".join(normalise(row[column], t2s=t2s).split()) for column in ("text", "title")):
                ranked.append((chunk_id, score))
                rows[chunk_id] = row
                if len(ranked) == limit:
                    break
        cursor.close()
    return [Hit(chunk_id, rank, score, "", index.chunk(rows[chunk_id])) for rank, (chunk_id, score) in enumerate(ranked, 1)]


def _chunk_rows(index: Index, ids: list[int]) -> dict[int, Any]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return {row["id"]: row for row in index.db.execute(f"SELECT * FROM chunks WHERE id IN ({marks})", ids)}


def _add_snippets(index: Index, compiled: CompiledQuery, hits: list[Hit]) -> None:
    defaults = index.defaults
    tokenizer = index.tokenizer
    if defaults.snippet == "fts5" and tokenizer.native and compiled.expression is not None and hits:
        ids = [hit.id for hit in hits]
        sql = (f"SELECT rowid, snippet(search, 1, ?, ?, ?, ?) FROM search WHERE search MATCH ? "
               f"AND rowid IN ({','.join('?' * len(ids))})")
        params = [defaults.open_marker, defaults.close_marker, defaults.ellipsis, defaults.snippet_tokens,
                  compiled.expression, *ids]
        found = dict(index.db.execute(sql, params).fetchall())
        for position, hit in enumerate(hits):
            hits[position] = Hit(hit.id, hit.rank, hit.score, found.get(hit.id, hit.chunk.text), hit.chunk)
        return
    terms = set(compiled.highlight)
    t2s = bool(tokenizer.options.get("t2s"))
    for position, hit in enumerate(hits):
        if defaults.snippet == "fts5":
            snippet = token_snippet(hit.chunk.text, tokenizer.tokenize(hit.chunk.text), terms,
                                    open_marker=defaults.open_marker, close_marker=defaults.close_marker,
                                    ellipsis=defaults.ellipsis, size=defaults.snippet_tokens)
        else:
            snippet = window_snippet(hit.chunk.text, compiled.highlight, open_marker=defaults.open_marker,
                                     close_marker=defaults.close_marker, ellipsis=defaults.ellipsis,
                                     window=defaults.window, max_highlights=defaults.max_highlights,
                                     max_len=defaults.max_len, t2s=t2s)
        hits[position] = Hit(hit.id, hit.rank, hit.score, snippet, hit.chunk)


def _explain(index: Index, compiled: CompiledQuery) -> dict[str, Any]:
    per_term = {}
    for term in compiled.terms:
        per_term[term] = index.db.execute("SELECT count(*) FROM search WHERE search MATCH ?", (quote(term),)).fetchone()[0]
    return {
        "tokenizer": index.tokenizer.spec,
        "mode": compiled.mode,
        "normalised": compiled.normalised,
        "tokens": list(compiled.terms),
        "dropped": list(compiled.dropped),
        "match": compiled.expression,
        "phrase_filter": compiled.phrase_filter,
        "hits_per_term": per_term,
    }


def search_tool(index: Index, query: str, *, as_of: str, limit: int | None = None) -> dict[str, Any]:
    """Seed 000's agent tool result: evidence with full provenance, never an answer or authority.

    ``as_of`` is a host policy value (configuration or an option), not a date taken from the query.
    """
    result = search(index, query, as_of=as_of, limit=limit)
    return {
        "kind": "document_evidence",
        "query": query,
        "as_of": as_of,
        "index": {"tokenizer": index.tokenizer.spec, "builder": index.meta["builder"]},
        "hits": [hit.as_dict() for hit in result.hits],
        "action_authority": False,
    }
