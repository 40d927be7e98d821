"""Datasheet statistics for the handbook: counts per kind and query-to-section bigram overlap.

Usage: python tools/handbook_stats.py
Overlap of a query = the share of its character bigrams (over Han characters, letters and digits,
case-folded, script as written) that occur in the text of its grade-2 sections.
"""

from __future__ import annotations

import json
import statistics

import regex

from rag_eval.eval.datasets.shipped import datasets_root, passages

_RUN = regex.compile(r"[\p{Han}\p{L}\p{N}]+")


def bigrams(text: str) -> set[str]:
    grams: set[str] = set()
    for run in _RUN.findall(text.casefold()):
        grams.update(run[i : i + 2] for i in range(len(run) - 1))
    return grams


def main() -> None:
    folder = datasets_root() / "handbook"
    corpus = passages("handbook")
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    qrels: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        query_id, doc_id, grade = line.split("\t")
        qrels.setdefault(query_id, {})[doc_id] = int(grade)
    per_kind: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    relevant: dict[str, list[int]] = {}
    for query in queries:
        kind = query["kind"]
        counts[kind] = counts.get(kind, 0) + 1
        judged = qrels.get(query["_id"], {})
        relevant.setdefault(kind, []).append(len(judged))
        answers = [doc for doc, grade in judged.items() if grade == 2]
        grams = bigrams(query["text"])
        if answers and grams:
            text = bigrams(" ".join(corpus[doc].title + " " + corpus[doc].text for doc in answers))
            per_kind.setdefault(kind, []).append(len(grams & text) / len(grams))
    print("| kind | queries | mean qrels per query | mean bigram overlap with grade-2 sections |")
    print("|---|---:|---:|---:|")
    for kind in sorted(counts):
        overlap = per_kind.get(kind)
        shown = f"{statistics.fmean(overlap):.2f}" if overlap else "-"
        print(f"| {kind} | {counts[kind]} | {statistics.fmean(relevant[kind]):.1f} | {shown} |")
    grades = [g for docs in qrels.values() for g in docs.values()]
    print(
        json.dumps(
            {
                "queries": len(queries),
                "judged": len(qrels),
                "qrels": len(grades),
                "grade2": grades.count(2),
                "grade1": grades.count(1),
                "sections": len(corpus),
            }
        )
    )


if __name__ == "__main__":
    main()
