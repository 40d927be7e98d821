"""The README's "your own knowledge base" example: the handbook's natural questions as a plain questions
file, and their pooled judgments keyed by the ids ``compare --queries`` gives them (for ``judge --oracle``).

Usage: python tools/example_questions.py   (writes docs/examples/handbook-questions.txt and .qrels)
"""

from __future__ import annotations

from pathlib import Path

from rag_eval.eval.datasets.shipped import load_shipped
from rag_eval.eval.datasets.sources import question_id
from rag_eval.eval.datasets.trec import trec_qrels_text

KIND = "question"


def main() -> None:
    dataset = load_shipped("handbook")
    chosen = [query for query in dataset.queries.values() if query.kind == KIND]
    out = Path(__file__).resolve().parents[1] / "docs" / "examples"
    out.mkdir(parents=True, exist_ok=True)
    (out / "handbook-questions.txt").write_text("".join(f"{q.text}\n" for q in chosen), encoding="utf-8")
    judged = {
        question_id(query.text): dict(sorted(dataset.qrels[query.id].items()))
        for query in chosen
        if query.id in dataset.qrels
    }
    (out / "handbook-questions.qrels").write_text(trec_qrels_text(judged), encoding="utf-8")
    print(f"{len(chosen)} questions, {sum(map(len, judged.values()))} judgments written to {out}")


if __name__ == "__main__":
    main()
