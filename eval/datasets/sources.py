"""A knowledge base as a dataset: anything ``index build`` accepts, its builder's units as passages, the
questions a user asks of it (a plain text file, queries.jsonl or TREC topics), and judgments when there are any."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...builders import Builder, get_builder, infer_builder
from ...errors import DatasetError
from ...files.questions import question_id, read_questions
from ...files.textio import display_name, fits_trec_column
from ...spec import SystemSpec
from .records import Dataset, Passage, Query
from .shipped import corpus_dir, entry, shipped_ids, unit_passages
from .trec import read_any_qrels


def source_units(source: str, builder: str | None = None) -> tuple[Path, Builder, dict[str, Passage]]:
    """The root, builder and judged units (as passages, in source order) of a shipped id or a path that
    ``index build`` accepts; the builder is inferred from the layout unless given (a spec, options allowed)."""
    if source in shipped_ids() and not Path(source).exists():
        root = corpus_dir(source)
        implied = entry(source)["builder"]
    else:
        root = Path(source)
        implied = infer_builder(root) if builder is None else SystemSpec.parse(builder).name
    chosen = get_builder(builder or implied)
    corpus = unit_passages(chosen, root)
    if not corpus:
        raise DatasetError(f"{source}: the {chosen.name} builder found no passages")
    return root, chosen, corpus


def source_dataset(
    source: str,
    questions: str | Path,
    *,
    builder: str | None = None,
    qrels: str | Path | None = None,
) -> Dataset:
    """A dataset from a knowledge base and questions: passages are the builder's units with their own keys
    (``path#anchor`` for sections, source ids for lines, ``_id`` for passages); qrels are optional.

    ``source`` is a shipped dataset id (its corpus and builder) or a path; the builder is inferred from
    the layout unless given (a spec, options allowed). ``qrels`` (TREC or BEIR qrels, e.g. written by
    ``rag-eval judge``) must name known questions and passages.
    """
    root, chosen, corpus = source_units(source, builder)
    label = source if source in shipped_ids() and not Path(source).exists() else root.resolve().name or str(root)
    queries = read_questions(questions)
    judged = check_judgments(read_any_qrels(qrels), corpus, queries, qrels) if qrels is not None else {}
    meta: dict[str, Any] = {
        "format": "source",
        "path": str(root),
        "corpus_dir": str(root),
        "builder": chosen.name,
        "mode": chosen.query_defaults().mode,
        "questions": str(questions),
        "qrels": str(qrels) if qrels is not None else None,
    }
    return Dataset(label, corpus, queries, judged, meta)


def check_trec_ids(dataset: Dataset) -> None:
    """Refuse a dataset whose question or passage ids cannot be written to a TREC run or qrels file (empty, or
    holding whitespace or a control character): its runs would be unreadable by ``evaluate``, trec_eval and
    ``compare --run``. A passage ``_id`` with a space is the usual cause (a Markdown file's key encodes its
    spaces, see :mod:`rag_eval.builders.keys`)."""
    for what, ids in (("question", dataset.queries), ("passage", dataset.corpus)):
        for value in ids:
            if not fits_trec_column(value):
                raise DatasetError(
                    f"{dataset.id}: {what} id {value!r} cannot be written to a TREC run or qrels file "
                    "(empty, or holds whitespace or a control character)",
                    hint="give passage ids (corpus.jsonl _id) and question ids (queries.jsonl _id) without spaces",
                )


def _question_ids_hint(queries: dict[str, Query]) -> str:
    """How the compared questions got their ids, and how to give them one's own: judged ids that match none are
    usually a plain text file's (ids made from the text) judged under other names, or the reverse."""
    first = next(iter(queries), "")
    if queries and all(qid == question_id(query.text) for qid, query in queries.items()):
        how = (
            f"the questions of a plain text file get ids made from their text, 'q-' and the first 12 hex digits of "
            f"its sha256 (here {first!r}, ...), as rag-eval judge writes them"
        )
    else:
        how = f"the questions compared have their file's own ids (here {first!r}, ...)"
    return (
        f"judgments belong to the questions (and corpus) they were made for: {how}; to name questions yourself "
        '(q1, q2, ...), give them as queries.jsonl ({"_id": "q1", "text": "..."} per line) or as a .tsv '
        "file of 'qid<TAB>question' lines"
    )


def check_judgments(
    qrels: dict[str, dict[str, int]], corpus: dict[str, Passage], queries: dict[str, Query], path: str | Path
) -> dict[str, dict[str, int]]:
    """Judgments that name only these questions and passages: anything else means another corpus, another
    questions file or another builder, and would silently count for nothing."""
    name = display_name(str(path))
    unknown_queries = sorted(set(qrels) - set(queries))
    if unknown_queries:
        raise DatasetError(
            f"{name}: {len(unknown_queries)} judged query {'id is' if len(unknown_queries) == 1 else 'ids are'} "
            f"not among the {len(queries)} questions compared, e.g. {unknown_queries[0]!r}",
            hint=_question_ids_hint(queries),
        )
    unknown_docs = sorted({doc for docs in qrels.values() for doc in docs} - set(corpus))
    if unknown_docs:
        raise DatasetError(
            f"{name}: {len(unknown_docs)} judged {'passage is' if len(unknown_docs) == 1 else 'passages are'} not "
            f"units of this source, e.g. {unknown_docs[0]!r}",
            hint="judgments belong to the corpus and builder they were made with",
        )
    return qrels
