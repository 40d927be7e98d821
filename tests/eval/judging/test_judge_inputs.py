"""``rag-eval judge``'s inputs and failures at its edges: options out of range (depth, seed, idle timeout), output
paths, an empty pool, write errors while the page grades, torn last lines after a crash, HTTP methods and
headers the server does not serve, and the wording of its messages."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import REPO, invoke, one_error
from helpers.judging import CHEAP, POOL, QUESTIONS, Running, make_change

from rag_eval.cli import cli
from rag_eval.errors import RagEvalError
from rag_eval.eval.datasets.trec import read_trec_qrels
from rag_eval.eval.judging.judge import check_idle_timeout
from rag_eval.eval.judging.judgments import Judgments, JudgmentsError, PoolIdentity, log_path
from rag_eval.eval.judging.log_records import JudgmentsWriteError
from rag_eval.eval.judging.pool import plan
from rag_eval.eval.judging.selection import SelectionError, Selector
from rag_eval.eval.judging.server import JudgeServer
from rag_eval.eval.judging.settle import PRIOR, fit_logistic
from rag_eval.index.store import RagEvalWarning

ROOT = REPO
#: The handbook's example questions and their judgments, for the oracle.
EXAMPLES = ROOT / "docs" / "examples" / "handbook-questions.txt"
EXAMPLE_QRELS = ROOT / "docs" / "examples" / "handbook-questions.qrels"


@pytest.fixture
def no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the pool is built: every refusal here comes before any work."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the pool was built before the input was refused")

    monkeypatch.setattr("rag_eval.eval.judging.judge.build_pool", refuse)


# -- options out of range ------------------------------------------------------------------------------------


def test_a_depth_over_1000_is_refused_before_anything_is_built(tmp_path: Path, no_build: None) -> None:
    """Regression: --depth 100000000 was accepted, and the selector then looped that many ranks per question."""
    with pytest.raises(RagEvalError, match="--depth must be a whole number from 1 to 1000, not 1001"):
        plan("handbook", QUESTIONS, tokenizers=["bigram"], depth=1001)
    out = tmp_path / "x.qrels"
    result = invoke("judge", "handbook", "--queries", str(QUESTIONS), *CHEAP, "--depth", "100000000", "-o", str(out))
    assert "not 100000000" in one_error(result)
    assert list(tmp_path.iterdir()) == []


SELECTOR_DEPTH = """
from rag_eval.eval.judging.selection import Selector
runs = {"a": {"q1": ["d1", "d2"]}, "b": {"q1": ["d2", "d3"]}}
print(Selector(runs, depth=10**12).pool == Selector(runs, depth=10).pool)
"""


def test_the_selector_walks_the_runs_not_the_depth() -> None:
    """Regression: the selector looped range(depth) per query, forever for a depth of 10**12."""
    done = subprocess.run([sys.executable, "-c", SELECTOR_DEPTH], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr


@pytest.mark.parametrize("method", ["decisive", "naive"])
def test_a_negative_seed_is_one_error_line_before_any_work(method: str, no_build: None) -> None:
    """Regression: --oracle --seed -1 ended in numpy's traceback (expected non-negative integer)."""
    oracle = ["--oracle", str(EXAMPLE_QRELS), "--samples", "0", "--seed", "-1", "--method", method]
    result = invoke("judge", "handbook", "--queries", str(EXAMPLES), *CHEAP, *oracle)
    assert "--seed must be a whole number of at least 0, not -1" in one_error(result)
    with pytest.raises(SelectionError, match="seed must be a whole number of at least 0"):
        Selector({"a": {"q1": ["d1"]}}, seed=-1)


@pytest.mark.parametrize("minutes", ["-1", "nan", "-inf"])
def test_a_negative_or_nan_idle_timeout_is_refused(tmp_path: Path, minutes: str, no_build: None) -> None:
    """Regression: --idle-timeout -1, nan and -inf were taken silently as "never stop"."""
    out = tmp_path / "x.qrels"
    result = invoke(
        "judge", "handbook", "--queries", str(QUESTIONS), *CHEAP, "-o", str(out), f"--idle-timeout={minutes}"
    )
    assert f"--idle-timeout must be a number of minutes of at least 0 (0: never stop), not {minutes}" in one_error(
        result
    )
    assert list(tmp_path.iterdir()) == []


def test_an_idle_timeout_of_0_or_inf_never_stops_and_help_says_so() -> None:
    assert check_idle_timeout(0.0) is None and check_idle_timeout(float("inf")) is None
    assert check_idle_timeout(None) is None and check_idle_timeout(90.0) == 90.0
    help_text = " ".join(CliRunner().invoke(cli, ["judge", "--help"]).output.split())
    assert "0 never stops" in help_text


# -- output paths ----------------------------------------------------------------------------------------------


def test_an_output_inside_a_file_is_refused_before_any_work(tmp_path: Path, no_build: None) -> None:
    """Regression: -o FILE/x.qrels failed only when the file was opened ("File exists"), the oracle's -o after
    the whole replay."""
    blocker = tmp_path / "q.txt"
    blocker.write_text("not a folder\n", encoding="utf-8")
    for args in (
        ["-o", str(blocker / "x.qrels")],
        ["--oracle", str(EXAMPLE_QRELS), "--samples", "0", "-o", str(blocker / "r.json")],
    ):
        result = invoke("judge", "handbook", "--queries", str(EXAMPLES), *CHEAP, *args)
        assert f"cannot create it: {blocker} is not a folder" in one_error(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.txt"]


def test_an_output_that_is_a_folder_is_called_a_folder(tmp_path: Path, no_build: None) -> None:
    """Regression: -o FOLDER said "(no FOLDER.jsonl beside it)", as if it were someone else's qrels file."""
    folder = tmp_path / "out"
    folder.mkdir()
    result = invoke("judge", "handbook", "--queries", str(QUESTIONS), *CHEAP, "-o", str(folder))
    assert "out: is a folder" in one_error(result) and ".jsonl" not in result.stderr
    assert f"hint: name a file in it, e.g. -o {folder / 'kb.qrels'}" in result.stderr


def test_an_empty_output_hints_at_a_judgments_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_build: None
) -> None:
    """Regression: -o "" hinted "e.g. -o out/report", a report folder, for the judgments file."""
    monkeypatch.chdir(tmp_path)
    result = invoke("judge", "handbook", "--queries", str(QUESTIONS), *CHEAP, "-o", "")
    one_error(result)
    assert "hint: name the judgments file, e.g. -o out/kb.qrels" in result.stderr
    result = invoke("judge", "handbook", "--queries", str(EXAMPLES), *CHEAP, "--oracle", str(EXAMPLE_QRELS), "-o", "")
    one_error(result)
    assert "e.g. -o replay.json" in result.stderr


# -- an empty pool and the decision before any grade ------------------------------------------------------------


def test_a_pool_of_no_passage_is_one_error_line_and_no_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: when no system found a passage, a server started to judge "0 of 0"."""
    questions = tmp_path / "q.txt"
    questions.write_text("qwxzvk\n", encoding="utf-8")

    def no_serve(*_args: object, **_kwargs: object) -> str:
        raise AssertionError("a server was started for an empty pool")

    monkeypatch.setattr(JudgeServer, "serve", no_serve)
    out = tmp_path / "out" / "x.qrels"
    result = invoke("judge", "handbook", "--queries", str(questions), "-t", "bigram", "-o", str(out))
    assert "nothing to judge: no system found a passage for the question" in one_error(result)
    assert not out.parent.exists()


def test_before_any_grade_the_line_names_no_leader() -> None:
    """Regression: with 0 grades the line said "leader bigram, 0.005 nDCG@10 ahead" while the words said level."""
    runs = {"a": {"q1": ["d1", "d2"], "q2": ["d3"]}, "b": {"q1": ["d2", "d4"], "q2": ["d5", "d3"]}}
    selector = Selector(runs)
    line = selector.decision().line()
    assert line.startswith("no grades yet: too early to tell which system is best;") and "leader" not in line
    assert line.endswith(f"0 of {selector.decision().pooled} judged")
    selector.record("q1", "d1", 2)
    assert selector.decision().line().startswith("leader ")


# -- write errors while grading ---------------------------------------------------------------------------------


def _swap_for_link(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize("change", ["new pair", "regrade", "undo"])
def test_a_failed_write_changes_neither_the_files_nor_the_grades(tmp_path: Path, change: str) -> None:
    """Regression: with the qrels file replaced by a link, a grade was appended to the log but not applied
    (the log then held an event the session did not), and the link could be written through."""
    path = tmp_path / "h.qrels"
    outside = tmp_path / "someone-elses.txt"
    outside.write_text("keep me\n", encoding="utf-8")
    with Judgments.open(path, POOL, assessor="") as judgments:
        judgments.record("q1", "a", 2)
        judgments.record("q2", "b", 1)
        log_before = log_path(path).read_bytes()
        qrels_before = path.read_bytes()
        _swap_for_link(path, outside)
        with pytest.raises(JudgmentsWriteError, match="symbolic link") as caught:
            make_change(judgments, change)
        assert "was not recorded" in str(caught.value)
        assert log_path(path).read_bytes() == log_before
        assert outside.read_text(encoding="utf-8") == "keep me\n"
        assert judgments.grades == {"q1": {"a": 2}, "q2": {"b": 1}}
        path.unlink()
        path.write_bytes(qrels_before)
        judgments.record("q1", "d", 0)  # once the file is back, grading goes on
    with Judgments.open(path, POOL, assessor="") as judgments:
        assert judgments.grades == {"q1": {"a": 2, "d": 0}, "q2": {"b": 1}}
    assert read_trec_qrels(path) == {"q1": {"a": 2, "d": 0}, "q2": {"b": 1}}


def test_a_log_replaced_while_judging_is_not_written(tmp_path: Path) -> None:
    """The log open since the start must still be the file at its path, or grades would go to a lost file."""
    path = tmp_path / "h.qrels"
    with Judgments.open(path, POOL, assessor="") as judgments:
        judgments.record("q1", "a", 2)
        moved = tmp_path / "moved.jsonl"
        log_path(path).rename(moved)
        log_path(path).write_bytes(moved.read_bytes())
        with pytest.raises(JudgmentsWriteError, match="moved, removed or replaced while judging"):
            judgments.record("q2", "b", 1)
        assert judgments.grades == {"q1": {"a": 2}}


# -- torn last lines after a crash --------------------------------------------------------------------------------


def _started(path: Path) -> None:
    with Judgments.open(path, POOL, assessor="") as judgments:
        judgments.record("q1", "a", 2)
        judgments.record("q2", "b", 1)


@pytest.mark.parametrize("torn", ['{"event": "grade", "query": "q1", "doc": "\u6587', '{"event": "skip"'])
def test_a_torn_last_log_line_is_dropped_with_a_warning_and_judging_resumes(tmp_path: Path, torn: str) -> None:
    """Regression: a crash mid-append left an unterminated last line, and the same command then refused to
    resume (invalid JSON). It cuts mid-character here too."""
    path = tmp_path / "h.qrels"
    _started(path)
    whole = log_path(path).read_bytes()
    with open(log_path(path), "ab") as out:
        out.write(torn.encode()[:-1])
    assert Judgments.check(path, POOL) != []  # checking writes nothing and says nothing
    with pytest.warns(RagEvalWarning, match=r"h\.qrels\.jsonl:4: dropped an incomplete last line"):
        judgments = Judgments.open(path, POOL, assessor="")
    with judgments:
        assert log_path(path).read_bytes() == whole
        assert judgments.grades == {"q1": {"a": 2}, "q2": {"b": 1}}
        judgments.record("q1", "c", 0)
    with Judgments.open(path, POOL, assessor="") as judgments:  # no warning: the next event began a new line
        assert judgments.grades == {"q1": {"a": 2, "c": 0}, "q2": {"b": 1}}
    # Damage that is not a write cut short is still an error, and nothing is cut off: a whole (terminated)
    # line, a line before the last, or a damaged line before a torn one.
    clean = log_path(path).read_bytes()
    for damage in ('{"event": "grade"\n', '{"event": "grade"\n{"event": "skip"}\n', '{"event": "grade"\n{"ev'):
        log_path(path).write_bytes(clean + damage.encode())
        with pytest.raises(JudgmentsError, match=r"h\.qrels\.jsonl:5: invalid JSON"):
            Judgments.open(path, POOL, assessor="")
        assert log_path(path).read_bytes() == clean + damage.encode()


@pytest.mark.parametrize("torn", ["q2 0 b", "q2 0 b 1"])
def test_a_torn_last_qrels_line_is_rewritten_from_the_log(tmp_path: Path, torn: str) -> None:
    """Regression: a crash mid-append of the qrels file (after the log's append) left a line without its
    newline, and opening again refused it; one that parsed would have been glued to the next grade's line."""
    path = tmp_path / "h.qrels"
    _started(path)
    path.write_text("q1 0 a 2\n" + torn, encoding="utf-8")  # the log holds q2 / b; the qrels file was cut short
    with pytest.warns(RagEvalWarning, match=r"h\.qrels: dropped an incomplete last line"):
        judgments = Judgments.open(path, POOL, assessor="")
    with judgments:
        assert path.read_text(encoding="utf-8") == "q1 0 a 2\nq2 0 b 1\n"
        judgments.record("q1", "c", 0)
    assert read_trec_qrels(path) == {"q1": {"a": 2, "c": 0}, "q2": {"b": 1}}


@pytest.mark.parametrize("text", ["q1 0 a 0\nq2 0", "q1 0 a 2\nq2 0 b 1\nq3 0"])
def test_a_torn_qrels_file_that_the_log_does_not_explain_is_left_alone(tmp_path: Path, text: str) -> None:
    path = tmp_path / "h.qrels"
    _started(path)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(JudgmentsError, match="does not match its log"):
        Judgments.open(path, POOL, assessor="")
    assert path.read_text(encoding="utf-8") == text


# -- the server ---------------------------------------------------------------------------------------------------


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    server = Running(tmp_path / "kb.qrels")
    yield server
    server.stop()


def test_a_write_error_while_grading_is_a_json_500_and_the_state_stays_as_on_disk(
    tmp_path: Path, running: Running
) -> None:
    """Regression: with the judgments file replaced by a link mid-session, the grade request died with a
    traceback on the server and no answer; the log held the grade, the session did not."""
    state = running.session.state()
    for grade in (2, 1):
        item = state["item"]
        status, state = running.post("/api/grade", {"query": item["query"], "doc": item["doc"], "grade": grade})
        assert status == 200
    path = tmp_path / "kb.qrels"
    log_before = log_path(path).read_bytes()
    outside = tmp_path / "q.txt"
    outside.write_text("my questions\n", encoding="utf-8")
    _swap_for_link(path, outside)
    item = state["item"]
    status, answer = running.post("/api/grade", {"query": item["query"], "doc": item["doc"], "grade": 2})
    assert status == 500 and "symbolic link" in answer["error"] and "not recorded" in answer["error"]
    assert log_path(path).read_bytes() == log_before
    assert outside.read_text(encoding="utf-8") == "my questions\n"
    after = running.session.state()
    assert after["judged"] == 2 and after["item"]["query"] == item["query"] and after["item"]["doc"] == item["doc"]
    assert running.session.selector.judged == running.judgments.grades


@pytest.mark.parametrize("method", ["PUT", "DELETE", "HEAD", "PATCH"])
def test_methods_the_server_does_not_serve_are_405_with_allow(running: Running, method: str) -> None:
    """Regression: PUT, DELETE and HEAD got http.server's 501 HTML page."""
    status, headers, body = running.request(method, "/api/grade")
    assert status == 405 and headers["Allow"] == "GET, POST"
    assert headers["Content-Type"].startswith("text/plain")
    assert body == (b"" if method == "HEAD" else f"method {method} not allowed: this server answers GET, POST".encode())


def test_a_negative_content_length_is_a_bad_request(running: Running) -> None:
    """Regression: Content-Length: -5 was answered "request body over 16384 bytes"."""
    status, _, body = running.request("POST", "/api/undo", headers={"Content-Length": "-5"})
    assert status == 400 and "bad Content-Length '-5'" in json.loads(body)["error"]
    status, _, body = running.request("POST", "/api/undo", headers={"Content-Length": "99999999999999999999"})
    assert status == 400 and json.loads(body)["error"] == "request body over 16384 bytes"


# -- wording ---------------------------------------------------------------------------------------------------


def test_another_pools_systems_are_named_then_and_now(tmp_path: Path) -> None:
    """Regression: the message listed only the old systems and ended "... then"."""
    path = tmp_path / "h.qrels"
    _started(path)
    other = PoolIdentity(POOL.corpus, POOL.questions, ("bigram", "jieba"), 10)
    with pytest.raises(JudgmentsError) as caught:
        Judgments.open(path, other, assessor="")
    assert "the systems differ (bigram, unigram then) from now (bigram, jieba): unigram left out, jieba added" in str(
        caught.value
    )


def test_the_relevance_model_never_overflows_and_reaches_the_mode() -> None:
    """Regression: the oracle printed numpy's "overflow encountered in exp": on this pool undamped Newton steps
    swing to logits of -850 and back without converging; the damped fit reaches the posterior mode."""
    x = np.array([0.3] * 61 + [1.0] * 11)
    y = np.array([0.0] * 61 + [1.0] * 2 + [0.0] * 9)
    theta, covariance = fit_logistic(x, y, PRIOR["after"])  # filterwarnings = error: a warning fails here

    mean0 = np.array(PRIOR["after"][0])
    precision0 = np.diag(1.0 / np.square(PRIOR["after"][1]))
    design = np.column_stack([np.ones_like(x), x])
    gradient = design.T @ (y - 1.0 / (1.0 + np.exp(-(design @ theta)))) - precision0 @ (theta - mean0)
    assert np.abs(gradient).max() < 1e-6 and np.isfinite(covariance).all()
    assert theta[0] < -3  # 2 relevant of 72: a low intercept, not the swing's (4.7, 39.8)


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    """Regression: "1 questions have a relevant passage", "1 questions", "1 systems"."""
    from rag_eval.eval.datasets.sources import question_id

    first = EXAMPLES.read_text(encoding="utf-8").splitlines()[0]
    lines = EXAMPLE_QRELS.read_text(encoding="utf-8").splitlines()
    qrels = tmp_path / "one.qrels"
    qrels.write_text("".join(f"{line}\n" for line in lines if line.split()[0] == question_id(first)), "utf-8")
    one = tmp_path / "one.txt"
    one.write_text(first + "\n", encoding="utf-8")
    outcome = invoke("judge", "handbook", "--queries", str(one), "-t", "bigram", "--oracle", str(qrels))
    assert "1 question has a relevant passage, fewer than the 50 a sample needs" in one_error(outcome)
    result = CliRunner().invoke(
        cli, ["judge", "handbook", "--queries", str(one), "-t", "bigram", "--oracle", str(qrels), "--samples", "0"]
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert result.stdout.startswith(
        "Oracle replay (decisive order): 1 question (1 with a relevant passage), 1 system, "
    )


HANDBOOK_QUESTIONS = ROOT / "docs" / "examples" / "handbook-questions.txt"


HANDBOOK_QRELS = ROOT / "docs" / "examples" / "handbook-questions.qrels"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--oracle", HANDBOOK_QRELS, "--port", "99999"], "--port applies only to a judging page"),
        (["--oracle", HANDBOOK_QRELS, "--idle-timeout", "nan"], "--idle-timeout applies only to a judging page"),
        (["--oracle", HANDBOOK_QRELS, "--assessor", "ana"], "--assessor applies only to a judging page"),
        (["--oracle", HANDBOOK_QRELS, "--port", "0", "--idle-timeout", "240"], "--port and --idle-timeout apply"),
        (["-o", "x.qrels", "--samples", "3"], "--samples applies only with --oracle"),
        (["-o", "x.qrels", "--sample-queries", "5"], "--sample-queries applies only with --oracle"),
        (["-o", "x.qrels", "--seed", "1"], "--seed applies only with --oracle"),
        (["-o", "x.qrels", "--json"], "--json applies only with --oracle"),
    ],
)
def test_judge_refuses_options_of_the_other_mode(tmp_path: Path, extra: list[object], named: str) -> None:
    """Bug: `judge --oracle ... --idle-timeout nan --port 99999` ignored both (refused without --oracle)."""
    # A missing questions file: the old code failed on it only after taking the options silently.
    result = invoke("judge", "handbook", "--queries", tmp_path / "missing.txt", *extra)
    assert result.exit_code == 2 and named in one_error(result, code=2)


# -- 4. the assessor's name ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "   ", "a\nb", "a\tb", "ana\x1b[31m", "a\u2028b", "x" * 101])
def test_an_empty_or_multiline_assessor_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Bug: `judge --assessor ''` (or a name with a newline) was accepted and written into every grade."""

    def no_plan(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the pool was planned before the assessor was checked")

    monkeypatch.setattr("rag_eval.eval.judging.judge.plan", no_plan)
    out = tmp_path / "j.qrels"
    result = invoke("judge", "handbook", "--queries", HANDBOOK_QUESTIONS, "--assessor", name, "-o", out)
    assert result.exit_code == 1 and "--assessor" in one_error(result) and not out.exists()
