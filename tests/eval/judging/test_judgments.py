"""The judgments file of ``rag-eval judge`` (issue #13): TREC qrels any tool reads, a log naming the pool,
the assessor and the time of every grade, resume, undo, refusal of another pool's or someone else's file,
and every acknowledged grade kept when the process is killed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import one_error
from helpers.judging import CHEAP, POOL, QUESTIONS, make_change

from rag_eval.cli import cli
from rag_eval.eval.datasets.trec import read_any_qrels, read_trec_qrels
from rag_eval.eval.judging.judgments import Judgments, JudgmentsError, PoolIdentity, log_path
from rag_eval.eval.judging.log_records import JudgmentsWriteError
from rag_eval.eval.judging.pool import plan


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_grades_are_trec_qrels_and_the_log_names_assessor_and_time(tmp_path: Path) -> None:
    path = tmp_path / "out" / "h.qrels"
    with Judgments.open(path, POOL, assessor="ana") as judgments:
        judgments.record("q1", "a.md#x", 2)
        judgments.record("q2", "b.md#y", 0)
        judgments.record("q1", "c.md#z", 1)
    assert lines(path) == ["q1 0 a.md#x 2", "q2 0 b.md#y 0", "q1 0 c.md#z 1"]
    records = [json.loads(line) for line in lines(log_path(path))]
    assert log_path(path).name == "h.qrels.jsonl"
    assert records[0]["format"] == "rag-eval judgments" and records[0]["pool"] == POOL.fingerprint()
    assert records[0]["systems"] == ["bigram", "unigram"] and records[0]["depth"] == 10
    assert [(r["event"], r["query"], r["doc"], r["grade"], r["assessor"]) for r in records[1:]] == [
        ("grade", "q1", "a.md#x", 2, "ana"),
        ("grade", "q2", "b.md#y", 0, "ana"),
        ("grade", "q1", "c.md#z", 1, "ana"),
    ]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["time"]) for r in records[1:])
    assert read_any_qrels(path) == {"q1": {"a.md#x": 2, "c.md#z": 1}, "q2": {"b.md#y": 0}}


def test_rag_eval_evaluate_reads_the_judgments_file(tmp_path: Path) -> None:
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor="") as judgments:
        judgments.record("q1", "a", 2)
        judgments.record("q1", "b", 0)
    run = tmp_path / "x.run"
    run.write_text("q1 Q0 b 1 2.0 x\nq1 Q0 a 2 1.0 x\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["evaluate", str(run), str(path), "--metric", "RR@10", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["all"] == {"RR@10": 0.5}


def test_a_regrade_replaces_and_undo_brings_the_earlier_grade_back(tmp_path: Path) -> None:
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor="") as judgments:
        judgments.record("q1", "a", 2)
        judgments.record("q2", "b", 1)
        judgments.record("q1", "a", 0)
        assert lines(path) == ["q1 0 a 0", "q2 0 b 1"]  # one line per pair: trec_eval refuses duplicates
        assert judgments.history() == [("q1", "a"), ("q2", "b")]  # a re-grade keeps its place
        undone = judgments.undo()
        assert undone is not None and (undone.query_id, undone.doc_id, undone.grade) == ("q1", "a", 0)
        assert read_trec_qrels(path) == {"q1": {"a": 2}, "q2": {"b": 1}}
        judgments.undo()
        judgments.undo()
        assert judgments.undo() is None
        assert path.read_text(encoding="utf-8") == ""


def test_a_restart_resumes_grades_history_and_skips(tmp_path: Path) -> None:
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor="ana") as judgments:
        judgments.record("q1", "a", 2)
        judgments.skip("q1", "b")
        judgments.record("q2", "c", 1)
        judgments.undo()
        judgments.record("q2", "d", 0)
    with Judgments.open(path, POOL, assessor="bo") as judgments:
        assert judgments.grades == {"q1": {"a": 2}, "q2": {"d": 0}}
        assert judgments.history() == [("q1", "a"), ("q2", "d")]
        assert judgments.skipped == {("q1", "b")}
        judgments.record("q1", "b", 1)
        assert judgments.skipped == set()
    assert [json.loads(line).get("assessor") for line in lines(log_path(path))][-1] == "bo"


@pytest.mark.parametrize(
    ("other", "said"),
    [
        (PoolIdentity("d" * 64, POOL.questions, POOL.systems, 10), "the source's passages differ"),
        (PoolIdentity(POOL.corpus, ("q1",), POOL.systems, 10), "the questions differ (2 then, 1 now)"),
        (PoolIdentity(POOL.corpus, POOL.questions, ("bigram",), 10), "the systems differ (bigram, unigram then)"),
        (PoolIdentity(POOL.corpus, POOL.questions, POOL.systems, 20), "the depth differs (10 then, 20 now)"),
    ],
)
def test_judgments_of_another_pool_are_refused_and_left_alone(tmp_path: Path, other: PoolIdentity, said: str) -> None:
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor="") as judgments:
        judgments.record("q1", "a", 2)
    before = (path.read_bytes(), log_path(path).read_bytes())
    with pytest.raises(JudgmentsError, match="belong to another pool") as caught:
        Judgments.open(path, other, assessor="")
    assert said in str(caught.value) and caught.value.hint and "new -o path" in caught.value.hint
    assert (path.read_bytes(), log_path(path).read_bytes()) == before


def test_a_qrels_file_rag_eval_did_not_write_is_never_touched(tmp_path: Path) -> None:
    path = tmp_path / "theirs.qrels"
    path.write_text("q1 0 a 1\n", encoding="utf-8")
    with pytest.raises(JudgmentsError, match="rag-eval did not write it") as caught:
        Judgments.open(path, POOL, assessor="")
    assert caught.value.hint and "new path" in caught.value.hint
    assert path.read_text(encoding="utf-8") == "q1 0 a 1\n" and not log_path(path).exists()


def test_a_second_session_on_the_same_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor=""):
        with pytest.raises(JudgmentsError, match="another rag-eval judge is writing"):
            Judgments.open(path, POOL, assessor="")


def test_bad_grades_and_ids_are_refused(tmp_path: Path) -> None:
    with Judgments.open(tmp_path / "h.qrels", POOL, assessor="") as judgments:
        for grade in (3, -1, True):
            with pytest.raises(JudgmentsError, match="grade must be"):
                judgments.record("q1", "a", grade)
        with pytest.raises(JudgmentsError, match="TREC qrels"):
            judgments.record("q1", "a b", 1)
    assert (tmp_path / "h.qrels").read_text(encoding="utf-8") == ""


def _append(path: Path, record: dict[str, object]) -> None:
    with open(log_path(path), "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def test_a_qrels_file_one_event_behind_its_log_is_brought_up_to_date(tmp_path: Path) -> None:
    """A kill between the log write and the qrels write: the next open finishes the qrels write."""
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor=""):
        pass
    event = {"assessor": "", "time": "2026-01-01T00:00:00Z"}
    _append(path, {"event": "grade", "query": "q1", "doc": "a", "grade": 2} | event)
    with Judgments.open(path, POOL, assessor=""):
        assert lines(path) == ["q1 0 a 2"]
    _append(path, {"event": "grade", "query": "q1", "doc": "a", "grade": 1} | event)
    with Judgments.open(path, POOL, assessor=""):
        assert lines(path) == ["q1 0 a 1"]
    _append(path, {"event": "undo", "query": "q1", "doc": "a"} | event)
    with Judgments.open(path, POOL, assessor=""):
        assert lines(path) == ["q1 0 a 2"]
    path.unlink()  # killed between creating the log and the qrels file
    with Judgments.open(path, POOL, assessor=""):
        assert lines(path) == ["q1 0 a 2"]


def test_a_qrels_file_edited_by_hand_is_refused_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor="") as judgments:
        judgments.record("q1", "a", 2)
        judgments.record("q1", "b", 1)
    path.write_text("q1 0 a 0\n", encoding="utf-8")
    with pytest.raises(JudgmentsError, match="does not match its log"):
        Judgments.open(path, POOL, assessor="")
    assert path.read_text(encoding="utf-8") == "q1 0 a 0\n"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{", r"h\.qrels\.jsonl:2"),
        ('{"event": "grade", "query": "q1", "doc": "a", "grade": 7}', "grade must be one of 0, 1, 2"),
        ('{"event": "undo", "query": "q1", "doc": "zz"}', "not the last grade"),
        ('{"event": "explode", "query": "q1", "doc": "a"}', "unknown event"),
        ('["q1"]', "expected a JSON object"),
    ],
)
def test_a_damaged_log_is_one_error_naming_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor=""):
        pass
    with open(log_path(path), "a", encoding="utf-8") as out:
        out.write(line + "\n")
    with pytest.raises(JudgmentsError, match=message):
        Judgments.open(path, POOL, assessor="")


WRITER = """
import sys
from rag_eval.eval.judging.judgments import Judgments, PoolIdentity
pool = PoolIdentity("c" * 64, ("q1", "q2"), ("bigram", "unigram"), 10)
with Judgments.open(sys.argv[1], pool, assessor="k") as judgments:
    n = 0
    while True:
        query, doc = f"q{n % 2 + 1}", f"d{n % 50}"
        if n % 7 == 6:
            judgments.undo()
        else:
            judgments.record(query, doc, n % 3)
        n += 1
        print(n, flush=True)
"""


def test_kill_9_mid_way_keeps_every_acknowledged_grade(tmp_path: Path) -> None:
    """A writer killed with SIGKILL while grading, re-grading and undoing as fast as it can: the qrels file
    parses, and once opened again it holds exactly the grades of every acknowledged step."""
    path = tmp_path / "h.qrels"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    assert writer.stdout is not None
    acknowledged = 0
    try:
        for line in writer.stdout:
            acknowledged = int(line)
            if acknowledged >= 120:
                break
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        writer.stdout.close()
    assert acknowledged >= 120
    read_trec_qrels(path)  # parses as it was left, one line per pair
    expected: list[tuple[str, str, int]] = []
    for n in range(acknowledged):
        if n % 7 == 6:
            expected.pop()
        else:
            expected.append((f"q{n % 2 + 1}", f"d{n % 50}", n % 3))
    with Judgments.open(path, POOL, assessor="") as judgments:
        grades = judgments.grades
        # the writer may have finished one more step after its last acknowledgement
        allowed = [expected]
        n = acknowledged
        allowed.append(expected[:-1] if n % 7 == 6 else [*expected, (f"q{n % 2 + 1}", f"d{n % 50}", n % 3)])
        as_grades = []
        for events in allowed:
            state: dict[str, dict[str, int]] = {}
            for query, doc, grade in events:
                state.setdefault(query, {})[doc] = grade
            as_grades.append(state)
        assert grades in as_grades
    assert read_trec_qrels(path) == grades


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
