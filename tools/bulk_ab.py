"""A/B of how a new index file is written: WAL (before a77b81c) against bulk loading (since), alternating.

    RAG_EVAL_WORKERS=2 .venv/bin/python tools/bulk_ab.py CORPUS STRATEGY ROUNDS > OUT.jsonl

Each round builds the same `passages` index twice into new paths, once each way (the order alternates by
round); "wal" replaces the library's bulk-load and final-sync steps with nothing, so its file is written as
before. One JSON line per build: tokenize and write seconds, and the whole build after the tokenizer load over
the tokenize phase.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from rag_eval.index import writer


def main() -> None:
    corpus, strategy, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    bulk, sync = writer.bulk_load, writer.flush_to_disk
    for number in range(1, rounds + 1):
        for variant in ("wal", "bulk") if number % 2 else ("bulk", "wal"):
            writer.bulk_load = bulk if variant == "bulk" else (lambda db: None)  # type: ignore[assignment]
            writer.flush_to_disk = sync if variant == "bulk" else (lambda building: None)  # type: ignore[assignment]
            with tempfile.TemporaryDirectory() as folder:
                started = time.perf_counter()
                report = writer.build(corpus, Path(folder) / "ab.sqlite", builder="passages", tokenizer=strategy)
                total = time.perf_counter() - started - report.tokenizer_load_seconds
            line = {
                "round": number,
                "variant": variant,
                "strategy": strategy,
                "workers": os.environ.get("RAG_EVAL_WORKERS", "auto"),
                "load": round(os.getloadavg()[0], 2),
                "tokenize": round(report.tokenize_seconds, 3),
                "write": round(report.write_seconds, 3),
                "after_tokenize": round(total - report.tokenize_seconds, 3),
                "build_over_tokenize": round(total / report.tokenize_seconds, 3),
            }
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
