"""Batch search: answer a file of queries against one index, tokenizer loaded once, into a TREC run file.

The run is what ``compare`` ranks for the same index and queries: every query goes through
:func:`rag_eval.search.searching.search` with ``deep=True`` (no term limit), documents are the builder's judged units
(a split section counts as its section), and scores are made strictly decreasing by
:func:`~rag_eval.files.runs.strict_run`, as compare's runs are, so ``rag-eval evaluate RUN QRELS`` scores exactly
this ranking.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from ..errors import DatasetError, QueryError
from ..files.outputs import (
    OutputError,
    check_file_target,
    checked_target,
    refuse_inputs,
    refuse_inside_source,
    write_text_atomic,
)
from ..files.questions import read_questions
from ..files.runs import DEPTH, strict_run, trec_run_text
from ..files.textio import fits_trec_column, text_argument
from ..index.processing import QueryProcessing
from ..index.store import Index
from ..records import Progress, Query, RankedDoc
from .read import unknown_category_hint
from .request import SearchRequest
from .searching import search, warm

#: What the output is called in messages.
RUN_WHAT = "run file"
#: The run tag (TREC's sixth column) unless one is given.
DEFAULT_TAG = "rag-eval"
#: Deepest run per query; the same bound as ``rag-eval fuse --depth`` (a run is held in memory until its
#: one atomic write, and TREC runs are conventionally 1,000 deep).
MAX_LIMIT = 10_000
#: A TREC column holds no whitespace: it would split the line into more than six columns.
_SPACE = re.compile(r"\s")


@dataclass(frozen=True)
class BatchReport:
    """What a batch search did: queries answered, run lines written and where, and how long it took."""

    path: Path
    queries: int
    lines: int
    zero_hit_queries: int
    load_seconds: float
    search_seconds: float
    #: Why every query found nothing, when it is known (no chunk has the category searched); else None.
    hint: str | None = None

    @property
    def queries_per_second(self) -> float:
        """Queries answered per second of searching (tokenizer and index load excluded)."""
        return self.queries / self.search_seconds if self.search_seconds > 0 else float("inf")

    def summary(self) -> str:
        """One line for the end of a batch: queries, time, queries per second, what was written."""
        return (
            f"searched {self.queries} queries in {self.search_seconds:.2f} s ({self.queries_per_second:.1f} "
            f"queries/s; index and tokenizer load {self.load_seconds:.2f} s), {self.zero_hit_queries} without "
            f"hits; wrote {self.lines} lines to {self.path}"
        )


def read_topics_file(path: str | Path) -> dict[str, Query]:
    """Queries from TREC topics (``<top>`` blocks; ``.tsv``: ``qid<TAB>text`` lines), queries.jsonl
    (``_id``, ``text``) or a text file with one question per line:
    :func:`rag_eval.files.questions.read_questions`,
    the reader of ``compare --queries`` and ``judge --queries``, so the ids and checks are theirs."""
    return read_questions(path)


def check_limit(limit: object) -> int:
    """A run depth: an integer from 1 to ``MAX_LIMIT``."""
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be an integer from 1 to {MAX_LIMIT}, not {limit!r}")
    return limit


def check_tag(tag: object) -> str:
    """A run tag: text that fits one TREC column (non-empty, no whitespace)."""
    value = text_argument(tag, "run tag", QueryError)
    if not fits_trec_column(value):
        raise QueryError(f"run tag {value!r} must be non-empty, without whitespace or control characters")
    return value


def check_new_file(output: str | Path, inputs: tuple[tuple[str, str | Path], ...] = ()) -> Path:
    """``output`` as a path for a new run file, refused now rather than after every query has run: never one of
    ``inputs`` (``(what it is, path)``: the index, the queries file), a SQLite side file (an index's ``-wal``,
    ``-shm``, ``-journal``) or a path ending in a separator."""
    target = checked_target(output, what=RUN_WHAT, file=True)
    refuse_inputs(output, inputs, what=RUN_WHAT)
    if target.is_file() and not target.is_symlink():
        # As ``rag-eval fuse`` does: a run file carries no mark of who wrote it, so none is ever replaced.
        raise OutputError(
            f"{target}: refusing to replace it: it already exists", hint="choose a new path, or move the file away"
        )
    return check_file_target(target, owned=None, what=RUN_WHAT)


def run_request(
    limit: int = DEPTH,
    *,
    mode: str | None = None,
    as_of: str | None = None,
    category: str | None = None,
    path_prefix: str | None = None,
    processing: QueryProcessing | str | None = None,
    engine: str | None = None,
) -> SearchRequest:
    """The request each question of a run is asked with (its query replaced per question): ``limit`` deep, keys
    only, no snippets, no term limit, as ``compare`` ranks them."""
    return SearchRequest.of(
        "",
        mode=mode,
        limit=limit,
        as_of=as_of,
        category=category,
        path_prefix=path_prefix,
        snippets=False,
        deep=True,
        processing=processing,
        engine=engine,
        keys_only=True,
    )


def rank_queries(
    index: Index, queries: dict[str, Query], request: SearchRequest, progress: Progress | None = None
) -> Iterator[tuple[Query, list[RankedDoc]]]:
    """Each query with its ranked documents (none when nothing matched), each asked as ``request`` asks
    (:func:`run_request`)."""
    to_unit = _document_ids(index)
    for number, query in enumerate(queries.values(), start=1):
        result = search(index, request.asking(query.text))
        yield query, strict_run(query.id, [(to_unit(hit.chunk.key), hit.score) for hit in result.hits])
        if progress is not None:
            progress("queries", number, len(queries))


def batch_search(
    index_path: str | Path | Index,
    topics: str | Path,
    output: str | Path,
    *,
    limit: int | None = None,
    tag: str | None = None,
    mode: str | None = None,
    as_of: str | None = None,
    category: str | None = None,
    path_prefix: str | None = None,
    processing: QueryProcessing | str | None = None,
    engine: str | None = None,
    progress: Progress | None = None,
) -> BatchReport:
    """``rag-eval search INDEX --queries FILE --run OUT``: every query of ``topics`` against one index, written
    to ``output`` as a TREC run (``qid Q0 docid rank score tag``), ``limit`` chunks deep per query (default
    ``DEPTH``, as ``compare`` ranks them) and tagged ``tag`` (default ``DEFAULT_TAG``). ``index_path`` is the
    index file, or an open :class:`~rag_eval.index.store.Index` (used as it is and left open). The other
    keywords are the search's (:func:`run_request`).

    Everything is checked before the first search (arguments, the output path, every query); ``output``
    must be a new file (not the index, one of its SQLite side files or ``topics``; no trailing separator) and
    is written once, atomically, at the end: a failed or interrupted batch leaves no file behind.
    """
    depth, tag = _checked(index_path, topics, output, limit, tag)
    queries = read_topics_file(topics)
    started = time.perf_counter()
    opened = nullcontext(index_path) if isinstance(index_path, Index) else Index.open(index_path)
    with opened as index:
        # The corpus the index was built from: a run written there would be indexed by its next build.
        refuse_inside_source(output, [index.meta.get("source_root")], what=RUN_WHAT)
        index.tokenizer.load()
        warm(index, engine)
        loaded = time.perf_counter()
        request = run_request(
            depth,
            mode=mode,
            as_of=as_of,
            category=category,
            path_prefix=path_prefix,
            processing=processing,
            engine=engine,
        )
        text, lines, zero_hits = _run_text(rank_queries(index, queries, request, progress), tag)
        searched = time.perf_counter()
        hint = unknown_category_hint(index, category) if zero_hits == len(queries) else None
    path = write_text_atomic(output, text, owned=None, what=RUN_WHAT)
    return BatchReport(
        path=path,
        queries=len(queries),
        lines=lines,
        zero_hit_queries=zero_hits,
        load_seconds=loaded - started,
        search_seconds=searched - loaded,
        hint=hint,
    )


def _checked(
    index_path: str | Path | Index, topics: str | Path, output: str | Path, limit: int | None, tag: str | None
) -> tuple[int, str]:
    """The run's depth and tag, after both and the paths are checked (the output a new file, none of the inputs)."""
    depth = check_limit(DEPTH if limit is None else limit)
    tag = check_tag(DEFAULT_TAG if tag is None else tag)
    for value, what in ((topics, "topics"), (output, "output")):
        if not isinstance(value, (str, os.PathLike)):
            raise QueryError(f"{what} must be a path (str or os.PathLike), not {type(value).__name__}")
    index_file = index_path.path if isinstance(index_path, Index) else index_path
    check_new_file(output, (("index", index_file), ("queries file", topics)))
    return depth, tag


def _run_text(ranking: Iterator[tuple[Query, list[RankedDoc]]], tag: str) -> tuple[str, int, int]:
    """The run's lines, how many, and how many queries found nothing. Each query's lines become text at once: a
    string holds a run in less memory than its records."""
    parts, lines, zero_hits = [], 0, 0
    for _query, ranked in ranking:
        parts.append(trec_run_text(ranked, tag))
        lines += len(ranked)
        zero_hits += not ranked
    return "".join(parts), lines, zero_hits


def _document_ids(index: Index) -> Callable[[str], str]:
    """A chunk key's document id in the run (the unit qrels judge it as), checked once per key: a TREC
    column cannot hold whitespace (a passage ``_id`` with a space would give a seven-column line; a Markdown
    file's key has its spaces percent-encoded, see :mod:`rag_eval.builders.keys`, except in an index built before)."""
    unit = index.builder.unit

    @functools.cache
    def document_id(key: str) -> str:
        found = unit(key)
        if _SPACE.search(found):
            raise DatasetError(
                f"{index.path}: chunk {found!r} holds whitespace, which a TREC run cannot carry as a document id",
                hint="TREC runs separate columns by whitespace; give a corpus.jsonl's passages _ids without spaces "
                "(a Markdown index built before rag-eval encoded spaces in keys: build it again)",
            )
        return found

    return document_id
