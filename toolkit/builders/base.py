"""The builder contract: validate and read sources once, then turn each file into chunks."""

from __future__ import annotations

import errno
import functools
import hashlib
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..errors import CorpusError, MissingSourceError, RagEvalError
from ..files.paths import path_under, printable_path
from ..files.textio import control_character, decode_utf8, display_name, file_kind, read_bytes
from ..records import Chunk
from ..registry import PluginError, plugin_failure
from ..spec import Configurable, real, whole

#: Why a source text may not hold a NUL character: FTS5 ends a text there in places (its trigram tokenizer
#: indexes nothing after it; snippet() and highlight() drop what follows it up to the next token), so the
#: index would silently hold and quote less than the source says.
NUL_REASON = "FTS5 ends text at NUL: what follows would not be searched or quoted"


def refuse_nul(text: str, where: str) -> str:
    """``text`` unchanged, or CorpusError naming ``where`` and the line of its first NUL character."""
    at = text.find("\x00")
    if at != -1:
        raise CorpusError(f"{where}: a NUL character at line {text.count(chr(10), 0, at) + 1} ({NUL_REASON})")
    return text


@dataclass(frozen=True)
class SourceFile:
    """A source file read once: its path relative to the root, the bytes indexed and their sha256."""

    path: str
    data: bytes
    sha256: str
    meta: Any = None

    @classmethod
    def read(cls, root: Path, relative: str, *, max_bytes: int, meta: Any = None) -> SourceFile:
        """Read ``root/relative`` after checking it stays under ``root`` and is a regular file not too large."""
        path = locate(root, relative, max_bytes=max_bytes)
        # Checked again on the open descriptor: the file may have been replaced (by a FIFO, a bigger file)
        # since it was located.
        data = read_bytes(path, CorpusError, max_bytes=max_bytes, label=relative)
        return cls(relative, data, hashlib.sha256(data).hexdigest(), meta)

    @property
    def size(self) -> int:
        """Bytes in the file (what a build's progress counts)."""
        return len(self.data)

    def text(self) -> str:
        """The bytes as UTF-8 with one leading BOM removed (the sha256 stays over the bytes); CorpusError otherwise,
        and for a NUL character (see :data:`NUL_REASON`)."""
        return refuse_nul(decode_utf8(self.data, self.path, CorpusError), display_name(self.path))


@dataclass(frozen=True)
class FileRef:
    """A source file that passed validation but has not been read: its relative path and metadata."""

    path: str
    meta: Any = None


def locate(root: Path, relative: str, *, max_bytes: int) -> Path:
    """The file behind ``relative``: a printable UTF-8 name, inside ``root``, a regular file, at most ``max_bytes``.

    Every builder calls this for every source file while planning, before an index is touched.
    """
    printable_path(relative, CorpusError)
    path = resolve_inside(root, relative)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise MissingSourceError(f"{relative}: file not found under {root}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CorpusError(f"{relative}: is a symbolic link loop") from None
        raise CorpusError(f"{relative}: cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise CorpusError(f"{relative}: {file_kind(info.st_mode)}, not a regular file")
    if info.st_size > max_bytes:
        raise CorpusError(f"{relative}: {info.st_size} bytes is over the limit of {max_bytes} (option max_bytes)")
    return path


def resolve_inside(root: Path, relative: str) -> Path:
    """``root/relative`` resolved (symlinks followed); CorpusError for anything outside root."""
    return path_under(root, relative, CorpusError)


#: ``max_bytes`` of a builder that reads each file whole: reading allocates the limit up front, so a limit
#: past memory fails (MemoryError) even on a small file; no Markdown or text source comes near 1 GB.
WHOLE_FILE_BYTES = whole(1, 1_000_000_000)
#: ``title_weight``: FTS5's bm25 weight of the title column (the body's is 1), multiplied into the title's term
#: frequencies (and by a hybrid field's weight). At 0 or below a title-only match scores 0 or less; a weight
#: near 0 times a small field weight underflows to 0 (``bigram^1e-300`` with 1e-300: "damaged index").
TITLE_WEIGHT = real(
    0.001,
    1000,
    why="at 0 or less, or near 0, a title-only match scores 0 or below, which bm25 and the impact engine cannot rank",
)


@dataclass(frozen=True)
class SnippetStyle:
    """How an index's hits get their snippets: the style a builder names in :attr:`QueryDefaults.snippet`."""

    name: str
    #: Token windows with markers, as FTS5's ``snippet()`` makes them (FTS5's own for a native strategy's short
    #: hits, else from the hit's tokens); False: density windows around the highlights in the raw text.
    tokens: bool
    #: A one-field Python strategy's build stores each chunk's token offsets, so snippets re-tokenize nothing.
    offsets: bool


_WINDOW = SnippetStyle("window", tokens=False, offsets=False)
#: Every snippet style, by the name :class:`QueryDefaults` records; an index naming another gets windows.
SNIPPET_STYLES = {style.name: style for style in (SnippetStyle("fts5", tokens=True, offsets=True), _WINDOW)}


@dataclass(frozen=True)
class QueryDefaults:
    """How an index answers interactive queries; recorded in the index by its builder."""

    mode: str
    #: The snippet style's name (:data:`SNIPPET_STYLES`): ``fts5`` token windows or ``window`` density windows.
    snippet: str
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

    @property
    def style(self) -> SnippetStyle:
        """The snippet style :attr:`snippet` names."""
        return SNIPPET_STYLES.get(self.snippet, _WINDOW)


class Builder(Configurable):
    """Base of every index builder: ``plan`` validates, ``read`` reads a file once, ``chunks`` splits it.

    What the rest of rag-eval does with a builder's chunks comes from what it declares here (how its
    chunks are listed, what unit qrels judge them as), never from its name.
    """

    summary: ClassVar[str] = ""
    #: Whether the title column is indexed (sections and passages) or only stored (lines).
    index_title: ClassVar[bool] = True
    #: What ``index list`` lists: ``"chunk"`` (one row per chunk) or ``"document"`` (one row per ``doc``,
    #: with its revision, status, expiry and line count).
    list_by: ClassVar[str] = "chunk"
    #: Where this builder comes when several recognise a source (lower first: the most specific layout).
    recognise_order: ClassVar[int] = 100
    #: The layout ``recognises`` accepts, in words, for the error when no builder recognises a source
    #: (``a lines manifest.json``); empty for a builder that must be named with ``-b``.
    recognised_layout: ClassVar[str] = ""
    #: How a chunk's text is written: ``"markdown"`` (the judging page renders it, its source one click away)
    #: or ``"text"`` (shown as it is).
    text_markup: ClassVar[str] = "text"
    #: What a judged unit is, in words (compare's and judge's passages): ``"whole Markdown sections"``. Shown beside
    #: their counts, as :meth:`chunk_words` beside an index's chunk count, so the two counts explain each other.
    unit_words: ClassVar[str] = "one per chunk"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass's own ``_plan``, ``chunks`` and ``query_defaults`` are guarded: an exception of its code
        becomes one error line naming the builder (inside a build, whose transaction then rolls back), and
        what they return is checked against the contract before an index is made of it."""
        super().__init_subclass__(**kwargs)
        for method, check in (("_plan", None), ("chunks", _checked_chunks), ("query_defaults", _checked_defaults)):
            if method in cls.__dict__ and not getattr(cls.__dict__[method], "_guarded", False):
                setattr(cls, method, _guarded(cls.__dict__[method], method, check))

    @classmethod
    def recognises(cls, source: Path) -> bool:
        """Whether ``source`` looks like this builder's layout (for commands that infer the builder)."""
        return False

    def chunk_words(self) -> str:
        """What one chunk of this builder's index is, in words, with its options (``index build`` names it)."""
        return self.unit_words

    def unit(self, key: str) -> str:
        """The unit qrels judge a chunk as (a split section's parts count as the section); by default the key."""
        return key

    def units(self, file: SourceFile) -> list[tuple[str, str, str]]:
        """The judged units of one file as ``(key, title, text)`` (a dataset's passages); by default its chunks."""
        return [(chunk.key, chunk.title, chunk.text) for chunk in self.chunks(file)]

    def plan(self, source: Path) -> tuple[Path, list[FileRef]]:
        """Validate the source without reading file contents: the root and the files to read, in order.

        Everything that can be checked from names, the manifest and file sizes is checked here, before an
        index is touched; what needs the bytes (UTF-8, parsing) fails later inside the build's transaction,
        which then rolls back.
        """
        if not source.exists():
            raise MissingSourceError(f"{source}: no such file or directory")
        return self._plan(source)

    def _plan(self, source: Path) -> tuple[Path, list[FileRef]]:
        raise NotImplementedError

    def read(self, root: Path, ref: FileRef) -> SourceFile:
        """Read one planned file, once: the bytes that are hashed are the bytes that are indexed."""
        file = SourceFile.read(root, ref.path, max_bytes=self.options["max_bytes"], meta=ref.meta)
        file.text()  # UTF-8 errors name the file
        return file

    def scan(self, source: Path) -> list[SourceFile]:
        """Plan and read every file (for callers that want the whole source in memory)."""
        root, refs = self.plan(source)
        return [self.read(root, ref) for ref in refs]

    def chunks(self, file: SourceFile) -> Iterable[Chunk]:
        """The chunks of one scanned file, in document order (a builder may stream them from disk)."""
        raise NotImplementedError

    def source_root(self, source: Path) -> Path:
        """The folder that ``read`` and ``verify`` resolve paths against."""
        return source.resolve() if source.is_dir() else source.resolve().parent

    def query_defaults(self) -> QueryDefaults:
        """Interactive search defaults for indexes this builder makes."""
        raise NotImplementedError


def _guarded(function: Callable[..., Any], method: str, check: Callable[..., Any] | None) -> Callable[..., Any]:
    """``function`` (a builder's own method) with its failures as PluginError and its result checked."""

    @functools.wraps(function)
    def guarded(self: Builder, *args: Any) -> Any:
        doing = f"in {method}" + (f" on {args[0].path}" if args and isinstance(args[0], SourceFile) else "")
        try:
            result = function(self, *args)
        except RagEvalError:
            raise
        except Exception as exc:  # the builder's own code: one line naming it
            raise plugin_failure("builder", self.name, doing, exc) from exc
        return result if check is None else check(self, doing, result)

    guarded._guarded = True  # type: ignore[attr-defined]
    return guarded


def _checked_chunks(builder: Builder, doing: str, chunks: Iterable[Chunk]) -> Iterator[Chunk]:
    """Each chunk as it comes (a builder may stream them), checked: a Chunk with a non-empty str key without
    control characters, and str text, title, path and doc."""
    iterator = iter(chunks)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            return
        except RagEvalError:
            raise
        except Exception as exc:  # a streaming builder's own code
            raise plugin_failure("builder", builder.name, doing, exc) from exc
        problem = _chunk_problem(chunk)
        if problem is not None:
            raise PluginError(f"builder {builder.name!r} broke the builder contract {doing}: {problem}")
        yield chunk


def _chunk_problem(chunk: Any) -> str | None:
    if not isinstance(chunk, Chunk):
        return f"it gave {chunk!r:.80}, not a rag_eval.records.Chunk"
    if not isinstance(chunk.key, str) or not chunk.key or control_character(chunk.key) is not None:
        # a key is one line of search output and one column of run files and qrels
        return f"the chunk key {chunk.key!r:.80} is not a non-empty str without control characters"
    for field in ("text", "title", "path", "doc"):
        if not isinstance(getattr(chunk, field), str):
            return f"chunk {chunk.key!r}: {field} is {getattr(chunk, field)!r:.80}, not a str"
    return None


def _checked_defaults(builder: Builder, doing: str, defaults: Any) -> QueryDefaults:
    if not isinstance(defaults, QueryDefaults):
        raise PluginError(
            f"builder {builder.name!r} broke the builder contract {doing}: it gave {defaults!r:.80}, "
            "not a rag_eval.builders.QueryDefaults"
        )
    return defaults
