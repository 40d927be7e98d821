"""The canonical in-memory dataset: BEIR's corpus, queries and graded qrels, plus query kinds."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ...records import Query


class Passage(NamedTuple):
    """A retrievable unit: id, title and text."""

    id: str
    title: str
    text: str


class Qrel(NamedTuple):
    """Graded relevance of one passage for one query (trec_eval's qrels line)."""

    query_id: str
    doc_id: str
    relevance: int


NO_ANSWER = "no-answer"
#: Query kinds written by ``rag-eval queries synth`` start with this; a report on them says so in its title.
SYNTHETIC_KIND = "synthetic"
#: Largest relevance grade accepted in qrels: grades are small non-negative integers (0 = not relevant).
#: trec_eval uses the grade itself as nDCG's gain; huge grades overflow pytrec_eval's integers silently.
MAX_RELEVANCE = 100


@dataclass
class Dataset:
    """Corpus, queries and qrels in BEIR's shape; ``meta`` holds provenance such as the as-of date."""

    id: str
    corpus: dict[str, Passage]
    queries: dict[str, Query]
    qrels: dict[str, dict[str, int]]
    meta: dict[str, Any] = field(default_factory=dict)

    def qrel_list(self) -> list[Qrel]:
        """Qrels as records, in query then document order."""
        return [Qrel(q, d, r) for q, docs in self.qrels.items() for d, r in docs.items()]

    def checksum(self) -> str:
        """sha256 over the canonical JSON of corpus, queries and qrels: identifies the data, not the files."""
        digest = hashlib.sha256()
        for part in (sorted(self.corpus.values()), sorted(self.queries.values()), sorted(self.qrel_list())):
            digest.update(json.dumps(part, ensure_ascii=False, separators=(",", ":")).encode())
        return digest.hexdigest()

    def judged(self) -> list[str]:
        """The ids of the questions with a judgment, in the queries' order: what every metric averages over
        (as ``metrics.judged_queries`` picks them from qrels, where trec_eval -c takes every query judged)."""
        return [q for q in self.queries if self.qrels.get(q)]

    def stats(self) -> dict[str, Any]:
        """Counts and average lengths, as ``rag-eval datasets show`` prints them."""
        judged = self.judged()
        kinds: dict[str, int] = {}
        for query in self.queries.values():
            kinds[query.kind or "-"] = kinds.get(query.kind or "-", 0) + 1
        passages = list(self.corpus.values())
        return {
            "id": self.id,
            "passages": len(passages),
            "queries": len(self.queries),
            "judged_queries": len(judged),
            "qrels": sum(len(d) for d in self.qrels.values()),
            "qrels_per_judged_query": round(sum(len(self.qrels[q]) for q in judged) / len(judged), 2) if judged else 0,
            "avg_passage_chars": round(sum(len(p.title) + len(p.text) for p in passages) / len(passages), 1)
            if passages
            else 0,
            "avg_query_chars": round(sum(len(q.text) for q in self.queries.values()) / len(self.queries), 1)
            if self.queries
            else 0,
            "query_kinds": dict(sorted(kinds.items())),
        }
