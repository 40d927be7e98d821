"""Where each field's tokens live: the token columns of the chunks table and of the FTS5 table, and bm25's weight
for each of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..builders import QueryDefaults
    from ..tokenizers import Tokenizer
    from .store import Index


def field_columns(number: int) -> tuple[str, str]:
    """The (title, body) token columns of field ``number``; field 0 keeps the names a one-field index has
    always had, so indexes built before hybrids existed read unchanged."""
    return ("fts_title", "fts_body") if number == 0 else (f"fts_title_{number}", f"fts_body_{number}")


def all_field_columns(fields: int) -> list[str]:
    """Every token column of ``fields`` fields, title then body, field by field (the FTS5 column order)."""
    return [column for number in range(fields) for column in field_columns(number)]


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
