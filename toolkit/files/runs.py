"""TREC run files: a ranking made strictly decreasing, so trec_eval and every other tool reads exactly rag-eval's
order, and written as ``qid Q0 docid rank score tag`` lines (batch search, compare, fuse)."""

from __future__ import annotations

from pathlib import Path

from ..records import RankedDoc

#: Every query retrieves at least this many results, so R@100 and MAP@100 are defined.
DEPTH = 100
#: Consecutive scores of a run differ by at least this fraction of their size (and at least 1e-6):
#: trec_eval reads scores as 32-bit floats (24-bit significand, about 7 digits), so a smaller step
#: between two near-equal bm25 scores (21.200778, 21.200777) would tie there and be re-ordered by
#: document id, and every metric would score another ranking than rag-eval's.
RELATIVE_STEP = 2.0**-18


def strict_run(query_id: str, hits: list[tuple[str, float]]) -> list[RankedDoc]:
    """Keep each unit's best rank, then give strictly decreasing scores in rank order.

    bm25 from FTS5 is lower-is-better and ties are common; the score written is ``-bm25`` (6 decimals),
    lowered where needed so each is distinctly below the previous one even as a 32-bit float (see
    ``RELATIVE_STEP``), so trec_eval (which breaks ties by document id) and every other tool read exactly
    rag-eval's ranking.
    """
    seen: set[str] = set()
    out: list[RankedDoc] = []
    previous = float("inf")
    for doc_id, bm25 in hits:
        if doc_id in seen:
            continue
        seen.add(doc_id)
        score = round(-bm25, 6)
        if out:
            step = max(1e-6, abs(previous) * RELATIVE_STEP)
            score = min(score, round(previous - step, 6))
        out.append(RankedDoc(query_id, doc_id, len(out) + 1, score))
        previous = score
    return out


def write_trec_run(runs: list[RankedDoc], path: str | Path, tag: str) -> None:
    """A TREC run file: ``qid Q0 docid rank score tag``, scores strictly decreasing per query."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(trec_run_text(runs, tag))


def trec_run_text(runs: list[RankedDoc], tag: str) -> str:
    """The lines of a TREC run file, ``qid Q0 docid rank score tag``."""
    return "".join(f"{doc.query_id} Q0 {doc.doc_id} {doc.rank} {doc.score:.6f} {tag}\n" for doc in runs)
