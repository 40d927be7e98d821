"""Tool-call latency of ``rag-eval serve`` over stdio: ``search`` on the shipped handbook, p50/p95.

A script, not a test (timing never goes in a test's assertion); the README records its output and the
command:

    nice .venv/bin/python tests/benchmarks/serve_latency.py [-t SPEC ...] > out.json

For each strategy the handbook's Markdown folder is built into a sections index in a temporary folder,
``python -m rag_eval serve INDEX`` is started as a child, and the SDK's own client (the ``mcp`` package)
calls ``search`` once per handbook query (324 natural questions), one call at a time, after a warm-up.
A call's latency is the client's round trip: JSON-RPC over the pipes, argument checks, the search, the
evidence result and its serialisation. The same queries are then timed in-process with
:func:`rag_eval.search.evidence.evidence` on the same index, so the difference is what the protocol costs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from rag_eval import __version__
from rag_eval.eval.datasets.shipped import datasets_root
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.evidence import evidence

WARMUP = 20
AS_OF = "2026-10-07"
REPOSITORY = Path(__file__).resolve().parents[2]


def questions() -> list[str]:
    """The handbook's queries, in file order."""
    path = datasets_root() / "handbook" / "queries.jsonl"
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def percentiles(seconds: list[float]) -> dict[str, float]:
    """min, median (p50), mean, p95, p99 and max in milliseconds."""
    ms = sorted(s * 1000 for s in seconds)
    cut = statistics.quantiles(ms, n=100, method="inclusive")
    return {
        "min_ms": round(ms[0], 3),
        "p50_ms": round(statistics.median(ms), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "p95_ms": round(cut[94], 3),
        "p99_ms": round(cut[98], 3),
        "max_ms": round(ms[-1], 3),
    }


async def over_stdio(index: Path, queries: list[str], log: Path) -> tuple[list[float], float]:
    """Each query's round-trip seconds through a served child, and the seconds to start and connect."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rag_eval", "serve", str(index), "--as-of", AS_OF],
        env={key: os.environ[key] for key in ("RAG_EVAL_CACHE", "HOME") if key in os.environ},
    )
    timings = []
    with log.open("w", encoding="utf-8") as errlog:
        started = time.perf_counter()
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            connected = time.perf_counter() - started
            for query in queries[:WARMUP]:
                await client.call_tool("search", {"query": query})
            for query in queries:
                before = time.perf_counter()
                result = await client.call_tool("search", {"query": query})
                timings.append(time.perf_counter() - before)
                if result.is_error:
                    raise SystemExit(f"search {query!r} failed: {result.content}")
    return timings, connected


def in_process(index: Path, queries: list[str]) -> list[float]:
    """Each query's seconds for the evidence result built in this process (no protocol)."""
    timings = []
    with Index.open(index) as opened:
        for query in queries[:WARMUP]:
            evidence(opened, query, as_of=AS_OF)
        for query in queries:
            before = time.perf_counter()
            evidence(opened, query, as_of=AS_OF)
            timings.append(time.perf_counter() - before)
    return timings


def measure(spec: str, folder: Path, queries: list[str]) -> dict[str, Any]:
    """Build the handbook with ``spec``, then time search over stdio and in process."""
    index = folder / f"handbook-{spec.replace(':', '_')}.sqlite"
    build(datasets_root() / "handbook" / "docs", index, builder="sections", tokenizer=spec)
    timings, connected = anyio.run(over_stdio, index, queries, folder / "server.log")
    return {
        "tokenizer": spec,
        "calls": len(timings),
        "start_and_connect_s": round(connected, 3),
        "stdio_search": percentiles(timings),
        "in_process_evidence": percentiles(in_process(index, queries)),
    }


def commit() -> str:
    found = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-t", "--tokenizer", action="append", help="strategy spec (repeatable); default jieba, bigram")
    args = parser.parse_args()
    queries = questions()
    with tempfile.TemporaryDirectory() as folder:
        results = [measure(spec, Path(folder), queries) for spec in args.tokenizer or ["jieba", "bigram"]]
    from importlib.metadata import version

    report = {
        "command": "nice .venv/bin/python tests/benchmarks/serve_latency.py " + " ".join(sys.argv[1:]),
        "dataset": "handbook (sections), datasets/handbook/queries.jsonl",
        "queries": len(queries),
        "warmup": WARMUP,
        "results": results,
        "rag_eval": __version__,
        "mcp": version("mcp"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}",
        "commit": commit(),
        "utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    print(json.dumps(report, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
