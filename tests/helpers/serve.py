"""`rag-eval serve` in a child process, driven through the MCP SDK's own client over stdio and HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from helpers import REPO

DATASETS = REPO / "datasets"


AS_OF = "2026-10-07"


DEADLINE = 90  # seconds a whole scenario may take before it fails (and its server is stopped)


def server_args(*args: str) -> list[str]:
    return ["-m", "rag_eval", "serve", *args]


def child_env() -> dict[str, str]:
    # The SDK starts a child with a minimal environment; the test's cache folder must reach it.
    return {"RAG_EVAL_CACHE": os.environ["RAG_EVAL_CACHE"]}


@asynccontextmanager
async def stdio_server(log: Path, *args: str) -> AsyncIterator[Client]:
    """The SDK's client on a `rag-eval serve` child over stdio (the SDK stops the child on exit)."""
    params = StdioServerParameters(command=sys.executable, args=server_args(*args), env=child_env())
    with log.open("w", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=30) as client:
            yield client


@contextmanager
def http_server(log: Path, *args: str) -> Iterator[str]:
    """A `rag-eval serve --transport http --port 0` child; yields its URL (read from its stderr)."""
    with log.open("w", encoding="utf-8") as errlog:
        child = subprocess.Popen(
            [sys.executable, *server_args(*args, "--transport", "http", "--host", "127.0.0.1", "--port", "0")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
            env={**os.environ, **child_env()},
        )
        try:
            deadline = time.monotonic() + 60
            while "http://" not in log.read_text(encoding="utf-8"):
                assert child.poll() is None, log.read_text(encoding="utf-8")
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
            line = next(x for x in log.read_text(encoding="utf-8").splitlines() if "http://" in x)
            url = line.split(" at ", 1)[1].split(",", 1)[0]
            assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
            yield url
        finally:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(10)


def run(scenario: Any, *args: Any) -> None:
    """Run an async scenario under the deadline (a hung server fails the test instead of hanging it)."""

    async def bounded() -> None:
        with anyio.fail_after(DEADLINE):
            await scenario(*args)

    anyio.run(bounded)


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content  # text and structure agree
    return result.structured_content


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """The one-line message of a tool error."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert "\n" not in text and "Traceback" not in text and len(text) <= 400
    return text
