"""FTS5's own tokenizer rules, read off the SQLite library this process links.

Which characters ``unicode61`` keeps in tokens and how it folds them depends on the Unicode tables
compiled into SQLite (3.40 treats unassigned code points as token characters, for example), so rather
than re-implementing those tables from Python's ``unicodedata`` and drifting, rag-eval asks SQLite once:
it indexes every code point in a scratch FTS5 table and reads the terms back through ``fts5vocab``. The
result is cached per SQLite version and option in rag-eval's cache dir (about 2 s to derive, then a few
milliseconds to load).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..cache import cache_dir
from ..errors import UnavailableError
from .normalise import char_class

_FORMAT = 2
_BATCH = 65536
_PROBE = "a"


def _code_points() -> list[int]:
    """Every scalar value but NUL, which FTS5 tokenizers treat specially."""
    return [code for code in range(1, 0x110000) if not 0xD800 <= code < 0xE000]


def check_fts5(tokenizer: str = "unicode61") -> None:
    """Raise UnavailableError when this SQLite lacks FTS5 or the given tokenizer."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute(f"CREATE VIRTUAL TABLE probe USING fts5(x, tokenize='{tokenizer}')")
    except sqlite3.OperationalError as exc:
        raise UnavailableError(
            f"SQLite {sqlite3.sqlite_version} cannot create an FTS5 table with tokenize='{tokenizer}': {exc}",
            hint="use a Python whose sqlite3 is built with FTS5 (SQLite >= 3.34 for trigram)",
        ) from None
    finally:
        db.close()


@dataclass(frozen=True)
class Unicode61Rules:
    """Tokens (a start character, then token characters) and per-character folding of ``unicode61``."""

    token_chars: re.Pattern[str]
    fold: dict[int, int | None]


@dataclass(frozen=True)
class TrigramRules:
    """Per-character folding of FTS5 ``trigram``."""

    fold: dict[int, int]


def _cache_file(kind: str) -> Path:
    return cache_dir() / "fts5" / f"{kind}-sqlite{sqlite3.sqlite_version}-v{_FORMAT}.json"


def _load_or_derive(kind: str, derive: Callable[[], dict]) -> dict:
    path = _cache_file(kind)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    data = derive()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the derivation next time
    return data


def _vocab_terms(clause: str, rows: list[str]) -> list[str]:
    """Terms FTS5 stores for ``rows``, in document then position order."""
    check_fts5(clause.split()[0])
    db = sqlite3.connect(":memory:")
    try:
        db.execute(f'CREATE VIRTUAL TABLE t USING fts5(x, tokenize="{clause}")')
        db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", enumerate(rows, start=1))
        return [term for (term,) in db.execute("SELECT term FROM v ORDER BY doc, offset")]
    finally:
        db.close()


def _derive_unicode61(remove_diacritics: int) -> dict:
    codes = _code_points()
    # Each code point sits between two probe letters: a token character yields one term "a?a",
    # a separator yields the two terms "a" and "a".
    rows = [" ".join(_PROBE + chr(c) + _PROBE for c in codes[i : i + _BATCH]) for i in range(0, len(codes), _BATCH)]
    terms = iter(_vocab_terms(f"unicode61 remove_diacritics {remove_diacritics}", rows))
    token_codes: list[int] = []
    fold: dict[str, int | None] = {}
    for code in codes:
        term = next(terms)
        if term == _PROBE:
            next(terms)
            continue
        token_codes.append(code)
        folded = term[1:-1]
        if folded != chr(code):
            fold[str(code)] = ord(folded) if folded else None
    # A token starts only with a letter, digit or private-use character; diacritics merely continue
    # one. Probe "?a": a character that can start a token yields one term other than "a".
    rows = [" ".join(chr(c) + _PROBE for c in token_codes[i : i + _BATCH]) for i in range(0, len(token_codes), _BATCH)]
    starts = [
        code
        for code, term in zip(
            token_codes, _vocab_terms(f"unicode61 remove_diacritics {remove_diacritics}", rows), strict=False
        )
        if term != _PROBE
    ]
    return {"token_class": char_class(token_codes), "start_class": char_class(starts), "fold": fold}


def _derive_trigram(case_sensitive: int) -> dict:
    codes = _code_points()
    text = "".join(map(chr, codes)) + "zz"
    # Trigram i starts with the folded character i, so one long row reveals every fold.
    terms = _vocab_terms(f"trigram case_sensitive {case_sensitive}", [text])
    if len(terms) != len(codes):  # pragma: no cover - would mean trigram skips characters
        raise RuntimeError(f"trigram probe returned {len(terms)} terms for {len(codes)} characters")
    fold = {str(code): ord(term[0]) for code, term in zip(codes, terms, strict=False) if term[0] != chr(code)}
    return {"fold": fold}


@cache
def unicode61_rules(remove_diacritics: int) -> Unicode61Rules:
    """The rules of ``unicode61 remove_diacritics N`` in this SQLite."""
    data = _load_or_derive(f"unicode61-rd{remove_diacritics}", lambda: _derive_unicode61(remove_diacritics))
    # stdlib re: it tests these large classes in O(1) per BMP character, regex does not.
    pattern = re.compile("[" + data["start_class"] + "][" + data["token_class"] + "]*")
    return Unicode61Rules(pattern, {int(k): v for k, v in data["fold"].items()})


@cache
def trigram_rules(case_sensitive: int) -> TrigramRules:
    """The rules of ``trigram case_sensitive N`` in this SQLite."""
    data = _load_or_derive(f"trigram-cs{case_sensitive}", lambda: _derive_trigram(case_sensitive))
    return TrigramRules({int(k): v for k, v in data["fold"].items()})
