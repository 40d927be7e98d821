"""A search's hits' snippets: FTS5's own ``snippet()``, or made in Python from tokens or around highlights."""

from __future__ import annotations

from ..index.offsets import decode as decode_offsets
from ..index.store import Index
from ..records import Hit
from ..tokenizers import Token
from .query import CompiledQuery
from .snippets import token_snippet, window_snippet

#: A native strategy's hit longer than this many characters gets its snippet made in Python from the strategy's
#: mirror tokens (:func:`token_snippet`, linear) instead of FTS5's ``snippet()``, whose time grows with the square
#: of the matches in the row: 0.58 s against 0.07 s for a 64,000-character line and three terms, and 2 min 14 s
#: for a 7-term query on a 0.96 MB line (2026-12-02). Below it FTS5's is as fast or faster, and it is FTS5's own.
FTS5_SNIPPET_CHARS = 10_000


def add_snippets(index: Index, compiled: CompiledQuery, hits: list[Hit]) -> None:
    """Give each hit its snippet, in place: FTS5's own for a native strategy's short hits, else made in Python."""
    tokenizer = index.tokenizer
    if index.defaults.style.tokens and tokenizer.native and not tokenizer.overlapping_tokens and hits:
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
    style = defaults.style
    stored: dict[int, list[Token]] = {}
    if style.offsets and hits:
        marks = ",".join("?" * len(hits))
        for chunk_id, body, offsets in index.db.execute(
            f"SELECT id, fts_body, offsets FROM chunks WHERE id IN ({marks}) AND offsets IS NOT NULL",
            [h.id for h in hits],
        ):
            stored[chunk_id] = decode_offsets(offsets, body.split(" ") if body else [])
    for position, hit in enumerate(hits):
        if style.tokens:
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
