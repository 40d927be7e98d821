"""An index's meta table: what it records, read back and checked, so a damaged or tampered file is one
clear error rather than a traceback."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import typing
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..builders import QueryDefaults, get_builder
from ..errors import IndexFileError, RagEvalError, SpecError
from ..files.paths import sqlite_uri
from ..tokenizers import Tokenizer, get_tokenizer
from ..tokenizers.fts5_rules import check_fts5
from .processing import QueryProcessing

SCHEMA_VERSION = 1
#: Tables and meta keys every index has; an index without them (or with values of the wrong shape) is damaged.
REQUIRED_TABLES = frozenset({"meta", "chunks", "files", "search"})
REQUIRED_META = (
    "schema_version",
    "builder",
    "tokenizer",
    "tokenizer_spec",
    "tokenizer_fingerprint",
    "query_defaults",
    "source_root",
)


class RagEvalWarning(UserWarning):
    """Something works but deserves attention (for example library versions drifted since a build)."""


def read_meta(db: sqlite3.Connection) -> dict[str, str]:
    """The meta table as a dict (empty when there is none); values that are not text are skipped."""
    try:
        rows = db.execute("SELECT key, value FROM meta").fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return {}
        raise
    return {row[0]: row[1] for row in rows if isinstance(row[0], str) and isinstance(row[1], str)}


def recorded_meta(
    path: str | Path, also: Callable[[sqlite3.Connection], dict[str, str]] | None = None
) -> dict[str, str]:
    """The meta table of the index file at ``path``, read through a read-only connection (nothing is created
    or written), with what ``also`` reads on the same connection added; empty when it cannot be read."""
    try:
        db = sqlite3.connect(sqlite_uri(Path(path).resolve(), "mode=ro"), uri=True)
    except sqlite3.Error:
        return {}
    try:
        meta = read_meta(db)
        if also is not None:
            meta.update(also(db))
        return meta
    except sqlite3.Error:
        return {}
    finally:
        db.close()


def check_fingerprint(path: str, recorded: dict[str, str], tokenizer: Tokenizer) -> None:
    """Error when a model or dictionary changed; warn when only library versions drifted."""
    current = tokenizer.fingerprint()
    changed = {k for k in set(recorded) | set(current) if recorded.get(k) != current.get(k)}
    hard = sorted(k for k in changed if not tokenizer.is_version_key(k))
    if hard:
        details = "; ".join(f"{k}: built with {recorded.get(k)}, now {current.get(k)}" for k in hard)
        raise IndexFileError(
            f"{path}: the tokenizer changed since this index was built ({details})",
            hint="rebuild it with: rag-eval index build",
        )
    if changed:
        details = ", ".join(f"{k} {recorded.get(k)} -> {current.get(k)}" for k in sorted(changed))
        warnings.warn(
            f"{path}: library versions changed since the build ({details}); rebuild to be sure results match",
            RagEvalWarning,
            stacklevel=3,
        )


def load_meta(
    db: sqlite3.Connection, path: str, *, expected: str | None = None, tokenizer: Tokenizer | None = None
) -> tuple[dict[str, str], Tokenizer]:
    """The index's meta, checked, and its tokenizer (``tokenizer``: an already loaded one with the same spec).

    Missing or malformed meta is an IndexFileError saying the index is damaged, never a traceback;
    ``expected`` (a spec) must name the index's own tokenizer.
    """
    meta = read_meta(db)
    where = path or "database"
    if not meta:
        empty = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] == 0
        raise IndexFileError(
            f"{where}: not a rag-eval index (no meta table"
            + ("; an empty database: a first build into it may have been stopped)" if empty else ")"),
            hint="build it with: rag-eval index build SOURCE -o " + (path or "INDEX"),
        )
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    lost = sorted(REQUIRED_TABLES - tables)
    if lost:
        raise IndexFileError(
            f"{where}: damaged index: table {', '.join(lost)} is missing", hint="rebuild it with: rag-eval index build"
        )
    missing = [key for key in REQUIRED_META if key not in meta]
    if missing:
        raise IndexFileError(
            f"{where}: damaged index: its meta table lacks {', '.join(missing)}",
            hint="rebuild it with: rag-eval index build",
        )
    if meta["schema_version"] != str(SCHEMA_VERSION):
        raise IndexFileError(f"{where}: index schema {meta['schema_version']!r} is not {SCHEMA_VERSION}; rebuild it")
    try:
        recorded = tokenizer if tokenizer is not None else get_tokenizer(meta["tokenizer"])
        get_builder(meta["builder"])
    except SpecError as exc:
        # A spec that no longer loads: a damaged meta table, or a dictionary or model file it names that is gone.
        raise IndexFileError(
            f"{where}: cannot load the tokenizer or builder this index records: {exc}",
            hint="a dictionary or model file the spec names must still be there; else rebuild it with: "
            "rag-eval index build",
        ) from None
    except RagEvalError as exc:
        raise IndexFileError(f"{where}: this index needs {exc}", hint=exc.hint) from None
    if expected is not None and get_tokenizer(expected).system != recorded.system:
        raise IndexFileError(
            f"{where}: this index was built with tokenizer {recorded.system}, not {get_tokenizer(expected).system}",
            hint="search it without naming a tokenizer, or rebuild it with: rag-eval index build -t SPEC",
        )
    check_fts5(recorded.fts5_clause.split()[0])
    fingerprint = _json_meta(where, meta, "tokenizer_fingerprint")
    if not isinstance(fingerprint, dict) or not all(isinstance(v, str) for v in fingerprint.values()):
        raise IndexFileError(f"{where}: damaged index meta: tokenizer_fingerprint is not an object of strings")
    check_fingerprint(where, fingerprint, recorded)
    parse_defaults(where, meta)
    if meta.get("query_processing"):
        try:
            QueryProcessing.parse(meta["query_processing"])
        except SpecError as exc:
            raise IndexFileError(f"{where}: damaged index meta: query_processing: {exc}") from None
    return meta, recorded


def _json_meta(where: str, meta: dict[str, str], key: str) -> Any:
    try:
        return json.loads(meta[key])
    except (ValueError, RecursionError) as exc:
        raise IndexFileError(
            f"{where}: damaged index meta: {key} is not JSON ({exc})", hint="rebuild it with: rag-eval index build"
        ) from None


_DEFAULT_TYPES = typing.get_type_hints(QueryDefaults)


def parse_defaults(where: str, meta: dict[str, str]) -> QueryDefaults:
    """The recorded query defaults, every field checked against QueryDefaults' types."""
    data = _json_meta(where, meta, "query_defaults")
    fields = {f.name for f in dataclasses.fields(QueryDefaults)}
    problem = None
    if not isinstance(data, dict):
        problem = "not an object"
    elif set(data) - fields:
        problem = f"unknown fields {sorted(set(data) - fields)}"
    else:
        for name, value in data.items():
            allowed = typing.get_args(_DEFAULT_TYPES[name]) or (_DEFAULT_TYPES[name],)
            allowed = tuple(type(None) if a is None else a for a in allowed)
            if float in allowed:
                allowed += (int,)
            if isinstance(value, bool) or not isinstance(value, allowed):
                problem = f"{name} is {value!r}"
                break
    if problem is None:
        try:
            return QueryDefaults(**data)
        except TypeError as exc:
            problem = str(exc)
    raise IndexFileError(
        f"{where}: damaged index meta: query_defaults: {problem}", hint="rebuild it with: rag-eval index build"
    )
