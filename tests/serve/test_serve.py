"""rag-eval serve: the MCP tools through the SDK's own client, over stdio and HTTP subprocesses; and hostile input
(values whose repr fails, roots and index paths that cannot be sent, lines the SDK cannot read) answered as a tool
error or refused at start.

Servers run as `python -m rag_eval serve ...` children, bind 127.0.0.1 only (HTTP: port 0, a free one),
and are stopped in `finally` blocks; every scenario runs under a deadline.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from click.testing import CliRunner
from helpers import REPO, invoke, one_error
from helpers.serve import (
    AS_OF,
    DATASETS,
    call,
    child_env,
    http_server,
    refused,
    run,
    server_args,
    stdio_server,
)
from mcp import Client

from rag_eval import compat
from rag_eval.cli import cli
from rag_eval.errors import IndexFileError, QueryError, ReadError, ServeError
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.evidence import evidence, search_tool
from rag_eval.search.query import MODES
from rag_eval.serve.agent_tools import agent_tools, check_arguments
from rag_eval.serve.served import IndexSet
from rag_eval.serve.server import answerable, one_line, run_tool, serve


@pytest.fixture(scope="module")
def handbook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped handbook's Markdown folder as a sections index (bigram: no dictionary to load)."""
    path = tmp_path_factory.mktemp("handbook") / "handbook.sqlite"
    build(DATASETS / "handbook" / "docs", path, builder="sections", tokenizer="bigram")
    return path


@pytest.fixture
def evidence_index(tmp_path: Path) -> tuple[Path, Path]:
    """The shipped evidence-mini corpus, copied (tests change it), as a lines index: (index, corpus)."""
    corpus = tmp_path / "corpus"
    shutil.copytree(DATASETS / "evidence-mini" / "corpus", corpus)
    path = tmp_path / "evidence.sqlite"
    build(corpus, path, builder="lines", tokenizer="bigram")
    return path, corpus


def cli_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


BAD_SEARCHES = [
    ({"query": ""}, "query is empty"),
    ({"query": "   "}, "query is empty"),
    ({"query": "导" * 100_000}, "100000 characters; the limit is"),
    ({"query": "导出\x00保留"}, "NUL"),
    ({"query": "导出", "limit": 0}, "limit must be an integer from 1 to 20, not 0"),
    ({"query": "导出", "limit": 21}, "limit must be an integer from 1 to 20"),
    ({"query": "导出", "limit": True}, "limit must be an integer"),
    ({"query": "导出", "limit": "5"}, "limit must be an integer"),
    ({"query": "导出", "mode": "near"}, "is not one of: and, or, phrase"),
    ({"query": "导出", "as_of": "2030-01-01"}, "unknown argument 'as_of'"),  # the date is the host's
    ({"query": 42}, "query must be a string"),
    ({"query": "导出", "index": "nope"}, "is not one of"),
    ({"limit": 3}, "missing argument 'query'"),
]


def test_stdio_end_to_end(handbook: Path, evidence_index: tuple[Path, Path], tmp_path: Path) -> None:
    index, corpus = evidence_index
    expected_handbook = cli_json("search", str(handbook), "导出文件保留多久", "--as-of", AS_OF, "--json")
    expected_lines = cli_json("search", str(index), "退款 工作日", "--as-of", AS_OF, "--json", "--limit", "3")

    async def scenario() -> None:
        args = (str(handbook), str(index), "--as-of", AS_OF, "--root", f"evidence={corpus}")
        async with stdio_server(tmp_path / "server.log", *args) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert sorted(listed) == ["list", "list_indexes", "read", "search", "verify"]
            for tool in listed.values():
                assert tool.description and len(tool.description.split()) >= 15
                assert tool.input_schema["type"] == "object" and tool.annotations.read_only_hint
            schema = listed["search"].input_schema
            assert schema["required"] == ["query", "index"] and "as_of" not in schema["properties"]
            assert schema["properties"]["index"]["enum"] == ["handbook", "evidence"]
            assert schema["properties"]["limit"]["maximum"] == 20

            # The server's evidence is the CLI's, field for field.
            assert await call(client, "search", {"query": "导出文件保留多久", "index": "handbook"}) == expected_handbook
            found = await call(client, "search", {"query": "退款 工作日", "index": "evidence", "limit": 3})
            assert found == expected_lines
            assert found["action_authority"] is False and "answer" not in found and found["as_of"] == AS_OF
            hit = found["hits"][0]
            assert {"source_id", "doc_id", "path", "line", "sha256", "snippet", "lexical_score"} <= set(hit)

            for arguments, message in BAD_SEARCHES:
                assert message in await refused(client, "search", {"index": "evidence", **arguments})
            assert "missing argument 'index'" in await refused(client, "search", {"query": "导出"})
            assert "unknown tool 'answer'" in await refused(client, "answer", {"query": "导出"})

            # read: a stored line by key; whole files only under --root, through the traversal guard.
            line = await call(client, "read", {"key": hit["key"], "index": "evidence"})
            assert (line["text"], line["sha256"], line["line"]) == (hit["text"], hit["sha256"], hit["line"])
            assert line["action_authority"] is False
            whole = await call(client, "read", {"key": hit["path"], "index": "evidence"})
            assert whole["text"] == (corpus / hit["path"]).read_text(encoding="utf-8")
            for key in ("../evidence.sqlite", "/etc/passwd", "nope.txt", "nope#L1"):
                assert await refused(client, "read", {"key": key, "index": "evidence"})
            # The evidence corpus is the root of the evidence index only: the handbook reads no whole file.
            assert "--root" in await refused(client, "read", {"key": hit["path"], "index": "handbook"})
            assert "no chunk" in await refused(client, "read", {"key": "nope#L1", "index": "evidence"})

            # verify: ok, then stale when the source changes, then missing when it is gone.
            source = corpus / hit["path"]
            assert (await call(client, "verify", {"key": hit["key"], "index": "evidence"}))["status"] == "ok"
            source.write_text(source.read_text(encoding="utf-8") + "追加 一行\n", encoding="utf-8")
            stale = await call(client, "verify", {"key": hit["key"], "index": "evidence"})
            assert stale["status"] == "stale" and "reads the same" in stale["detail"]
            source.unlink()
            assert (await call(client, "verify", {"key": hit["key"], "index": "evidence"}))["status"] == "missing"
            assert "no chunk" in await refused(client, "verify", {"key": "nope", "index": "evidence"})

            # list: pages that add up to the whole listing.
            first = await call(client, "list", {"index": "handbook", "limit": 150})
            second = await call(client, "list", {"index": "handbook", "offset": first["next_offset"], "limit": 500})
            assert second["next_offset"] is None and first["total"] == second["total"] == 391
            assert len(first["entries"]) + len(second["entries"]) == 391
            documents = await call(client, "list", {"index": "evidence"})
            assert documents["kind"] == "document_list" and documents["total"] == 9
            assert "limit must be an integer from 1 to 500" in await refused(
                client, "list", {"index": "evidence", "limit": 501}
            )

            described = await call(client, "list_indexes", {})
            assert [d["name"] for d in described["indexes"]] == ["handbook", "evidence"]
            assert described["indexes"][0]["chunks"] == 391 and described["indexes"][0]["as_of"] == AS_OF

            # Still serving after every refusal.
            assert await call(client, "search", {"query": "导出文件保留多久", "index": "handbook"}) == expected_handbook

    run(scenario)
    assert "Traceback" not in (tmp_path / "server.log").read_text(encoding="utf-8")


QUERIES = ["导出文件保留多久", "如何重置密码", "发票抬头怎么改", "单点登录", "数据备份", "API 限流"]


def test_http_end_to_end_with_concurrent_clients(handbook: Path, tmp_path: Path) -> None:
    with Index.open(handbook) as opened:
        expected = {q: evidence(opened, q, as_of=AS_OF) for q in QUERIES}

    async def one_client(url: str, offset: int, seen: list[bool]) -> None:
        async with Client(url, read_timeout_seconds=30) as client:
            for number in range(len(QUERIES)):
                query = QUERIES[(number + offset) % len(QUERIES)]
                assert await call(client, "search", {"query": query}) == expected[query]
                seen.append(True)

    async def scenario(url: str) -> None:
        async with Client(url, read_timeout_seconds=30) as client:
            assert sorted(t.name for t in (await client.list_tools()).tools) == [
                "list",
                "list_indexes",
                "read",
                "search",
                "verify",
            ]
            for arguments, message in BAD_SEARCHES[:4]:
                assert message in await refused(client, "search", arguments)
            assert "whole files are read only when the server runs with --root" in await refused(
                client, "read", {"key": "billing/billing-faq.md"}
            )
        seen: list[bool] = []
        async with anyio.create_task_group() as group:
            for offset in range(4):  # four clients at once, each with its own session
                group.start_soon(one_client, url, offset, seen)
        assert len(seen) == 4 * len(QUERIES)

    with http_server(tmp_path / "server.log", str(handbook), "--as-of", AS_OF) as url:
        run(scenario, url)
    assert "Traceback" not in (tmp_path / "server.log").read_text(encoding="utf-8")


def _corpus(root: Path, marker: str) -> Path:
    """A lines corpus whose every line carries ``marker`` (which build answered)."""
    root.mkdir()
    (root / "a.txt").write_text(f"导出 文件 保留 三十 天 {marker}\n导出 记录 {marker}\n", encoding="utf-8")
    manifest = [{"doc_id": "a", "revision": "r1", "status": "current", "expires": None, "path": "a.txt"}]
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root


def test_rebuild_removal_and_damage_while_serving(handbook: Path, tmp_path: Path) -> None:
    old, new = _corpus(tmp_path / "old", "甲版"), _corpus(tmp_path / "new", "乙版")
    live = tmp_path / "live.sqlite"
    build(old, live, builder="lines", tokenizer="bigram")
    rebuilt = threading.Event()

    def rebuild() -> None:
        build(new, live, builder="lines", tokenizer="unigram")  # another tokenizer: the next call must use it
        rebuilt.set()

    async def scenario() -> None:
        async with stdio_server(tmp_path / "server.log", str(live), str(handbook), "--as-of", AS_OF) as client:
            args = {"query": "导出", "index": "live"}
            answers = []
            async with anyio.create_task_group() as group:
                group.start_soon(anyio.to_thread.run_sync, rebuild)
                while not rebuilt.is_set():
                    answers.append(await call(client, "search", args))
            answers.append(await call(client, "search", args))
            for answer in answers:  # never a mixed result: hits and tokenizer come from one build
                marker = "甲版" if answer["index"]["tokenizer"].startswith("bigram") else "乙版"
                assert answer["hits"] and all(marker in hit["text"] for hit in answer["hits"])
            assert answers[-1]["index"]["tokenizer"].startswith("unigram")

            live.unlink()
            assert "live.sqlite" in await refused(client, "search", args)
            build(old, live, builder="lines", tokenizer="bigram")
            assert "甲版" in (await call(client, "search", args))["hits"][0]["text"]

            replacement = tmp_path / "garbage.sqlite"
            replacement.write_bytes(b"not a database" * 100)
            os.replace(replacement, live)
            assert "not a rag-eval index" in await refused(client, "search", args)
            assert await call(client, "search", {"query": "导出", "index": "handbook"})  # the other index serves
            for suffix in ("", "-wal", "-shm"):
                Path(f"{live}{suffix}").unlink(missing_ok=True)
            build(new, live, builder="lines", tokenizer="bigram")
            assert "乙版" in (await call(client, "search", args))["hits"][0]["text"]

    run(scenario)
    assert "Traceback" not in (tmp_path / "server.log").read_text(encoding="utf-8")


def test_evidence_is_the_same_everywhere(evidence_index: tuple[Path, Path]) -> None:
    index, corpus = evidence_index
    from_cli = cli_json("search", str(index), "退款 工作日", "--as-of", AS_OF, "--json")
    with Index.open(index) as opened:
        assert evidence(opened, "退款 工作日", as_of=AS_OF) == from_cli
        assert search_tool(opened, "退款 工作日", as_of=AS_OF) == from_cli
        and_mode = evidence(opened, "退款 工作日", as_of=AS_OF, mode="and", limit=10)
    db = compat.connect(index)
    try:
        assert compat.search_tool(db, "退款 工作日", as_of=AS_OF) == and_mode
        seed_rows = compat.retrieve(db, "退款 工作日", as_of=AS_OF)
    finally:
        db.close()
    # Every field of seed 000's rows is in the evidence hits, with the same value.
    for row, hit in zip(seed_rows, and_mode["hits"], strict=True):
        assert {key: hit[key] for key in row} == row


def test_index_set_reads_verifies_and_guards(evidence_index: tuple[Path, Path], tmp_path: Path) -> None:
    index, corpus = evidence_index
    (tmp_path / "secret.txt").write_text("outside the root", encoding="utf-8")
    served = IndexSet([index], as_of=AS_OF, root=corpus)
    try:
        hit = served.search("退款")["hits"][0]
        assert served.read(hit["key"])["text"] == hit["text"]
        for key in ("../secret.txt", str(tmp_path / "secret.txt"), "a/../../secret.txt"):
            with pytest.raises(ReadError):
                served.read(key)
        assert served.verify(hit["key"])["status"] == "ok"
        page = served.entries(limit=4)
        assert (page["total"], len(page["entries"]), page["next_offset"]) == (9, 4, 4)
        assert served.entries(offset=8)["next_offset"] is None
        with pytest.raises(QueryError, match="offset must be"):
            served.entries(offset=-1)
    finally:
        served.close()
    unrooted = IndexSet([index])
    try:
        assert unrooted.as_of() == time.strftime("%Y-%m-%d", time.gmtime())  # today in UTC when not fixed
        with pytest.raises(ReadError, match="no chunk 'refund-policy.txt'") as refused_read:
            unrooted.read("refund-policy.txt")
        assert "--root" in str(refused_read.value.hint)
    finally:
        unrooted.close()


def test_served_indexes_start_warm(handbook: Path, evidence_index: tuple[Path, Path]) -> None:
    """The impact postings of a small index are read whole at start; an fts5-only index has none to read."""
    plain = evidence_index[0].with_name("plain.sqlite")
    build(DATASETS / "evidence-mini" / "corpus", plain, builder="lines", tokenizer="bigram", engine="fts5")
    served = IndexSet([handbook, plain])
    try:
        with served._open("handbook") as index:
            assert index.meta["engine"] == "impact" and index.postings.complete
        with served._open("plain") as index:
            assert index.meta["engine"] == "fts5" and index.postings is None
        assert served.search("导出", index="handbook")["hits"]
    finally:
        served.close()


def test_a_served_index_rebuilt_in_place_is_warm_again(evidence_index: tuple[Path, Path]) -> None:
    """A sync rewrites the file in place: the next call notices the new build and reads its postings whole,
    once; the calls after it read none."""
    path, corpus = evidence_index
    served = IndexSet([path])
    try:
        with served._open(None) as index:
            first = index.generation
            assert index.postings.complete
        source = corpus / "office-plants.txt"
        source.write_text(source.read_text(encoding="utf-8") + "绿萝九十天换盆一次\n", encoding="utf-8")
        build(corpus, path, builder="lines", tokenizer="bigram")
        hits = served.search("九十天换盆")["hits"]
        assert hits and hits[0]["path"] == "office-plants.txt"
        with served._open(None) as index:
            assert index.generation != first and index.postings.complete
            cache = index.postings
        served.search("导出")
        with served._open(None) as index:
            assert index.postings is cache  # not read again
    finally:
        served.close()


def test_schemas_follow_the_served_indexes(handbook: Path, evidence_index: tuple[Path, Path]) -> None:
    served = IndexSet([handbook])
    try:
        tools = agent_tools(served)
        search = tools["search"]
        assert search.input_schema["properties"]["mode"]["enum"] == list(MODES)
        assert search.input_schema["properties"]["index"]["enum"] == ["handbook"]
        assert check_arguments(search, {"query": "导出", "limit": None}) == {"query": "导出"}
        with pytest.raises(QueryError, match="limit must be an integer from 1 to 20, not 2.0"):
            check_arguments(search, {"query": "导出", "limit": 2.0})
        assert served.search("导出")["index"]["name"] == "handbook"  # one index: no name needed
    finally:
        served.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}"], "missing.sqlite: No such file or directory"),
        (["{handbook}", "--root", "{missing}"], "no such folder"),
        (["{handbook}", "{text}", "--root", "{tmp}"], "several indexes are served"),
        (
            ["{handbook}", "--root", "nope={tmp}", "--root", "{tmp}"],
            "no served index is named 'nope'; served: handbook",
        ),
        (["{handbook}", "--root", "{tmp}", "--root", "{tmp}"], "give one folder for one index"),
        (["{handbook}", "--root", "handbook={tmp}", "--root", "handbook={tmp}"], "given a root twice"),
        (["{handbook}", "--as-of", "2026-1-1"], "use YYYY-MM-DD"),
        (["{handbook}", "{handbook}"], "two indexes are named 'handbook'"),
        (["{handbook}", "--transport", "http", "--port", "{busy}"], "cannot listen on 127.0.0.1:"),
        (["{handbook}", "--transport", "http", "--port", "70000"], "not a port number"),
        (["{text}"], "not a rag-eval index"),
    ],
)
def test_serve_refuses_to_start_with_one_line(handbook: Path, tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "notes.sqlite").write_text("plain text", encoding="utf-8")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        values = {
            "missing": str(tmp_path / "missing.sqlite"),
            "handbook": str(handbook),
            "busy": str(busy.getsockname()[1]),
            "text": str(tmp_path / "notes.sqlite"),
            "tmp": str(tmp_path),
        }
        result = CliRunner().invoke(cli, ["serve", *(a.format(**values) for a in args)])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and message in result.output and "Traceback" not in result.output


def test_removed_index_in_process(evidence_index: tuple[Path, Path]) -> None:
    index, _corpus = evidence_index
    served = IndexSet([index], as_of=AS_OF)
    try:
        index.unlink()
        with pytest.raises(IndexFileError, match="evidence"):
            served.search("退款")
        with pytest.raises(ServeError):
            IndexSet([])
    finally:
        served.close()


HOSTILE = [
    ("search", {"query": "导出\ud800"}, "lone surrogate"),
    ("search", {"query": {"$gt": ""}}, "query must be a string, not dict"),
    ("search", {"query": ["导出"]}, "query must be a string, not list"),
    ("search", {"query": "导出", "category": "a\x00b"}, "category contains a NUL character"),
    ("search", {"query": "导出", "path_prefix": "p" * 5000}, "path_prefix has 5000 characters; the limit is 4096"),
    ("read", {"key": "a\ud800#L1"}, "lone surrogate"),
    ("read", {"key": "\x00"}, "key contains a NUL character"),
    ("verify", {"key": "x" * 5000}, "key has 5000 characters"),
    ("list", {"offset": 10**30}, "offset must be an integer from 0 to 1000000000000"),
    ("list", {"offset": -1}, "offset must be an integer from 0"),
    ("list_indexes", {"verbose": True}, "unknown argument 'verbose'"),
    ("search\n", {}, "unknown tool 'search\\n'"),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "message"), HOSTILE, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(HOSTILE)]
)
def test_hostile_arguments_are_one_line_tool_errors(
    evidence_index: tuple[Path, Path], tool: str, arguments: dict[str, Any], message: str
) -> None:
    from rag_eval.serve.server import run_tool

    index, _corpus = evidence_index
    served = IndexSet([index], as_of=AS_OF)
    try:
        tools = agent_tools(served)
        result, failed = run_tool(tools, tool, arguments)
        assert failed and message in result["error"] and "\n" not in result["error"]
        json.dumps(result, ensure_ascii=False).encode("utf-8")  # what the transport sends must encode
        assert run_tool(tools, "search", {"query": "退款"})[0]["hits"]  # and the next call is answered
    finally:
        served.close()


def test_list_indexes_reports_a_removed_index_beside_the_others(
    handbook: Path, evidence_index: tuple[Path, Path]
) -> None:
    index, _corpus = evidence_index
    served = IndexSet([index, handbook], as_of=AS_OF)
    try:
        index.unlink()
        described = {entry["name"]: entry for entry in served.describe()["indexes"]}
        assert "No such file or directory" in described["evidence"]["error"]
        assert described["handbook"]["chunks"] == 391
    finally:
        served.close()


def test_what_a_call_returns_is_bounded(tmp_path: Path) -> None:
    """A lines index holding long lines: search cuts each hit's text (and says so), read gives the whole line,
    and a whole file or a passage whose text is over the bound as sent (JSON escapes a control character in
    six bytes) is one error, not a 13 MB message."""
    from rag_eval.serve.served import MAX_HIT_CHARS, MAX_READ_BYTES

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    long_line = "退款需要三个工作日。" * 3_000  # 30,000 characters
    entries = []
    for number in range(3):
        (corpus / f"d{number}.txt").write_text(f"{long_line}\n短的一行 退款\n", encoding="utf-8")
        entries.append({"doc_id": f"d{number}", "revision": "r1", "status": "current", "path": f"d{number}.txt"})
    (corpus / "ctrl.txt").write_text("\x01" * 400_000 + " 退款\n", encoding="utf-8")
    entries.append({"doc_id": "ctrl", "revision": "r1", "status": "current", "path": "ctrl.txt"})
    (corpus / "manifest.json").write_text(json.dumps(entries), encoding="utf-8")
    index = tmp_path / "long.sqlite"
    build(corpus, index, builder="lines", tokenizer="bigram")
    served = IndexSet([index], as_of=AS_OF, root=corpus)
    try:
        hits = served.search("退款 工作日", limit=10)["hits"]
        cut = [hit for hit in hits if hit.get("text_truncated")]
        assert cut and all(len(hit["text"]) == MAX_HIT_CHARS and hit["text_chars"] == 30_000 for hit in cut)
        assert all(not hit.get("text_truncated") and len(hit["text"]) < MAX_HIT_CHARS for hit in hits if hit not in cut)
        assert served.read(cut[0]["key"])["text"] == long_line  # the whole line, by its key
        with pytest.raises(ReadError, match="bytes as sent, over the 1,000,000"):
            served.read("ctrl.txt")  # 400 KB on disk, 2.4 MB as JSON
        assert len(json.dumps(served.read("d0.txt"), ensure_ascii=False).encode()) < MAX_READ_BYTES
    finally:
        served.close()


def test_a_section_is_read_by_its_key_or_by_its_path_as_named(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "my notes.md").write_text("# 导出\n\n导出文件保留三十天。\n", encoding="utf-8")
    index = tmp_path / "notes.sqlite"
    build(docs, index, builder="sections", tokenizer="bigram")
    served = IndexSet([index])
    try:
        for key in ("my%20notes.md#导出", "my notes.md#导出"):
            found = served.read(key)
            assert found["key"] == "my%20notes.md#导出" and found["path"] == "my notes.md"
        with pytest.raises(ReadError, match="no chunk 'my notes.md#nope'"):
            served.read("my notes.md#nope")
        with pytest.raises(ReadError, match="key is empty"):
            served.read("")
    finally:
        served.close()


def test_a_long_error_keeps_its_reason() -> None:
    """Messages name the argument first and the reason last: a cut keeps both ends."""
    from rag_eval.serve.server import MESSAGE_CHARS, one_line

    line = one_line(f"{'x' * 4000}: cannot read: File name too long")
    assert len(line) == MESSAGE_CHARS and line.startswith("xxx") and line.endswith("cannot read: File name too long")
    assert one_line("short\nmessage") == "short message"


ROOT = REPO


EVIDENCE = ROOT / "datasets" / "evidence-mini" / "corpus"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two small lines indexes (evidence-mini, bigram), named ``kb`` and ``kb2``; read only."""
    folder = tmp_path_factory.mktemp("indexes")
    for name in ("kb", "kb2"):
        build(EVIDENCE, folder / f"{name}.sqlite", builder="lines", tokenizer="bigram")
    return folder / "kb.sqlite", folder / "kb2.sqlite"


# -- 2. serve --root with an unknown index name -----------------------------------------------------------------


@pytest.mark.parametrize("served", [1, 2])
def test_a_root_for_an_unknown_index_name_says_the_name_is_unknown(
    indexes: tuple[Path, Path], tmp_path: Path, served: int
) -> None:
    """Bug: --root x=DIR said "no such folder" (one index) or "name the index" (two), though x was the name given."""
    paths = list(indexes[:served])
    names = ", ".join(path.stem for path in paths)
    with pytest.raises(ServeError) as raised:
        IndexSet(paths, root=[f"zz={tmp_path}"])
    assert str(raised.value) == f"--root zz={tmp_path}: no served index is named 'zz'; served: {names}"
    # A folder whose whole name holds '=' is still a folder.
    (tmp_path / "x=corpus").mkdir()
    served_set = IndexSet(paths[:1], root=[str(tmp_path / "x=corpus")])
    try:
        assert served_set.root_of(paths[0].stem) == tmp_path / "x=corpus"
    finally:
        served_set.close()


# -- 3. options that do not apply are refused, not ignored -------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"port": 8000}, "--port applies"),
        ({"host": "0.0.0.0"}, "--host applies"),
        ({"host": "::1", "port": 0}, "--host and --port apply"),
    ],
)
def test_serve_refuses_host_and_port_over_stdio(tmp_path: Path, options: dict[str, object], named: str) -> None:
    """Bug: `serve --transport stdio --port 8000` ignored the port (refused before any index is opened)."""
    with pytest.raises(ServeError, match=f"{named} only with --transport http"):
        serve([tmp_path / "missing.sqlite"], transport="stdio", **options)  # type: ignore[arg-type]
    argv = [f"--{key}={value}" for key, value in options.items()]
    result = invoke("serve", tmp_path / "missing.sqlite", "--transport", "stdio", *argv)
    assert result.exit_code == 1 and f"{named} only with --transport http" in one_error(result)


@pytest.fixture(scope="module")
def lines_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped evidence-mini corpus as a lines index (read only here)."""
    path = tmp_path_factory.mktemp("audit") / "evidence.sqlite"
    build(DATASETS / "evidence-mini" / "corpus", path, builder="lines", tokenizer="bigram")
    return path


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


HOSTILE_VALUES = [
    ("search", {"query": "退款", "limit": 10**5000}, "limit must be an integer from 1 to 20, not an integer of more"),
    ("list", {"offset": -(10**5000)}, "offset must be an integer from 0"),
    ("search", {"query": "退款", "limit": _nested(5000)}, "limit must be an integer from 1 to 20, not a list"),
    ("list", {"limit": _nested(5000)}, "limit must be an integer from 1 to 500, not a list"),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "message"), HOSTILE_VALUES, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(HOSTILE_VALUES)]
)
def test_a_value_whose_repr_fails_is_a_tool_error_not_an_internal_error(
    lines_index: Path, tool: str, arguments: dict[str, Any], message: str
) -> None:
    """Bug: the message's repr() of an integer of 5,000 digits raised ValueError, of a list nested 5,000 deep
    RecursionError: 'internal error' and a traceback in the log instead of saying what is wrong."""
    served = IndexSet([lines_index], as_of=AS_OF)
    try:
        result, failed = run_tool(agent_tools(served), tool, arguments)
        assert failed and message in result["error"] and "internal error" not in result["error"]
    finally:
        served.close()


@pytest.mark.parametrize(
    "call",
    [
        lambda served: served.entries(offset=10**5000),
        lambda served: served.entries(limit=_nested(5000)),
        lambda served: served.search("退款", index=["evidence"]),  # unhashable: TypeError from a dict lookup
        lambda served: served.read("x#L1", index={"name": "evidence"}),
    ],
    ids=["huge-offset", "nested-limit", "list-index", "dict-index"],
)
def test_index_set_refuses_hostile_values_with_a_query_error(lines_index: Path, call: Any) -> None:
    """Bug: IndexSet.entries repr'd a hostile offset or limit (ValueError, RecursionError) and a list or dict as
    the index name was a TypeError: the library boundary raised no RagEvalError."""
    served = IndexSet([lines_index], as_of=AS_OF)
    try:
        with pytest.raises(QueryError):
            call(served)
    finally:
        served.close()


def _copy(index: Path, folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    target.write_bytes(index.read_bytes())
    return target


@pytest.mark.parametrize(
    ("folder", "name"),
    [
        ("plain", os.fsdecode(b"\xff\xfe.sqlite")),  # its name is in every schema: tools/list ended the server
        (os.fsdecode(b"d\xff"), "ev.sqlite"),  # its path is in list_indexes: that call ended the server
        ("plain", "new\nline.sqlite"),  # a name agents must send back, and a broken announcement line
    ],
    ids=["name-not-utf8", "folder-not-utf8", "name-with-newline"],
)
def test_an_index_path_that_cannot_be_sent_is_refused_at_start(
    lines_index: Path, tmp_path: Path, folder: str, name: str
) -> None:
    """Bug: an index whose file name or folder was not UTF-8 was served; the first tools/list (or list_indexes)
    could not be encoded and the SDK ended the whole server with a traceback."""
    path = _copy(lines_index, tmp_path / folder, name)
    with pytest.raises(ServeError, match="rename the file"):
        IndexSet([path], as_of=AS_OF)
    result = CliRunner().invoke(cli, ["serve", str(path), "--as-of", AS_OF])
    assert result.exit_code == 1 and result.output.startswith("error: ") and "Traceback" not in result.output


def test_a_root_that_cannot_be_sent_is_refused_at_start(lines_index: Path, tmp_path: Path) -> None:
    """Bug: a --root folder that was not UTF-8 was accepted; errors naming it could not be sent."""
    root = tmp_path / os.fsdecode(b"corpus\xff")
    root.mkdir()
    with pytest.raises(ServeError, match="not valid UTF-8"):
        IndexSet([lines_index], as_of=AS_OF, root=root)


@pytest.mark.parametrize("root", ["", ["evidence="], [""], {"evidence": ""}], ids=["str", "named", "bare", "map"])
def test_an_empty_root_is_refused_not_the_working_directory(lines_index: Path, root: Any) -> None:
    """Bug: --root= (or NAME=) was Path(''), the working directory: every file under it became readable."""
    with pytest.raises(ServeError, match="no folder given"):
        IndexSet([lines_index], as_of=AS_OF, root=root)


def test_an_empty_root_on_the_command_line_is_one_error_line(lines_index: Path) -> None:
    """Bug: `rag-eval serve INDEX --root=` started serving the working directory's files."""
    result = CliRunner().invoke(cli, ["serve", str(lines_index), "--root="])
    assert result.exit_code == 1 and result.output.startswith("error: ") and "no folder given" in result.output


def test_every_tool_error_text_can_be_sent() -> None:
    """Bug: one_line kept a surrogate escape (a path the OS gave as bytes that are not UTF-8), which the SDK
    cannot encode: the error meant for one call would have ended the server."""
    line = one_line(os.fsdecode(b"no file d/\xff.txt") + ": cannot read")
    line.encode("utf-8")
    assert "\\udcff" in line and line.endswith("cannot read")


LONG_DIGITS = "9" * 5000


UNREADABLE_LINES = {
    "lone-surrogate": '{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"search",'
    '"arguments":{"query":"\\ud800x"}}}',
    "huge-integer": '{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"search",'
    f'"arguments":{{"query":"x","limit":{LONG_DIGITS}}}}}}}',
    "nested-too-deep": '{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"search",'
    '"arguments":{"query":"x","limit":' + "[" * 3000 + "]" * 3000 + "}}}",
    "params-not-an-object": '{"jsonrpc":"2.0","id":"ID","method":"tools/call","params":[{"name":"search"}]}',
    "other-method": '{"jsonrpc":"2.0","id":ID,"method":"tools/list","params":{"cursor":"\\ud800"}}',
}


@pytest.mark.parametrize("case", sorted(UNREADABLE_LINES))
def test_a_line_the_sdk_cannot_read_becomes_one_it_answers_with_the_same_id(case: str) -> None:
    """Bug: the SDK's stdio transport drops a request it cannot read (a lone surrogate escape, as JavaScript's
    JSON.stringify writes a cut string; a 5,000-digit number; nesting 3,000 deep) with no answer at all."""
    line = UNREADABLE_LINES[case].replace("ID", "7")
    with pytest.raises(ValueError):
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    repaired = answerable(line)
    message = mcp_types.jsonrpc_message_adapter.validate_json(repaired, by_name=False)
    assert message.id in (7, "7") and message.method == json.loads(repaired)["method"]


def test_a_readable_line_and_a_notification_pass_unchanged() -> None:
    fine = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'
    assert answerable(fine) is fine
    broken_notification = '{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"\\ud800"}}\n'
    assert answerable(broken_notification) == broken_notification  # no id: nothing to answer


class RawStdio:
    """A `rag-eval serve` child spoken to line by line, so that lines no SDK client would write can be sent."""

    def __init__(self, log: Path, *args: str) -> None:
        self.errlog = log.open("w", encoding="utf-8")
        self.child = subprocess.Popen(
            [sys.executable, *server_args(*args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errlog,
            env={**os.environ, **child_env()},
        )
        self.send(
            '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            '"capabilities":{},"clientInfo":{"name":"audit","version":"0"}}}'
        )
        assert self.receive()["id"] == 0
        self.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def send(self, line: str) -> None:
        assert self.child.stdin is not None
        self.child.stdin.write(line.encode("utf-8") + b"\n")
        self.child.stdin.flush()

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        assert self.child.stdout is not None
        ready, _, _ = select.select([self.child.stdout], [], [], timeout)
        assert ready, "no answer: the request was dropped"
        return json.loads(self.child.stdout.readline())

    def close(self) -> None:
        try:
            if self.child.stdin is not None:
                self.child.stdin.close()
            self.child.wait(10)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait(10)
        finally:
            if self.child.stdout is not None:
                self.child.stdout.close()
            self.errlog.close()


def test_unreadable_requests_over_stdio_are_answered_not_left_hanging(lines_index: Path, tmp_path: Path) -> None:
    """Bug: each of these requests got no answer over stdio; the client waited until its own timeout."""
    server = RawStdio(tmp_path / "server.log", str(lines_index), "--as-of", AS_OF)
    try:
        for number, case in enumerate(sorted(UNREADABLE_LINES), start=1):
            server.send(UNREADABLE_LINES[case].replace("ID", str(number)))
            answer = server.receive()
            assert answer["id"] in (number, str(number)), case
            if case == "other-method":
                assert answer["error"]["code"] == -32602
            else:
                text = answer["result"]["content"][0]["text"]
                assert answer["result"]["isError"] and "the request could not be read" in text, text
        server.send(
            '{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"search","arguments":{"query":"退款"}}}'
        )
        assert json.loads(server.receive()["result"]["content"][0]["text"])["hits"]  # still serving
    finally:
        server.close()
    assert "Traceback" not in (tmp_path / "server.log").read_text(encoding="utf-8")


def test_the_unreadable_marker_sent_directly_is_a_plain_tool_error(lines_index: Path) -> None:
    """The rewrite's own argument, sent by a client, is refused like any bad argument, whatever its value."""
    served = IndexSet([lines_index], as_of=AS_OF)
    try:
        tools = agent_tools(served)
        for value in ("why", _nested(5000)):
            result, failed = run_tool(tools, "search", {"rag-eval:unreadable": value, "query": "退款"})
            assert failed and "internal error" not in result["error"]
    finally:
        served.close()
