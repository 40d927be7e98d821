"""A/B of a build's impact postings counted from its terms while the workers tokenize (``TermCounts``, the
default for small sources) against FTS5's instance pass, with the same chunks tokenized alone in between:

    RAG_EVAL_WORKERS=2 .venv/bin/python tools/counted_ab.py CORPUS BUILDER STRATEGY ROUNDS > OUT.jsonl

Each round builds a new index both ways (the order alternates between rounds) and times ``tokenize_chunks``
alone on the chunks the first build tokenized, with the same plan: the denominator of "build within 15% of
tokenization" that no write work can inflate (a build's own tokenize phase includes what the counting takes
from the pool). One JSON line per build or tokenization, with the load average after it. The strategy's
model is loaded once, before the first round, so ``build`` excludes the load. Indexes go to temporary
folders that are removed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rag_eval import tokenize_pool, writer
from rag_eval.tokenizers import Tokenizer, get_tokenizer


def main() -> None:
    corpus, builder, spec, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    tokenizer = get_tokenizer(spec)
    tokenizer.load()
    captured: list[tuple[Tokenizer, list[tuple[str, str]], bool]] = []
    real = writer.tokenize_chunks

    def capture(used: Tokenizer, items: list[tuple[str, str]], **options: Any) -> Any:
        captured.append((used, list(items), options["keep_offsets"]))
        return real(used, items, **options)

    def emit(line: dict[str, Any]) -> None:
        print(json.dumps({**line, "load": round(os.getloadavg()[0], 2)}), flush=True)

    for number in range(rounds):
        order = ("counted", "instances", "alone") if number % 2 == 0 else ("alone", "instances", "counted")
        for mode in order:
            if mode == "alone":
                if captured:
                    started = time.perf_counter()
                    for used, items, keep_offsets in captured:
                        tokenize_pool.tokenize_chunks(used, items, keep_offsets=keep_offsets)
                    seconds = round(time.perf_counter() - started, 3)
                    emit({"round": number, "mode": "tokenize alone", "seconds": seconds})
                continue
            writer.COUNT_BYTES = 10**15 if mode == "counted" else -1  # type: ignore[misc]
            writer.tokenize_chunks = real if captured else capture  # type: ignore[assignment]
            with tempfile.TemporaryDirectory() as folder:
                started = time.perf_counter()
                report = writer.build(corpus, Path(folder) / "ab.sqlite", builder=builder, tokenizer=tokenizer)
                seconds = time.perf_counter() - started
            emit(
                {
                    "round": number,
                    "mode": mode,
                    "postings_from": report.extra["postings_from"],
                    "plan": report.extra["tokenize_plan"],
                    "tokenize": round(report.tokenize_seconds, 3),
                    "write": round(report.write_seconds, 3),
                    "build": round(seconds, 3),
                }
            )


if __name__ == "__main__":
    main()
