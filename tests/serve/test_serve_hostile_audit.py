"""Hostile input to `rag-eval serve` (audit): each test names the defect it guards."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from click.testing import CliRunner
from helpers.serve import AS_OF, DATASETS, child_env, server_args

from rag_eval.cli import cli
from rag_eval.errors import QueryError, ServeError
from rag_eval.index.writer import build
from rag_eval.serve.agent_tools import agent_tools
from rag_eval.serve.served import IndexSet
from rag_eval.serve.server import answerable, one_line, run_tool


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
