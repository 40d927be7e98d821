"""``rag-eval judge`` on the command line (issue #13): help with examples, every bad input one error line
before anything is built, served or written, the highlights, and the oracle replay on the shipped handbook."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from helpers import REPO, invoke

from rag_eval.cli import cli
from rag_eval.eval.judging.judgments import Judgments, log_path
from rag_eval.eval.judging.log_records import JudgmentsConflict
from rag_eval.eval.judging.pool import plan
from rag_eval.eval.judging.session import query_marks
from rag_eval.tokenizers import get_tokenizer

ROOT = REPO
QUESTIONS = ROOT / "tests" / "data" / "judge" / "questions.txt"
CHEAP = ["-t", "bigram", "-t", "unigram"]


def judge(*args: str) -> Result:
    """``rag-eval judge ARGS``."""
    # --idle-timeout: should a case ever reach the server, it stops by itself within seconds (a replay, --oracle,
    # serves no page and refuses it).
    timeout = [] if "--oracle" in args else ["--idle-timeout", "0.05"]
    return invoke("judge", *args, *timeout)


def test_help_shows_examples() -> None:
    result = CliRunner().invoke(cli, ["judge", "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output and "rag-eval judge handbook --queries" in result.output
    assert "--oracle" in result.output and "0/1/2" in result.output


def test_judge_is_documented() -> None:
    assert "`rag-eval judge SOURCE --queries FILE" in (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")


def _bad_inputs(folder: Path) -> dict[str, tuple[list[str], str]]:
    (folder / "empty.txt").write_text("\n  \n", encoding="utf-8")
    (folder / "twice.txt").write_text("退款多久到账？\n发票怎么开？\n退款多久到账？\n", encoding="utf-8")
    (folder / "latin1.txt").write_bytes("退款\n".encode() + "caf\u00e9\n".encode("latin-1"))
    (folder / "theirs.qrels").write_text("q1 0 a.md#x 1\n", encoding="utf-8")
    out = str(folder / "new.qrels")
    return {
        "empty questions": (["handbook", "--queries", str(folder / "empty.txt"), "-o", out], "no questions"),
        "duplicate questions": (
            ["handbook", "--queries", str(folder / "twice.txt"), "-o", out],
            "twice.txt:3: the same question as line 1",
        ),
        "not UTF-8": (["handbook", "--queries", str(folder / "latin1.txt"), "-o", out], "not valid UTF-8"),
        "not rag-eval's": (
            ["handbook", "--queries", str(QUESTIONS), *CHEAP, "-o", str(folder / "theirs.qrels")],
            "rag-eval did not write it",
        ),
        "depth": (["handbook", "--queries", str(QUESTIONS), "--depth", "0", "-o", out], "--depth must be"),
        "unknown tokenizer": (["handbook", "--queries", str(QUESTIONS), "-t", "nope", "-o", out], "nope"),
        "unknown order": (
            ["handbook", "--queries", str(QUESTIONS), *CHEAP, "--method", "best", "-o", out],
            "unknown judging order 'best'; choose from: ",
        ),
        "same system twice": (
            ["handbook", "--queries", str(QUESTIONS), "-t", "bigram", "-t", "bigram:t2s=false", "-o", out],
            "the same system",
        ),
    }


CASES = [
    "empty questions",
    "duplicate questions",
    "not UTF-8",
    "not rag-eval's",
    "depth",
    "unknown tokenizer",
    "same system twice",
    "unknown order",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_error_line_and_writes_nothing(tmp_path: Path, case: str) -> None:
    args, said = _bad_inputs(tmp_path)[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    result = judge(*args)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1, result.stderr
    assert said in errors[0] and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_judgments_of_another_pool_are_one_error_line(tmp_path: Path) -> None:
    out = tmp_path / "h.qrels"
    *_, identity = plan("handbook", QUESTIONS, tokenizers=["bigram", "unigram"], depth=5)
    with Judgments.open(out, identity, assessor="") as judgments:
        judgments.record(identity.questions[0], "accounts/invite-members.md#邀请成员", 2)
    before = out.read_bytes(), log_path(out).read_bytes()
    result = judge("handbook", "--queries", str(QUESTIONS), *CHEAP, "-o", str(out))
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1, result.stderr
    assert "belong to another pool: the depth differs (5 then, 10 now)" in errors[0]
    assert "hint: use the same SOURCE" in result.stderr
    assert (out.read_bytes(), log_path(out).read_bytes()) == before


def test_a_port_in_use_is_one_error_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = judge(
            "handbook", "--queries", str(QUESTIONS), *CHEAP, "--port", str(port), "-o", str(tmp_path / "h.qrels")
        )
    assert result.exit_code == 1, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        f"error: port {port} on 127.0.0.1 is in use"
    ]
    assert list(tmp_path.iterdir()) == []


def test_highlights_join_every_tokenizers_matches() -> None:
    """A word matched by bigram is marked as a word; a character only unigram matches, as a character."""
    text = "导出文件保留三十天"
    bigram, unigram = get_tokenizer("bigram"), get_tokenizer("unigram")
    assert query_marks(text, "文件的天数", [bigram]) == [(2, 4, 2)]
    assert query_marks(text, "文件的天数", [unigram]) == [(2, 4, 1), (8, 9, 1)]
    assert query_marks(text, "文件的天数", [bigram, unigram]) == [(2, 4, 2), (8, 9, 1)]
    assert query_marks(text, "保留", [get_tokenizer("bigram+unigram")]) == [(4, 6, 2)]
    assert query_marks("", "保留", [bigram]) == []


@pytest.fixture(scope="module")
def small_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The first 12 of the handbook's example questions and their judgments (docs/examples)."""
    from rag_eval.eval.datasets.sources import question_id

    folder = tmp_path_factory.mktemp("oracle")
    questions = (ROOT / "docs" / "examples" / "handbook-questions.txt").read_text(encoding="utf-8").splitlines()[:12]
    ids = {question_id(q) for q in questions}
    qrels = (ROOT / "docs" / "examples" / "handbook-questions.qrels").read_text(encoding="utf-8").splitlines()
    (folder / "q.txt").write_text("\n".join(questions) + "\n", encoding="utf-8")
    (folder / "q.qrels").write_text("".join(f"{line}\n" for line in qrels if line.split()[0] in ids), "utf-8")
    return folder / "q.txt", folder / "q.qrels"


def _full_qrels_winner(questions: Path, qrels: Path) -> str:
    """The winner by trec_eval's nDCG@10 (ir-measures), computed apart from the oracle module."""
    from rag_eval.eval.compare.runner import System
    from rag_eval.eval.compare.timing import run_system
    from rag_eval.eval.datasets.records import Qrel
    from rag_eval.eval.datasets.sources import source_dataset
    from rag_eval.eval.metrics.measures import evaluate

    dataset = source_dataset("handbook", questions, qrels=qrels)
    judged = [Qrel(q, d, g) for q, docs in dataset.qrels.items() for d, g in docs.items()]
    means = {}
    for name in ("bigram", "unigram"):
        run = run_system(dataset, System(name, "sections", "or"), depth=10).run
        means[name] = evaluate(judged, run, ["nDCG@10"])[0]["nDCG@10"]
    return max(means, key=means.__getitem__)


def test_oracle_replays_the_order_and_samples(tmp_path: Path, small_set: tuple[Path, Path]) -> None:
    questions, qrels = small_set
    out = tmp_path / "replay.json"
    result = CliRunner().invoke(
        cli,
        ["judge", "handbook", "--queries", str(questions), *CHEAP, "--oracle", str(qrels)]
        + ["--samples", "4", "--sample-queries", "6", "--json", "-o", str(out)],
    )
    assert result.exit_code == 0, result.output + result.stderr
    data = json.loads(result.stdout)
    assert json.loads(out.read_text(encoding="utf-8")) == data
    assert data["winners"] == [_full_qrels_winner(questions, qrels)]
    assert data["systems"] == ["bigram", "unigram"] and data["questions"] == 12
    steps = data["steps"]
    assert [s["judged"] for s in steps] == list(range(1, data["pooled"] + 1))  # every pooled passage, in turn
    assert all(s["right"] == (s["pick"] in data["winners"]) for s in steps)
    assert steps[-1]["certain"] and steps[-1]["right"]
    assert data["study"]["samples"] == 4 and set(data["study"]["correct"]) == {"50", "100", "150"}
    assert all(0 <= rate <= 1 for rate in data["study"]["correct"].values())


def test_oracle_text_lists_every_judgment(small_set: tuple[Path, Path]) -> None:
    questions, qrels = small_set
    result = CliRunner().invoke(
        cli, ["judge", "handbook", "--queries", str(questions), *CHEAP, "--oracle", str(qrels), "--samples", "0"]
    )
    assert result.exit_code == 0, result.output + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Oracle replay") and "the full qrels' winner: " in lines[0]
    pooled = int(lines[0].split(" pooled passages")[0].split()[-1])
    assert len(lines) == 2 + pooled and lines[-1].split()[0] == str(pooled)
    assert "Over " not in result.stdout


def test_oracle_with_too_few_judged_questions_for_a_sample_is_one_error_line(small_set: tuple[Path, Path]) -> None:
    questions, qrels = small_set
    result = judge("handbook", "--queries", str(questions), *CHEAP, "--oracle", str(qrels))
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1 and "fewer than the 50 a sample needs" in errors[0], result.stderr
    assert "hint: use --sample-queries" in result.stderr


def test_an_existing_replay_file_is_refused_before_any_work(
    tmp_path: Path, small_set: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the replay's -o used to be checked only when written, after the whole replay."""
    questions, qrels = small_set
    out = tmp_path / "mine.json"
    out.write_text("keep me\n", encoding="utf-8")

    def no_build(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the pool was built before the output was checked")

    monkeypatch.setattr("rag_eval.eval.judging.judge.build_pool", no_build)
    result = judge("handbook", "--queries", str(questions), *CHEAP, "--oracle", str(qrels), "-o", str(out))
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1 and "refusing to replace it: it already exists" in errors[0], (
        result.stderr
    )
    assert out.read_text(encoding="utf-8") == "keep me\n"


def test_judging_needs_an_output_file() -> None:
    result = judge("handbook", "--queries", str(QUESTIONS))
    assert result.exit_code == 2 and "error: missing option '-o'" in result.stderr


def test_the_pool_does_not_depend_on_the_order_of_questions_or_how_a_spec_is_written(tmp_path: Path) -> None:
    reordered = tmp_path / "q.txt"
    reordered.write_text("\n".join(reversed(QUESTIONS.read_text(encoding="utf-8").splitlines())), encoding="utf-8")
    *_, identity = plan("handbook", QUESTIONS, tokenizers=["bigram", "unigram"])
    *_, same = plan("handbook", reordered, tokenizers=["unigram:t2s=false", "bigram"])
    *_, deeper = plan("handbook", reordered, tokenizers=["unigram", "bigram"], depth=20)
    assert same.fingerprint() == identity.fingerprint() != deeper.fingerprint()


def test_a_session_grades_steps_back_regrades_undoes_and_skips(tmp_path: Path) -> None:
    from rag_eval.eval.judging.pool import build_pool
    from rag_eval.eval.judging.selection import Selector
    from rag_eval.eval.judging.session import Session

    dataset, systems, skipped, identity = plan("handbook", QUESTIONS, tokenizers=["bigram", "unigram"])
    pool = build_pool(dataset, systems, identity, skipped=skipped)
    with Judgments.open(tmp_path / "h.qrels", identity, assessor="t") as judgments:
        session = Session(pool, judgments, Selector(pool.runs))

        def pair(state: dict[str, object]) -> tuple[str, str]:
            item = state["item"]
            assert isinstance(item, dict)
            return item["query"], item["doc"]

        state = session.state()
        first = pair(state)
        assert session.state() == state  # the same passage waits until it is graded
        second = pair(session.grade(*first, 2))
        third = pair(session.grade(*second, 1))
        fourth = pair(session.grade(*third, 0))
        assert len({first, second, third, fourth}) == 4
        back = session.state(0)
        assert pair(back) == first and back["position"] == 0 and back["item"]["grade"] == 2
        after = session.grade(*first, 1, position=0)  # re-grade from history: on to the next judged one
        assert pair(after) == second and after["position"] == 1
        assert judgments.grades[first[0]][first[1]] == 1
        restored = session.undo()  # the re-grade: the earlier grade is back, and the page is told so
        assert judgments.grades[first[0]][first[1]] == 2
        assert restored["undone"] == {"query": first[0], "doc": first[1], "grade": 2}
        # A second page that still shows ``first`` as new would overwrite its grade unseen: refused.
        with pytest.raises(JudgmentsConflict, match="graded meanwhile"):
            session.grade(*first, 0)
        assert judgments.grades[first[0]][first[1]] == 2
        undone = session.undo()
        assert pair(undone) == third and undone["item"]["grade"] is None
        assert undone["undone"] == {"query": third[0], "doc": third[1], "grade": None}
        skipped_to = session.skip(*third)
        assert pair(skipped_to) not in (first, second, third) and skipped_to["skipped"] == 1
        assert session.selector.judged == judgments.grades
        assert skipped_to["judged"] == 2 and skipped_to["history"] == 2
