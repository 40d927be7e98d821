"""One measurement of the A/B in reports/builds.md sections 11 and 12, in a fresh process (``tools/counted_ab.sh`` runs
the rounds):

    RAG_EVAL_WORKERS=2 .venv/bin/python tools/counted_ab.py MODE CORPUS BUILDER STRATEGY

MODE ``counted``: a build as ``rag-eval index build`` makes it (a new index; small sources count their terms
for the impact postings: section 12, the pool's workers count and a thread makes the blocks while SQLite builds
FTS5's index); ``instances``: the same build with counting switched
off (the postings from FTS5's instance pass, as before); ``alone``: the chunks such a build tokenizes,
tokenized by ``tokenize_chunks`` alone with the same plan and nothing written, the denominator of "build
within 15% of tokenization" that no write work can inflate (a build's own tokenize phase includes what the
counting takes from the pool). The strategy's model is loaded first and excluded. Prints one JSON line; the
index goes to a temporary folder that is removed.
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


class _Captured(Exception):
    """Stops a build once it hands its chunks to the tokenizer."""


def main() -> None:
    mode, corpus, builder, spec = sys.argv[1:5]
    if mode not in ("counted", "instances", "alone"):
        raise SystemExit(f"error: unknown mode {mode!r}")
    tokenizer = get_tokenizer(spec)
    tokenizer.load()
    line: dict[str, Any] = {"mode": mode, "corpus": Path(corpus).name, "strategy": spec}
    line["workers"] = os.environ.get(tokenize_pool.WORKERS_ENV, "auto")
    line["load_before"] = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory() as folder:
        if mode == "alone":
            items: list[tuple[str, str]] = []
            keep_offsets: list[bool] = []

            def capture(used: Tokenizer, given: list[tuple[str, str]], **options: Any) -> Any:
                items.extend(given)
                keep_offsets.append(options["keep_offsets"])
                raise _Captured

            writer.tokenize_chunks = capture  # type: ignore[assignment]
            try:
                writer.build(corpus, Path(folder) / "never.sqlite", builder=builder, tokenizer=tokenizer)
            except _Captured:
                pass
            started = time.perf_counter()
            _results, pool = tokenize_pool.tokenize_chunks(tokenizer, items, keep_offsets=keep_offsets[0])
            line.update(seconds=round(time.perf_counter() - started, 3), plan=pool.plan, chunks=len(items))
        else:
            if mode == "instances":
                writer.COUNT_BYTES = -1  # type: ignore[misc]
            started = time.perf_counter()
            report = writer.build(corpus, Path(folder) / "ab.sqlite", builder=builder, tokenizer=tokenizer)
            line.update(
                seconds=round(time.perf_counter() - started, 3),
                plan=report.extra["tokenize_plan"],
                chunks=report.chunks,
                postings_from=report.extra["postings_from"],
                tokenize=round(report.tokenize_seconds, 3),
                write=round(report.write_seconds, 3),
            )
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
