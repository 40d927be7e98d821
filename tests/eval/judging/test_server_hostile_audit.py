"""Hostile requests to the judging server (audit 4): each test names the defect it guards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.judging import Running as ServerInThread

from rag_eval.eval.datasets.trec import read_trec_qrels


class Running(ServerInThread):
    """test_judge_inputs' server in a thread, with its log lines kept and JSON helpers for state and grades."""

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
