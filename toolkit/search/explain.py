"""What a search with ``explain=True`` reports: tokens, the MATCH expression, column weights, hits per term."""

from __future__ import annotations

from typing import Any

from ..index.columns import all_field_columns, column_weights, field_columns
from ..index.store import Index
from .query import CompiledQuery, quote


def explanation(index: Index, compiled: CompiledQuery) -> dict[str, Any]:
    """What ``search(..., explain=True)`` reports of how ``index`` read ``compiled``."""

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
    if compiled.weighted is not None:
        info["feedback"] = _feedback(index, compiled)
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


def _feedback(index: Index, compiled: CompiledQuery) -> dict[str, Any]:
    """Pseudo-relevance feedback's expansion: the method, the feedback chunks' keys and each term's weight (per
    field for a hybrid)."""
    weighted = compiled.weighted
    assert weighted is not None
    keys = [
        index.db.execute("SELECT key FROM chunks WHERE id = ?", (chunk_id,)).fetchone()[0]
        for chunk_id in weighted.documents
    ]
    groups = compiled.fields or (compiled.terms,)
    weights = [dict(zip(terms, values, strict=True)) for terms, values in zip(groups, weighted.weights, strict=True)]
    return {"method": weighted.method, "documents": keys, "weights": weights if compiled.fields else weights[0]}


def _columns(index: Index) -> list[str]:
    return ["fts_title", "text"] if index.tokenizer.native else all_field_columns(len(index.tokenizer.fields))
