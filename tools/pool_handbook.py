"""Pool the top 10 sections of every tokenizer for each drafted handbook query, for judging.

Usage: python tools/pool_handbook.py DRAFTS.jsonl... -o POOL_DIR
Writes POOL_DIR/pool.jsonl: one object per query with its text, kind, the drafted labels and the
pooled candidates (key, heading path, the ranks each tokenizer gave it, the section text).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from rag_eval.builders import get_builder
from rag_eval.builders.sections import split_markdown
from rag_eval.eval.datasets.shipped import datasets_root
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.models import MODEL_FILES, default_model_dir
from rag_eval.search.searching import search

DEPTH = 10


def tokenizers() -> list[str]:
    real = all((default_model_dir() / f).is_file() for f in MODEL_FILES)
    pkuseg = "pkuseg:model=default" if real else "pkuseg:model=mini"
    return ["unicode61", "trigram", "jieba", pkuseg, "bigram", "unigram"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("drafts", nargs="+", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    queries = [
        json.loads(line)
        for path in args.drafts
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    docs = datasets_root() / "handbook" / "docs"
    args.output.mkdir(parents=True, exist_ok=True)
    builder = get_builder("sections")
    sections = {
        f"{file.path}#{section.anchor}": (section.heading_path or section.title, section.text)
        for file in builder.scan(docs)
        for section in split_markdown(file.text(), Path(file.path).stem)
    }
    ranks: list[dict[str, dict[str, int]]] = [{} for _ in queries]
    with tempfile.TemporaryDirectory() as scratch:
        for spec in tokenizers():
            path = Path(scratch) / f"{spec.replace(':', '_')}.sqlite"
            build(docs, path, builder="sections:max_chars=1000000", tokenizer=spec)
            with Index.open(path) as index:
                for number, query in enumerate(queries):
                    for hit in search(index, query["text"], mode="or", limit=DEPTH, deep=True).hits:
                        key = hit.chunk.key
                        ranks[number].setdefault(key, {})[spec.split(":")[0]] = hit.rank
    with open(args.output / "pool.jsonl", "w", encoding="utf-8") as out:
        for query, found in zip(queries, ranks, strict=False):
            keys = list(dict.fromkeys([*query.get("relevant", {}), *found]))
            candidates = [
                {"key": key, "heading_path": sections[key][0], "ranks": found.get(key, {}), "text": sections[key][1]}
                for key in keys
            ]
            out.write(json.dumps({**query, "candidates": candidates}, ensure_ascii=False) + "\n")
    sizes = [len(set(query.get("relevant", {})) | set(found)) for query, found in zip(queries, ranks, strict=False)]
    print(f"{len(queries)} queries, {sum(sizes)} pooled pairs, {sum(sizes) / max(1, len(sizes)):.1f} per query")


if __name__ == "__main__":
    main()
