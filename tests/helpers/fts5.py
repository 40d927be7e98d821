"""The terms FTS5 itself stores for a text, read back through fts5vocab."""

from __future__ import annotations

import sqlite3


def fts5_terms(clause: str, text: str) -> list[str]:
    """Terms FTS5 stores for ``text`` with tokenize=``clause``, in position order."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute(f'CREATE VIRTUAL TABLE t USING fts5(x, tokenize="{clause}")')
        db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        db.execute("INSERT INTO t(x) VALUES (?)", (text,))
        return [term for (term,) in db.execute("SELECT term FROM v ORDER BY offset")]
    finally:
        db.close()
