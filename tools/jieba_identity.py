"""Whether two strategies give identical tokens on every passage (title and text) and query, and their speed.

Usage: python tools/jieba_identity.py [-a jieba] [-b rjieba] DATASET...
DATASET is a shipped set id (handbook, evidence-mini) or a BEIR folder. Prints one JSON object per set:
passages and queries compared, how many are identical, the first differing ids, and each strategy's
tokens per second (one process, end to end: normalisation, segmentation, filtering). Ids and numbers only.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.tokenizers import Token, Tokenizer, get_tokenizer


def _tokens(tokenizer: Tokenizer, texts: list[str]) -> tuple[list[list[Token]], float]:
    started = time.perf_counter()
    tokens = [tokenizer.tokenize(text) for text in texts]
    return tokens, time.perf_counter() - started


def compare(dataset: str, first: Tokenizer, second: Tokenizer) -> dict:
    """Identity counts and speeds of ``first`` and ``second`` on one dataset."""
    data = load_dataset(dataset)
    passages = list(data.corpus.values())
    queries = list(data.queries.values())
    texts = [p.title for p in passages] + [p.text for p in passages] + [q.text for q in queries]
    a, a_seconds = _tokens(first, texts)
    b, b_seconds = _tokens(second, texts)
    count = len(passages)
    same_passage = [a[i] == b[i] and a[count + i] == b[count + i] for i in range(count)]
    same_query = [x == y for x, y in zip(a[2 * count :], b[2 * count :], strict=True)]
    tokens_a, tokens_b = sum(map(len, a)), sum(map(len, b))
    return {
        "dataset": Path(dataset).name,
        "passages": count,
        "passages_identical": sum(same_passage),
        "queries": len(queries),
        "queries_identical": sum(same_query),
        "first_differing_passages": [p.id for p, same in zip(passages, same_passage, strict=True) if not same][:5],
        "first_differing_queries": [q.id for q, same in zip(queries, same_query, strict=True) if not same][:5],
        "characters": sum(map(len, texts)),
        f"{first.name}_tokens": tokens_a,
        f"{second.name}_tokens": tokens_b,
        f"{first.name}_tokens_per_second": round(tokens_a / a_seconds),
        f"{second.name}_tokens_per_second": round(tokens_b / b_seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("-a", default="jieba")
    parser.add_argument("-b", default="rjieba")
    args = parser.parse_args()
    first, second = get_tokenizer(args.a), get_tokenizer(args.b)
    first.load()
    second.load()
    for dataset in args.datasets:
        print(json.dumps(compare(dataset, first, second), ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
