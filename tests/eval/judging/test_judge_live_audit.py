"""``rag-eval judge`` while it serves (audit): the judgments file changed by hand or held by a second session, a pool
whose questions were reworded, a log grown past what a restart reads, SIGTERM, and hostile requests (connections
that never finish, control characters for the terminal, a second Host or Origin, a body not read as declared).
Each test names the defect it guards."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import one_error
from helpers.judging import CHEAP, POOL, QUESTIONS, Running, Server, make_change

from rag_eval.cli import cli
from rag_eval.eval.datasets.trec import read_trec_qrels
from rag_eval.eval.judging import durable_writes
from rag_eval.eval.judging import judgments as judgments_module
from rag_eval.eval.judging.judgments import Judgments, PoolIdentity, log_path
from rag_eval.eval.judging.log_records import JudgmentsWriteError
from rag_eval.eval.judging.pool import plan

#: What the test servers close a silent connection after, in seconds.
REQUEST_TIMEOUT = 0.5
#: C0, DEL and C1 control characters.
CONTROLS = {chr(code) for code in [*range(0x20), *range(0x7F, 0xA0)]}


class Live(Running):
    """test_judge_inputs' server in a thread, bound with a short request timeout, its log lines kept."""

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


# -- the pool -------------------------------------------------------------------------------------------------


def _jsonl(path: Path, texts: dict[str, str]) -> Path:
    lines = (json.dumps({"_id": key, "text": text}, ensure_ascii=False) + "\n" for key, text in texts.items())
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_reworded_questions_with_the_same_ids_are_another_pool(tmp_path: Path) -> None:
    """Bug: the pool named its questions by id only, so a queries.jsonl whose question q1 was reworded resumed the
    judgments made for the old wording, and the old grades counted for the new question."""
    questions = _jsonl(tmp_path / "q.jsonl", {"q1": "退款多久到账？", "q2": "Café 会员的发票怎么开？"})
    out = tmp_path / "kb.qrels"
    *_, identity = plan("handbook", questions, tokenizers=["bigram"])
    with Judgments.open(out, identity, assessor="") as judgments:
        judgments.record("q1", "accounts/invite-members.md#邀请成员", 2)
    before = out.read_bytes(), log_path(out).read_bytes()
    _jsonl(questions, {"q1": "怎么删除账号？", "q2": "Café 会员的发票怎么开？"})
    # --idle-timeout: should the pool be accepted, the server stops by itself within seconds.
    args = ["judge", "handbook", "--queries", str(questions), "-t", "bigram", "-o", str(out), "--idle-timeout", "0.05"]
    result = CliRunner().invoke(cli, args)
    error = one_error(result)
    assert "belong to another pool: the questions' texts differ (the same ids, reworded)" in error
    assert (out.read_bytes(), log_path(out).read_bytes()) == before
    # The same texts, written in another Unicode normal form, are the same questions.
    nfd = {"q1": "退款多久到账？", "q2": unicodedata.normalize("NFD", "Café 会员的发票怎么开？")}
    assert nfd["q2"] != "Café 会员的发票怎么开？"
    *_, same = plan("handbook", _jsonl(questions, nfd), tokenizers=["bigram"])
    assert same == identity
    # A log written before the texts were part of the pool (no question_texts in its header) still resumes.
    header, *events = log_path(out).read_text(encoding="utf-8").splitlines(keepends=True)
    older = json.loads(header)
    del older["question_texts"]
    older["pool"] = PoolIdentity(identity.corpus, identity.questions, identity.systems, 10).fingerprint()
    log_path(out).write_text(json.dumps(older, ensure_ascii=False) + "\n" + "".join(events), encoding="utf-8")
    assert [grade.grade for grade in Judgments.check(out, identity)] == [2]


# -- the judgments file while judging ----------------------------------------------------------------------------


def _edit(path: Path, how: str) -> None:
    text = path.read_text(encoding="utf-8")
    if how == "rewritten in place":
        with open(path, "r+", encoding="utf-8") as out:
            out.write(text.replace(" 2\n", " 0\n", 1))
    elif how == "replaced, as an editor saves":
        path.unlink()
        path.write_text(text + "q9 0 mine.md#x 2\n", encoding="utf-8")
    else:
        with open(path, "a", encoding="utf-8") as out:
            out.write("q9 0 mine.md#x 2\n")


@pytest.mark.parametrize("change", ["new pair", "regrade", "undo"])
@pytest.mark.parametrize("how", ["rewritten in place", "replaced, as an editor saves", "a line added"])
def test_a_judgments_file_edited_by_hand_while_judging_is_never_written_over(
    tmp_path: Path, change: str, how: str
) -> None:
    """Bug: a line the assessor added or changed by hand while the server ran was silently dropped by the next
    re-grade or undo (the file is rewritten from the log), and a new grade was appended to the edited file."""
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor="") as judgments:
        judgments.record("q1", "a", 2)
        judgments.record("q2", "b", 1)
        ours, log_before = path.read_bytes(), log_path(path).read_bytes()
        _edit(path, how)
        edited = path.read_bytes()
        with pytest.raises(JudgmentsWriteError, match="changed by another program while judging") as caught:
            make_change(judgments, change)
        assert "was not recorded" in str(caught.value) and caught.value.hint and "h.qrels.jsonl" in caught.value.hint
        assert path.read_bytes() == edited and log_path(path).read_bytes() == log_before
        assert judgments.grades == {"q1": {"a": 2}, "q2": {"b": 1}}
        path.unlink()
        path.write_bytes(ours)  # put back as rag-eval wrote it (a new file): judging goes on
        judgments.record("q1", "c", 1)
    assert read_trec_qrels(path) == {"q1": {"a": 2, "c": 1}, "q2": {"b": 1}}


def test_a_log_changed_in_place_while_judging_is_not_written_to(tmp_path: Path) -> None:
    """Bug: a line added to the log in place while judging (the same file, so the replaced-log check passed) got
    the next grades appended after it, and the same command then refused the log it had written."""
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor="") as judgments:
        judgments.record("q1", "a", 2)
        ours = log_path(path).read_bytes()
        with open(log_path(path), "a", encoding="utf-8") as out:
            out.write("my note\n")
        for change in (lambda: judgments.record("q2", "b", 1), judgments.undo, lambda: judgments.skip("q2", "b")):
            with pytest.raises(JudgmentsWriteError, match=r"h\.qrels\.jsonl: changed by another program"):
                change()
        assert log_path(path).read_bytes() == ours + b"my note\n" and judgments.grades == {"q1": {"a": 2}}
        log_path(path).write_bytes(ours)  # put back: judging goes on
        judgments.record("q2", "b", 1)
    with Judgments.open(path, POOL, assessor="") as judgments:
        assert judgments.grades == {"q1": {"a": 2}, "q2": {"b": 1}}


def test_a_second_judge_on_the_same_file_is_refused_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: a second `rag-eval judge` on a file another one was judging into built every index first (minutes on
    a large source) and was refused only when it came to open the file."""
    out = tmp_path / "kb.qrels"
    *_, identity = plan("handbook", QUESTIONS, tokenizers=["bigram", "unigram"])

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the pool was built before the second session was refused")

    monkeypatch.setattr("rag_eval.eval.judging.judge.build_pool", refuse)
    with Judgments.open(out, identity, assessor="") as judgments:
        judgments.record(identity.questions[0], "accounts/invite-members.md#邀请成员", 2)
        before = out.read_bytes(), log_path(out).read_bytes()
        result = CliRunner().invoke(
            cli, ["judge", "handbook", "--queries", str(QUESTIONS), *CHEAP, "-o", str(out), "--idle-timeout", "0.05"]
        )
        assert "another rag-eval judge is writing this file" in one_error(result)
        assert (out.read_bytes(), log_path(out).read_bytes()) == before
    assert len(Judgments.check(out, identity)) == 1  # once that session ends, the file is free again


def test_the_log_never_grows_past_what_a_restart_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: grades were acknowledged past the log's read limit, and the same command then refused the log
    ("over the limit"), so acknowledged grades could not be resumed."""
    # The limit is looked up where the log is read back (judgments) and where it is appended to (durable_writes).
    monkeypatch.setattr(judgments_module, "MAX_LOG_BYTES", 2_000)
    monkeypatch.setattr(durable_writes, "MAX_LOG_BYTES", 2_000)
    path = tmp_path / "h.qrels"
    acknowledged: dict[str, dict[str, int]] = {}
    with Judgments.open(path, POOL, assessor="") as judgments:
        with pytest.raises(JudgmentsWriteError, match=r"h\.qrels\.jsonl: reached its limit of 2,000 bytes"):
            for number in range(40):
                judgments.record("q1", f"d{number}", number % 3)
                acknowledged.setdefault("q1", {})[f"d{number}"] = number % 3
        assert log_path(path).stat().st_size <= 2_000
    with Judgments.open(path, POOL, assessor="") as judgments:
        assert judgments.grades == acknowledged and read_trec_qrels(path) == acknowledged


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
