"""The builder contract: validate and read sources once, then turn each file into chunks."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..errors import CorpusError, MissingSourceError
from ..records import Chunk
from ..spec import OptionSet, SystemSpec, format_value


@dataclass(frozen=True)
class SourceFile:
    """A source file read once: its path relative to the root, the bytes indexed and their sha256."""

    path: str
    data: bytes
    sha256: str
    meta: Any = None

    @classmethod
    def read(cls, root: Path, relative: str, *, max_bytes: int, meta: Any = None) -> "SourceFile":
        """Read ``root/relative`` after checking it stays under ``root`` and is not too large."""
        path = resolve_inside(root, relative)
        try:
            size = path.stat().st_size
            if size > max_bytes:
                raise CorpusError(f"{relative}: {size} bytes is over the limit of {max_bytes} (option max_bytes)")
            data = path.read_bytes()
        except FileNotFoundError:
            raise MissingSourceError(f"{relative}: file not found under {root}") from None
        except IsADirectoryError:
            raise CorpusError(f"{relative}: is a directory, not a file") from None
        except OSError as exc:
            raise CorpusError(f"{relative}: cannot read: {exc.strerror}") from None
        return cls(relative, data, hashlib.sha256(data).hexdigest(), meta)

    def text(self) -> str:
        """The bytes as UTF-8; anything else is a CorpusError naming the file."""
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{self.path}: not valid UTF-8 at byte {exc.start}") from None


def resolve_inside(root: Path, relative: str) -> Path:
    """``root/relative`` resolved (symlinks followed); refuses absolute paths and anything outside root."""
    if not relative or "\x00" in relative:
        raise CorpusError(f"{relative!r}: invalid path")
    if Path(relative).is_absolute() or "\\" in relative:
        raise CorpusError(f"{relative}: relative paths with / separators only")
    root = root.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise CorpusError(f"{relative}: resolves outside the corpus root {root}")
    return path


@dataclass(frozen=True)
class QueryDefaults:
    """How an index answers interactive queries; recorded in the index by its builder."""

    mode: str
    snippet: str  # "fts5": token window with markers; "window": density window on the raw text
    open_marker: str
    close_marker: str
    ellipsis: str
    snippet_tokens: int = 18
    window: int = 150
    max_highlights: int = 5
    max_len: int = 300
    max_query_chars: int = 200
    max_terms: int | None = None
    max_results: int = 20
    default_limit: int = 10
    title_weight: float = 1.0
    body_weight: float = 1.0


class Builder:
    """Base of every index builder: ``scan`` validates and reads, ``chunks`` splits one file."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    option_set: ClassVar[OptionSet] = OptionSet()
    #: Whether the title column is indexed (sections and passages) or only stored (lines).
    index_title: ClassVar[bool] = True

    def __init__(self, **options: Any) -> None:
        given = {key: value if isinstance(value, str) else format_value(value) for key, value in options.items()}
        self.options: dict[str, Any] = self.option_set.resolve(self.name, given)

    @classmethod
    def from_spec(cls, spec: SystemSpec) -> "Builder":
        """Instantiate from a parsed spec with this class's name."""
        return cls(**dict(spec.options))

    @property
    def system(self) -> str:
        """Canonical ``NAME:key=value,...`` with every option that has a value."""
        parts = [f"{k}={format_value(v)}" for k, v in sorted(self.options.items()) if format_value(v)]
        return self.name + (":" + ",".join(parts) if parts else "")

    def scan(self, source: Path) -> list[SourceFile]:
        """Validate the whole source and read every file once; raise CorpusError before anything is written."""
        if not source.exists():
            raise MissingSourceError(f"{source}: no such file or directory")
        return self._scan(source)

    def _scan(self, source: Path) -> list[SourceFile]:
        raise NotImplementedError

    def chunks(self, file: SourceFile) -> list[Chunk]:
        """The chunks of one scanned file, in document order."""
        raise NotImplementedError

    def source_root(self, source: Path) -> Path:
        """The folder that ``read`` and ``verify`` resolve paths against."""
        return source.resolve() if source.is_dir() else source.resolve().parent

    def query_defaults(self) -> QueryDefaults:
        """Interactive search defaults for indexes this builder makes."""
        raise NotImplementedError
