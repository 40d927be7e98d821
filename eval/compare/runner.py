"""Run a dataset's queries against one system (tokenizer + builder + query mode) and time everything."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import __version__
from ...builders import Builder, get_builder
from ...builders.base import resolve_inside
from ...cache import CACHE_ENV, cache_dir
from ...engines import impact
from ...engines.base import DEFAULT_ENGINE, REFERENCE_ENGINE
from ...errors import CorpusError, IndexFileError, RagEvalError
from ...files.outputs import write_text_atomic
from ...files.textio import open_regular, read_json
from ...index.locks import hold_in_use, key_lock, remove_database, unused
from ...index.meta import recorded_meta
from ...index.store import SCHEMA_VERSION
from ...index.writer import BuildReport, build, corpus_checksum
from ...records import Progress, RankedDoc
from ...tokenizers import Tokenizer
from ..datasets.formats import dataset_builder
from ..datasets.records import Dataset

WARMUP = 5
#: Version of the cache key's recipe: a change here must never reuse an index keyed the old way.
CACHE_FORMAT = 2
#: Questions between moves of the harness's own records out of the garbage collector's view (``gc.freeze``).
#: A compare run holds every ranked document it wrote (4,218 questions x 100 per system on CMRC sentences);
#: left tracked, the collector's full passes over them grew with the run and landed inside whichever question
#: triggered one: every ~870 questions, 60 to 180 ms for the first system, up to 1.1 s for the twelfth. Frozen,
#: they are not traversed; what a query itself leaves is collected as before.
FREEZE_EVERY = 200
#: Largest cached build report read back (a few hundred bytes in practice).
MAX_BUILD_REPORT_BYTES = 1_000_000
#: Builds of one cached index a command tries when ``cache clear`` removes it each time as the build ends.
BUILD_ATTEMPTS = 3
#: How long a command waits (times the attempt) for another one to write the build report of an index it just built.
REPORT_WAIT_SECONDS = 0.2


@dataclass(frozen=True)
class System:
    """What is compared: a tokenizer spec, a builder spec, a query mode and the engine that ranks."""

    tokenizer: str
    builder: str
    mode: str
    #: Query processing (``stopwords=zh,max_df=0.3``, see rag_eval.index.processing); empty for none.
    query: str = ""
    #: Engine spec (``fts5``, ``impact``, ``bm25s:method=robertson``; see :mod:`.engines`); empty for the default.
    engine: str = DEFAULT_ENGINE

    @property
    def name(self) -> str:
        """A readable, unique label, e.g. ``jieba:mode=precise | sections | or`` (``| QUERY`` when processed,
        ``| engine=SPEC`` for an engine other than the default; an exact engine's quality is the same, so the
        names baselines know keep their figures)."""
        return (
            f"{self.tokenizer} | {self.builder} | {self.mode}"
            + (f" | {self.query}" if self.query else "")
            + (f" | engine={self.engine}" if self.engine not in ("", DEFAULT_ENGINE) else "")
        )


@dataclass
class SystemRun:
    """Everything measured for one system on one dataset."""

    system: System
    tokenizer_spec: str
    builder_spec: str
    run: list[RankedDoc]
    build: dict[str, Any]
    index_path: str
    tokenize_seconds: list[float]
    search_seconds: list[float]
    zero_hit_queries: list[str]
    false_hits: dict[str, int] = field(default_factory=dict)
    #: The engine's canonical spec with library versions, and what it measured (see ``Searcher.stats``).
    engine_spec: str = DEFAULT_ENGINE
    engine_stats: dict[str, Any] = field(default_factory=dict)
    #: Runs per question; each time above is the fastest of them.
    repeat: int = 1
    #: Each question's first search (the ranked run): cold for its own data, and exposed to the machine's pauses.
    first_search_seconds: list[float] = field(default_factory=list)


def corpus_source(dataset: Dataset) -> tuple[Path, str]:
    """Where to build from and the builder a dataset implies (:func:`~..datasets.formats.dataset_builder`): its
    corpus folder (a shipped set, a knowledge base), else the folder its format read."""
    return Path(dataset.meta.get("corpus_dir") or dataset.meta["path"]), dataset_builder(dataset)


def check_builder(dataset: Dataset, builder: Builder) -> None:
    """Refuse a builder that cannot read the dataset's layout (options of the right builder are fine).

    A BEIR folder is read by ``passages``, a shipped set by its own builder; any other builder would index
    whatever files it finds there (a README, a copy of the corpus) under ids the qrels never use.
    """
    source, implied = corpus_source(dataset)
    expected = get_builder(implied).name
    if builder.name != expected:
        layout = "a BEIR folder (corpus.jsonl)" if not dataset.meta.get("corpus_dir") else f"a {expected} corpus"
        raise RagEvalError(
            f"builder {builder.name!r} cannot read dataset {dataset.id!r}: {source} is {layout}, "
            f"which only the {expected} builder reads",
            hint=f"drop --builder, or give {expected} options: -b {expected}:KEY=VALUE",
        )


def source_checksum(source: Path, builder: Builder) -> tuple[str, str]:
    """The sha256 of the files ``builder`` reads from ``source`` (as the index records it, ``corpus_sha256``)
    and a digest of the source's layout (file names and what a manifest says about each)."""
    root, refs = builder.plan(source)
    files = []
    for ref in refs:
        with open_regular(resolve_inside(root, ref.path), CorpusError, label=ref.path) as handle:
            files.append((ref.path, hashlib.file_digest(handle, "sha256").hexdigest()))
    layout = json.dumps([[ref.path, ref.meta] for ref in refs], ensure_ascii=False, sort_keys=True, default=str)
    return corpus_checksum(files), hashlib.sha256(layout.encode()).hexdigest()


def index_path(source: Path, builder: Builder, tokenizer_spec: str, engine: str = REFERENCE_ENGINE) -> tuple[Path, str]:
    """The cached index for a source, builder, tokenizer and build engine, and the source's ``corpus_sha256``.

    The key is content-addressed over everything that decides the index: the bytes of every source file
    the builder reads, the source layout, the builder spec, the tokenizer spec (options, model and
    dictionary checksums, library versions), the index schema and, for a build with impact postings, its
    engine; so a cache hit can never change a number, whatever the dataset is called or where it lives.
    """
    corpus, layout = source_checksum(source, builder)
    identity = {
        "cache": CACHE_FORMAT,
        "schema": SCHEMA_VERSION,
        "rag_eval": __version__,
        "corpus": corpus,
        "layout": layout,
        "builder": builder.system,
        "tokenizer": tokenizer_spec,
    }
    if engine != REFERENCE_ENGINE:  # plain builds keep the keys they had before engines were keyed
        identity["engine"] = engine
    key = hashlib.sha256(json.dumps(identity, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]
    return cache_dir() / "indexes" / corpus[:16] / f"{key}.sqlite", corpus


def _recorded_meta(path: Path, postings: bool = False) -> dict[str, str]:
    """The index's meta; with ``postings``, also ``postings_layout``: ``current`` when its impact postings are
    in the layout this version writes, else ``older`` (a build of an earlier version, or none)."""
    return recorded_meta(path, _postings_layout if postings else None)


def _postings_layout(db: sqlite3.Connection) -> dict[str, str]:
    # Blocks without their tfs (built before 2026-12-04) rank at FTS5's k1 and b only: a k1/b system needs them.
    return {"postings_layout": "current" if impact.current_layout(db) else "older"}


def _cached_report(path: Path, expected: dict[str, str], engine: str = REFERENCE_ENGINE) -> dict[str, Any] | None:
    """The build report of a cached index whose recorded meta matches ``expected`` and whose recorded build
    engine is ``engine`` (indexes built before engines were recorded are plain fts5 builds), else None."""
    report_path = path.with_suffix(".build.json")
    if not path.is_file() or not report_path.is_file():
        return None
    meta = _recorded_meta(path, postings=engine != REFERENCE_ENGINE)
    if any(meta.get(key) != value for key, value in expected.items()):
        return None
    if (meta.get("engine") or REFERENCE_ENGINE) != engine:
        return None
    # Postings an earlier version wrote in another layout rank the same but not as fast: compare times them.
    if engine != REFERENCE_ENGINE and meta.get("postings_layout") != "current":
        return None
    try:
        report = read_json(report_path, IndexFileError, max_bytes=MAX_BUILD_REPORT_BYTES)
    except RagEvalError:
        return None
    return report if isinstance(report, dict) else None


def _discard(path: Path) -> None:
    """Remove a cached index (and its SQLite side files and build report) that cannot be trusted."""
    try:
        remove_database(path)
        path.with_suffix(".build.json").unlink(missing_ok=True)
    except OSError as exc:
        raise IndexFileError(
            f"{path}: cannot remove this cached index to build it again: {exc.strerror or exc}",
            hint=f"check that the cache folder {cache_dir()} is writable, or set {CACHE_ENV} to another folder",
        ) from None


def _wait_for_report(attempt: int) -> None:
    time.sleep(REPORT_WAIT_SECONDS * (attempt + 1))


def cached_build(
    source: Path,
    builder: Builder,
    tokenizer: Tokenizer,
    *,
    progress: Progress | None = None,
    engine: str = REFERENCE_ENGINE,
) -> tuple[Path, dict[str, Any]]:
    """The index of ``source`` for this builder, tokenizer and build engine (``impact`` writes impact
    postings): reused from the cache when its recorded tokenizer spec, builder spec, corpus checksum and
    engine match, else built; and its build report.

    Commands that need the same cached index at once take turns (a lock file beside it): the first builds it,
    the others wait and reuse it."""
    path, corpus = index_path(source, builder, tokenizer.spec, engine)
    expected = {"tokenizer_spec": tokenizer.spec, "builder": builder.system, "corpus_sha256": corpus}
    if os.path.lexists(path) and not (path.is_symlink() or path.is_file()):
        raise IndexFileError(
            f"{path}: not an index file, where rag-eval keeps a cached index; it was left alone",
            hint="remove it; rag-eval builds the index there again",
        )
    # Locked before it is checked and kept while the command runs (``in_use_scope``): a ``cache clear`` meanwhile
    # leaves it. One removed between the check and the lock is built again.
    if hold_in_use(path):
        cached = _cached_report(path, expected, engine)
        if cached is not None:
            return path, cached | {"cached": True}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. the cache folder is a file, or a link to nowhere
        what = "a file or a broken link is in the way" if isinstance(exc, FileExistsError) else exc.strerror or exc
        raise IndexFileError(
            f"{path.parent}: cannot create the folder for cached indexes: {what}",
            hint=f"check the cache folder {cache_dir()}, or set {CACHE_ENV} to another folder",
        ) from None
    waiting = (lambda: progress("wait for another command building this index", 0, 1)) if progress else None
    with key_lock(path.with_name(f".{path.stem}.lock"), on_wait=waiting):
        waited = False
        for attempt in range(BUILD_ATTEMPTS):
            if hold_in_use(path):  # built by the command this one waited for
                cached = _cached_report(path, expected, engine)
                if cached is not None:
                    return path, cached | {"cached": True}
            with unused(path) as free:
                if free:
                    _discard(path)
            if not free:  # a command holds it (one that began before the lock), or a ``cache clear`` checks it
                waited = True
                _wait_for_report(attempt)
                continue
            built: BuildReport = build(
                source,
                path,
                builder=builder,
                tokenizer=tokenizer,
                progress=(lambda phase, done, total: progress(f"build {phase}", done, total)) if progress else None,
                engine=engine,
            )
            if not hold_in_use(path):  # cleared as the build ended
                continue
            recorded = _recorded_meta(path)
            if recorded.get("corpus_sha256") != corpus:
                _discard(path)
                raise CorpusError(f"{source}: the source files changed while the index was built; run again")
            report = dict(built.__dict__)
            write_text_atomic(
                path.with_suffix(".build.json"), json.dumps(report), owned=lambda _path: None, what="index build report"
            )
            return path, report | {"cached": False}
    if waited:
        raise IndexFileError(f"{path}: another command holds this cached index without its build report; run again")
    raise IndexFileError(f"{path}: the cached index was removed {BUILD_ATTEMPTS} times as it was built; run again")
