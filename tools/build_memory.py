"""Build one index in this process and print its peak RSS, time and size as JSON (reports/builds.md).

Usage: python tools/build_memory.py SOURCE INDEX BUILDER TOKENIZER
Peak RSS is /proc/self/status VmHWM (Linux), as tests/index/test_large.py measures it. The build's engine is the
default (``auto``: impact postings), named in the output.
"""

import json
import sqlite3
import sys
import time

from rag_eval.engines import impact
from rag_eval.index.writer import build

t = time.perf_counter()
report = build(sys.argv[1], sys.argv[2], builder=sys.argv[3], tokenizer=sys.argv[4])
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
db = sqlite3.connect(sys.argv[2])
engine = db.execute("SELECT value FROM meta WHERE key = 'engine'").fetchone()[0]
impacts = impact.postings_table(db) is not None
db.close()
print(
    json.dumps(
        {
            "chunks": report.chunks,
            "engine": engine,
            "impact_postings": bool(impacts),
            "peak_rss_mb": round(peak / 1024, 1),
            "index_mb": round(report.index_bytes / 1e6, 1),
            "seconds": round(time.perf_counter() - t, 1),
            "tokenize_seconds": round(report.tokenize_seconds, 1),
        }
    )
)
