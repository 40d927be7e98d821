"""Given judgments: the qrels format is told by field count, and a file that judges nothing is an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from rag_eval.cli import cli
from rag_eval.errors import DatasetError
from rag_eval.eval.datasets.trec import read_any_qrels

ROOT = REPO
QUESTIONS = ROOT / "docs" / "examples" / "handbook-questions.txt"
JUDGMENTS = ROOT / "docs" / "examples" / "handbook-questions.qrels"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("q1 0 d1 1\nq1 0 d2 0\n", {"q1": {"d1": 1, "d2": 0}}),
        ("q1\t0\td1\t1\nq1\t0\td2\t0\n", {"q1": {"d1": 1, "d2": 0}}),  # regression: TREC with tabs read as BEIR
        ("q1 \t 0\td1  1\n", {"q1": {"d1": 1}}),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\n", {"q1": {"d1": 1}}),
        ("q 1\td 1\t2\n", {"q 1": {"d 1": 2}}),  # BEIR ids may hold spaces: three tab-separated fields
    ],
)
def test_the_format_is_told_by_field_count(tmp_path: Path, text: str, expected: dict) -> None:
    path = tmp_path / "j.qrels"
    path.write_text(text, encoding="utf-8")
    assert read_any_qrels(path) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no judgments: the file is empty"),  # regression: accepted as "not judged", exit 0
        ("  \n\n\t\n", "no judgments: the file is empty"),
        ("query-id\tcorpus-id\tscore\n", "no judgments: only a header"),
        ("q1 0 d1 0\nq2 0 d2 0\n", "no relevant document: 2 judgments of 2 queries, none with a positive grade"),
        ("q1 d1 1\n", "j.qrels:1: not a qrels line: 3 fields, where TREC qrels have 4"),
    ],
)
def test_judgments_that_judge_nothing_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "j.qrels"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=None) as caught:
        read_any_qrels(path)
    assert message in str(caught.value)


def test_evaluate_reads_tab_separated_trec_qrels(tmp_path: Path) -> None:
    (tmp_path / "tabs.qrels").write_text("q1\t0\td1\t1\nq1\t0\td2\t0\n", encoding="utf-8")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d3 2 1.0 x\n", encoding="utf-8")
    outcome = CliRunner().invoke(
        cli, ["evaluate", str(tmp_path / "run.txt"), str(tmp_path / "tabs.qrels"), "--metric", "P@1"]
    )
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout == "num_q\tall\t1\nP@1\tall\t1.0000\n"


@pytest.mark.parametrize("kind", ["empty", "blank", "zero"])
def test_compare_refuses_given_judgments_that_judge_nothing(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: an empty --qrels, or one whose grades are all 0, gave a "not judged" report and exit 0."""
    monkeypatch.setenv("RAG_EVAL_CACHE", str(tmp_path / "cache"))
    zero = "".join(" ".join([*line.split()[:3], "0"]) + "\n" for line in JUDGMENTS.read_text("utf-8").splitlines())
    qrels = tmp_path / "j.qrels"
    qrels.write_text({"empty": "", "blank": " \n\n", "zero": zero}[kind], encoding="utf-8")
    args = ["compare", "handbook", "--queries", str(QUESTIONS), "--qrels", str(qrels), "-t", "bigram"]
    outcome = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "out")])
    assert outcome.exit_code == 1, outcome.stderr
    lines = outcome.stderr.splitlines()
    found = {"empty": "no judgments", "blank": "no judgments", "zero": "no relevant document"}[kind]
    assert lines[0].startswith("error: ") and f"{qrels.name}: {found}" in lines[0], lines
    assert all(line.startswith("hint: ") for line in lines[1:]) and "Traceback" not in outcome.stderr
    assert not (tmp_path / "out").exists()


def test_evaluate_counts_the_queries_it_scores_and_refuses_a_run_of_other_questions(tmp_path: Path) -> None:
    """Every judged query is scored (one the run lacks as 0, trec_eval -c), their count printed as num_q; a run
    with none of the judged queries is an error (it printed every metric as 0.0000 with exit status 0)."""
    run = tmp_path / "a.run"
    run.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\nq9 Q0 d1 1 1.0 x\n", encoding="utf-8")
    qrels = tmp_path / "a.qrels"
    qrels.write_text("q1 0 d1 1\nq2 0 d2 1\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["evaluate", str(run), str(qrels), "--metric", "nDCG@10"])
    assert result.exit_code == 0 and "num_q\tall\t2\n" in result.output and "nDCG@10\tall\t0.5000" in result.output
    result = CliRunner().invoke(cli, ["evaluate", str(run), str(qrels), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["num_q"] == 2
    other = tmp_path / "other.qrels"
    other.write_text("h001 0 d1 1\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["evaluate", str(run), str(other)])
    assert result.exit_code == 1 and "share no query id" in result.output and "Traceback" not in result.output
