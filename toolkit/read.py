"""Reading sections and files back, and verifying line evidence against the sources."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .builders.lines import split_lines
from .errors import ReadError
from .paths import path_under
from .store import Index


def safe_path(root: Path, path: str) -> Path:
    """``root/path`` if it stays under ``root``: no ``..`` at all, no symlink out; ReadError otherwise."""
    return path_under(root, path, ReadError, refuse_dotdot=True)


def read(index: Index, target: str, *, root: str | Path | None = None) -> str:
    """``path#anchor``: the stored section (no file access). ``path``: the whole file under the root."""
    path, _, anchor = target.partition("#")
    if anchor:
        row = index.db.execute("SELECT text FROM chunks WHERE path = ? AND anchor = ?", (path, anchor)).fetchone()
        if row is None:
            known = [r[0] for r in index.db.execute("SELECT anchor FROM chunks WHERE path = ? ORDER BY id LIMIT 8", (path,))]
            hint = f"anchors in {path}: {', '.join(known)}" if known else "list sections with: rag-eval index list INDEX"
            raise ReadError(f"no section {target!r} in this index", hint=hint)
        return str(row[0])
    candidate = safe_path(Path(root) if root is not None else index.source_root, path)
    try:
        return candidate.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReadError(f"no file {path!r} under the corpus root") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReadError(f"cannot read {path!r}: {exc}") from None


def verify_source(root: str | Path, hit: Mapping[str, Any]) -> bool:
    """True when the file behind a line hit still has the same sha256 and that line still reads the same.

    Never raises: a missing file, an escape from the root or undecodable bytes are all False.
    """
    try:
        path = safe_path(Path(root), str(hit["path"]))
        raw = path.read_bytes()
        lines = split_lines(raw.decode("utf-8"))
        line = hit["line"]
        return (hashlib.sha256(raw).hexdigest() == hit["sha256"] and type(line) is int
                and 1 <= line <= len(lines) and lines[line - 1] == hit["text"])
    except (OSError, UnicodeError, KeyError, TypeError, ValueError):
        return False


@dataclass(frozen=True)
class SourceStatus:
    """One source id's state against the files on disk."""

    key: str
    path: str
    status: str  # ok | stale | missing


def verify_index(index: Index, root: str | Path | None = None) -> list[SourceStatus]:
    """Check every chunk's file against the sources: ok, stale (the file changed) or missing."""
    base = Path(root) if root is not None else index.source_root
    digests: dict[str, str | None] = {}
    statuses = []
    for row in index.db.execute("SELECT key, path, sha256, line, text FROM chunks ORDER BY id"):
        path = row["path"]
        if path not in digests:
            try:
                digests[path] = hashlib.sha256(safe_path(base, path).read_bytes()).hexdigest()
            except (OSError, ReadError):
                digests[path] = None
        digest = digests[path]
        if digest is None:
            state = "missing"
        elif digest != row["sha256"]:
            state = "stale"
        elif row["line"] is not None and not verify_source(base, dict(row)):
            state = "stale"
        else:
            state = "ok"
        statuses.append(SourceStatus(row["key"], path, state))
    return statuses


def list_entries(index: Index, *, category: str | None = None) -> list[dict[str, Any]]:
    """Documents (lines indexes) or sections (other builders), in index order, optionally one category."""
    where, params = ("WHERE category = ?", [category]) if category is not None else ("", [])
    if index.builder.name == "lines":
        sql = (f"SELECT doc, revision, status, expires, path, category, title, count(*) AS lines, min(id) AS first "
               f"FROM chunks {where} GROUP BY doc ORDER BY first")
        return [{k: row[k] for k in row.keys() if k != "first"} for row in index.db.execute(sql, params)]
    sql = f"SELECT path, anchor, title, heading_path, category, length(text) AS chars FROM chunks {where} ORDER BY id"
    return [dict(row) for row in index.db.execute(sql, params)]
