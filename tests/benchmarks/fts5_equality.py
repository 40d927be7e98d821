"""Rankings of the default impact engine against FTS5's own statement, on an index's questions: keys-only
searches 100 deep with engine ``fts5`` and ``impact``, ids and keys compared, scores within 1e-9 relative and
bit for bit. Every ``STRIDE``-th question after the first ``SKIP``. Numbers only: no text of the set is printed.

    nice python tests/benchmarks/fts5_equality.py INDEX... QUERIES_JSONL > equality.jsonl
"""

from __future__ import annotations

import json
import sys

from rag_eval.index.store import Index
from rag_eval.search.searching import search

SKIP = 30
STRIDE = 14


def check(path: str, queries: str) -> dict[str, object]:
    with open(queries, encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle if line.strip()][SKIP::STRIDE]
    close = identical = 0
    with Index.open(path) as index:
        for text in texts:
            hits = {
                engine: search(index, text, limit=100, deep=True, snippets=False, keys_only=True, engine=engine).hits
                for engine in ("fts5", "impact")
            }
            a, b = hits["fts5"], hits["impact"]
            same = [(h.id, h.chunk.key) for h in a] == [(h.id, h.chunk.key) for h in b]
            close += same and all(abs(x.score - y.score) <= 1e-9 * abs(x.score) for x, y in zip(a, b, strict=True))
            identical += same and [h.score for h in a] == [h.score for h in b]
        spec = index.tokenizer.spec
    found = {"questions": len(texts), "within_1e-9": close, "bit_identical": identical}
    return {"tokenizer": spec, "rows": index.chunks, **found}


if __name__ == "__main__":
    *paths, queries = sys.argv[1:]
    for path in paths:
        print(json.dumps(check(path, queries)))
