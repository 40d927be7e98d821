"""``rag-eval serve`` over stdio: one ``search`` tool call on the shipped handbook, against the same evidence
result built in process (the difference is what the protocol costs).

The server is a ``python -m rag_eval serve`` child driven by the SDK's own client through a blocking
portal, so pytest-benchmark times a plain function. p50/p95 over every handbook query come from
``tests/benchmarks/serve_latency.py`` (recorded in the README).
Run with: pytest tests/benchmarks/test_serve_speed.py -o addopts="" --benchmark-only
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from rag_eval.eval.datasets.shipped import datasets_root
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.evidence import evidence

AS_OF = "2026-10-07"
TOKENIZER = "jieba"  # seed 001's strategy for a Markdown handbook
ROUNDS = 60


def questions() -> list[str]:
    path = datasets_root() / "handbook" / "queries.jsonl"
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def handbook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("serve-bench") / "handbook.sqlite"
    build(datasets_root() / "handbook" / "docs", path, builder="sections", tokenizer=TOKENIZER)
    return path


@pytest.fixture(scope="module")
def served(handbook: Path) -> Iterator[tuple[BlockingPortal, Client]]:
    """A client connected to a served handbook, usable from synchronous code through the portal."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rag_eval", "serve", str(handbook), "--as-of", AS_OF],
        env={"RAG_EVAL_CACHE": os.environ["RAG_EVAL_CACHE"]},
    )
    with (
        open(handbook.parent / "server.log", "w", encoding="utf-8") as errlog,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60)) as c,
    ):
        yield portal, c


def test_search_tool_call_over_stdio(benchmark, served: tuple[BlockingPortal, Client]) -> None:
    benchmark.group = f"serve:search-{TOKENIZER}"
    portal, client = served
    queries = itertools.cycle(questions())

    def call() -> Any:
        return portal.call(client.call_tool, "search", {"query": next(queries)})

    for _ in range(10):
        call()  # warm-up: the child's page cache and statements
    result = benchmark.pedantic(call, rounds=ROUNDS, iterations=1)
    assert not result.is_error and result.structured_content["action_authority"] is False


def test_evidence_in_process(benchmark, handbook: Path) -> None:
    benchmark.group = f"serve:search-{TOKENIZER}"
    queries = itertools.cycle(questions())
    with Index.open(handbook) as index:
        for _ in range(10):
            evidence(index, next(queries), as_of=AS_OF)
        result = benchmark.pedantic(lambda: evidence(index, next(queries), as_of=AS_OF), rounds=ROUNDS, iterations=1)
    assert result["action_authority"] is False
