"""The judging server (``rag-eval judge`` while it serves): its page holds data only as text, and hostile requests
(made-up positions, a client hanging up, connections that never finish, control characters, a second Host or
Origin, a body not read as declared, a malformed request line) are answered or closed, never a traceback or a
wrong grade."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers.judging import Running as ServerInThread
from helpers.judging import Server
from helpers.pages import Page

from rag_eval.eval.datasets.trec import read_trec_qrels
from rag_eval.eval.judging.server import JudgeServer

# -- the judging page ---------------------------------------------------------------------------------------


def test_the_judging_page_shows_a_hostile_dataset_and_system_names_as_text() -> None:
    """The only data the page's HTML holds (dataset id, system names) is text; its script holds no data at all."""
    hostile = "</script><script>alert(1)</script>\" ' \u2028\u2029 \\ </textarea>"
    server = JudgeServer.__new__(JudgeServer)
    server.session = SimpleNamespace(  # type: ignore[assignment]
        pool=SimpleNamespace(systems={hostile: None, "bigram": None}, dataset=SimpleNamespace(id=hostile))
    )
    page = server.page("NONCE")
    parsed = Page(page)
    assert parsed.tags.count("script") == 1
    assert "".join(parsed.text).count(hostile) >= 2
    script = page.split("<script", 1)[1].split("</script>", 1)[0]
    assert "alert" not in script and "textarea" not in script


class Running(ServerInThread):
    """helpers.judging's server in a thread, with its log lines kept and JSON helpers for state and grades."""

    def __init__(self, output: Path) -> None:
        super().__init__(output)
        self.output = output
        self.lines: list[str] = []
        self.server.log = self.lines.append

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:  # type: ignore[override]
        status, _headers, answer = super().request(method, path, body)
        return status, answer

    def state(self, at: int | None = None) -> dict[str, Any]:
        status, body = self.request("GET", "/api/state" if at is None else f"/api/state?at={at}")
        assert status == 200
        return json.loads(body)

    def grade(self, query: str, doc: str, grade: int, at: int | None = None) -> tuple[int, dict[str, Any]]:
        data: dict[str, Any] = {"query": query, "doc": doc, "grade": grade}
        if at is not None:
            data["at"] = at
        status, body = self.request("POST", "/api/grade", json.dumps(data).encode())
        return status, json.loads(body)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    server = Running(tmp_path / "audit.qrels")
    yield server
    server.stop()


def _pair(state: dict[str, Any]) -> tuple[str, str]:
    return state["item"]["query"], state["item"]["doc"]


@pytest.mark.parametrize("at", ["%C2%B2", "%E2%91%A0", "%C2%B9%C2%B2"])
def test_a_non_ascii_digit_position_is_ignored_not_a_dropped_connection(running: Running, at: str) -> None:
    """Bug: ?at=² passed str.isdigit, int() raised ValueError, the connection closed with no answer."""
    status, body = running.request("GET", f"/api/state?at={at}")
    assert status == 200 and json.loads(body)["position"] is None
    assert not [line for line in running.lines if "internal error" in line]


def test_a_grade_at_a_made_up_position_is_a_conflict_not_a_new_grade(running: Running) -> None:
    """Bug: a grade with `at` past the history was recorded as a new grade, skipping the second-tab check."""
    pair = _pair(running.state())
    status, body = running.grade(*pair, 2, at=10**6)
    assert status == 409 and "error" in body
    assert read_trec_qrels(running.output) == {} and running.judgments.events == []


def test_a_grade_whose_position_holds_another_passage_is_a_conflict(running: Running) -> None:
    """Bug: `at` naming another passage's place let a stale page grade a pair as if from history."""
    first = _pair(running.state())
    assert running.grade(*first, 1)[0] == 200
    second = _pair(running.state())
    status, _ = running.grade(*second, 2, at=0)  # position 0 holds `first`, not `second`
    assert status == 409
    assert read_trec_qrels(running.output) == {first[0]: {first[1]: 1}}
    # a page still showing `first` at position 0 after another tab undid it: refused, not re-recorded
    assert running.request("POST", "/api/undo", b"{}")[0] == 200
    assert running.grade(*first, 2, at=0)[0] == 409
    assert read_trec_qrels(running.output) == {}
    # the re-grade the page makes from history still works
    assert running.grade(*first, 1)[0] == 200
    assert running.grade(*first, 0, at=0)[0] == 200
    assert read_trec_qrels(running.output) == {first[0]: {first[1]: 0}}


def test_a_client_hanging_up_mid_answer_is_no_traceback(running: Running, capsys: pytest.CaptureFixture[str]) -> None:
    """Bug: a page closed before its answer was written printed socketserver's traceback on stderr."""
    for exc in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe")):
        try:
            raise exc
        except OSError:
            running.server.httpd.handle_error(None, ("127.0.0.1", 0))
    try:
        raise ValueError("a bug")
    except ValueError:
        running.server.httpd.handle_error(None, ("127.0.0.1", 0))
    assert capsys.readouterr().err == ""
    assert running.lines == ["judge: internal error: ValueError: a bug"]


def test_a_deleted_judgments_file_says_how_to_go_on_and_a_restart_mends_it(tmp_path: Path) -> None:
    """Left by the audit: with the qrels file deleted mid-session every grade got a 500 that did not say a
    restart rebuilds the file from its log. The answer and the server's log line now say so, and it does."""
    path = tmp_path / "audit.qrels"
    first = Running(path)
    try:
        pair = _pair(first.state())
        assert first.grade(*pair, 2)[0] == 200
        path.unlink()
        nxt = _pair(first.state())
        status, answer = first.grade(*nxt, 1)
        assert status == 500
        assert "not recorded" in answer["error"] and "run the same command again" in answer["error"]
        assert [line for line in first.lines if line.startswith("judge: not saved:")] == [
            f"judge: not saved: {answer['error']}"
        ]
    finally:
        first.stop()
    second = Running(path)  # the same command again
    try:
        assert read_trec_qrels(path) == {pair[0]: {pair[1]: 2}}
        assert second.grade(*nxt, 1)[0] == 200
        expected: dict[str, dict[str, int]] = {pair[0]: {pair[1]: 2}}
        expected.setdefault(nxt[0], {})[nxt[1]] = 1
        assert read_trec_qrels(path) == expected
    finally:
        second.stop()


#: What the test servers close a silent connection after, in seconds.
REQUEST_TIMEOUT = 0.5


#: C0, DEL and C1 control characters.
CONTROLS = {chr(code) for code in [*range(0x20), *range(0x7F, 0xA0)]}


class Live(ServerInThread):
    """helpers.judging's server in a thread, bound with a short request timeout, its log lines kept."""

    def __init__(self, output: Path) -> None:
        super().__init__(output, request_timeout=REQUEST_TIMEOUT)

    def raw(self, data: bytes, *, half_close: bool = False) -> bytes:
        """Send ``data`` as it is; everything the server answers until it closes (the client waits 10 s at most)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as connection:
            connection.sendall(data)
            if half_close:
                connection.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
            return answer

    def graded(self) -> tuple[str, str]:
        """Grade the passage on show 2 through the page's API; its (query, doc)."""
        item = self.session.state()["item"]
        status, _ = self.post("/api/grade", {"query": item["query"], "doc": item["doc"], "grade": 2})
        assert status == 200
        return item["query"], item["doc"]


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    server = Live(tmp_path / "kb.qrels")
    yield server
    server.stop()


def _headers(*lines: str) -> bytes:
    return "".join(f"{line}\r\n" for line in lines).encode()


@pytest.mark.kill
def test_sigterm_stops_the_server_cleanly_with_its_summary(tmp_path: Path) -> None:
    """Bug: SIGTERM (kill, a service manager) was reported as Ctrl-C, "stopped (interrupted)" (and before the
    command line raised it in the main thread, it ended the server at once, status -15, with no summary)."""
    server = Server(tmp_path / "kb.qrels")
    try:
        headers = {"X-Judge-Token": server.token, "Content-Type": "application/json"}
        item = json.loads(_ask(server.port, "GET", "/api/state", headers)[1])["item"]
        body = json.dumps({"query": item["query"], "doc": item["doc"], "grade": 1})
        assert _ask(server.port, "POST", "/api/grade", headers, body)[0] == 200
    finally:
        server.process.send_signal(signal.SIGTERM)
        try:
            _, err = server.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # never left behind
            server.process.kill()
            _, err = server.process.communicate()
    assert server.process.returncode == 0, err
    assert "stopped (terminated); 1 of " in err and server.token not in err and "Traceback" not in err
    assert read_trec_qrels(tmp_path / "kb.qrels") == {item["query"]: {item["doc"]: 1}}


def _ask(port: int, method: str, path: str, headers: dict[str, str], body: str | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body, headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


# -- hostile requests ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sent", ["request line", "headers", "body"])
def test_a_connection_that_never_finishes_its_request_is_closed(live: Live, sent: str) -> None:
    """Bug: no timeout: a connection that stopped sending mid-request (or never sent the body its Content-Length
    promised) held a thread and a descriptor for as long as the server ran; enough of them starve it."""
    partial = {
        "request line": b"GET /api/sta",
        "headers": _headers("GET /api/state HTTP/1.1", f"Host: 127.0.0.1:{live.port}"),
        "body": _headers(
            "POST /api/undo HTTP/1.1",
            f"Host: 127.0.0.1:{live.port}",
            f"X-Judge-Token: {live.server.token}",
            "Content-Type: application/json",
            "Content-Length: 100",
            "",
        ),
    }[sent]
    started = time.monotonic()
    answer = live.raw(partial)  # the client gives up after 10 s: a hang fails here
    assert time.monotonic() - started < 5
    if sent == "body":
        assert answer.startswith(b"HTTP/1.0 400") and b"did not arrive within 0.5 s" in answer, live.lines
    assert live.session.state()["item"] is not None  # the server answers on


@pytest.mark.parametrize(
    "request_line",
    [
        "GET /\x1b[2J\x1b]0;owned\x07 HTTP/1.1",  # refused: no token
        "GET /api/\x1b[31mstate\x9b HTTP/1.1",  # not found
        "PUT /\x1b[1A\x1b[2K HTTP/1.1",  # a method not served
    ],
)
def test_control_characters_of_a_request_reach_the_log_escaped(live: Live, request_line: str) -> None:
    """Bug: the server's log line printed the request's path as sent, so anyone who could reach the port
    (no token needed) could clear the assessor's terminal, retitle it or overwrite a line with escape codes."""
    token = "" if "owned" in request_line else f"X-Judge-Token: {live.server.token}"
    answer = live.raw((request_line + f"\r\nHost: 127.0.0.1:{live.port}\r\n{token}\r\n\r\n").encode("latin-1"))
    assert answer.startswith(b"HTTP/1.0 4")
    assert live.lines and not [line for line in live.lines if CONTROLS & set(line)], live.lines
    assert "\\x1b" in live.lines[-1]


@pytest.mark.parametrize(
    ("method", "twice"),
    [("GET", "Host: evil.example"), ("POST", "Origin: http://evil.example"), ("POST", "Origin: null")],
)
def test_a_second_host_or_origin_header_is_refused(live: Live, method: str, twice: str) -> None:
    """Bug: only the first Host and Origin headers were checked, so a request naming 127.0.0.1 first and another
    site second was served (RFC 9112 asks a server to refuse two Host lines)."""
    pair = live.graded()
    port = live.port
    first = f"Host: 127.0.0.1:{port}" if twice.startswith("Host") else f"Origin: http://127.0.0.1:{port}"
    lines = [f"{method} {'/api/state' if method == 'GET' else '/api/undo'} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines = [lines[0], first, twice] if twice.startswith("Host") else [*lines, first, twice]
    lines += [f"X-Judge-Token: {live.server.token}", "Content-Type: application/json", "Content-Length: 2", ""]
    answer = live.raw(_headers(*lines) + b"{}")
    assert answer.startswith(b"HTTP/1.0 403"), answer[:200]
    assert read_trec_qrels(live.output) == {pair[0]: {pair[1]: 2}}


@pytest.mark.parametrize("body", ["chunked", "cut short"])
def test_a_body_not_read_as_declared_is_never_acted_on(live: Live, body: str) -> None:
    """Bug: a chunked body (no Content-Length) was read as no body, and a body cut short by the client was taken
    as it came: both ran as the request `{}`, which for /api/undo withdrew the last grade."""
    pair = live.graded()
    head = ["POST /api/undo HTTP/1.1", f"Host: 127.0.0.1:{live.port}", f"X-Judge-Token: {live.server.token}"]
    head.append("Content-Type: application/json")
    if body == "chunked":
        answer = live.raw(_headers(*head, "Transfer-Encoding: chunked", "", "2", "{}", "0", "", ""))
        said = b"Transfer-Encoding is not supported"
    else:
        answer = live.raw(_headers(*head, "Content-Length: 10", "") + b"{}", half_close=True)
        said = b"cut short (2 of 10 bytes)"
    assert answer.startswith(b"HTTP/1.0 400") and said in answer, answer[:300]
    assert read_trec_qrels(live.output) == {pair[0]: {pair[1]: 2}} and live.judgments.grades == {pair[0]: {pair[1]: 2}}


@pytest.mark.parametrize("request_line", ["GET / HTTP/x", "GET / HTTP/1.1 extra", "GET"])
def test_a_malformed_request_line_is_answered_not_an_internal_error(live: Live, request_line: str) -> None:
    """Bug: the request log read the path http.server had not parsed yet, so a malformed request line got no
    answer at all (the connection dropped) and the log said "internal error: AttributeError"."""
    answer = live.raw(f"{request_line}\r\nHost: 127.0.0.1:{live.port}\r\n\r\n".encode())
    assert b"Bad request" in answer, answer
    assert live.lines and not [line for line in live.lines if "internal error" in line], live.lines
