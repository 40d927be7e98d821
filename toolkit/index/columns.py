"""Where each field's tokens live: the token columns of the chunks table and of the FTS5 table."""

from __future__ import annotations


def field_columns(number: int) -> tuple[str, str]:
    """The (title, body) token columns of field ``number``; field 0 keeps the names a one-field index has
    always had, so indexes built before hybrids existed read unchanged."""
    return ("fts_title", "fts_body") if number == 0 else (f"fts_title_{number}", f"fts_body_{number}")


def all_field_columns(fields: int) -> list[str]:
    """Every token column of ``fields`` fields, title then body, field by field (the FTS5 column order)."""
    return [column for number in range(fields) for column in field_columns(number)]
