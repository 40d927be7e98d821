"""compare on a knowledge base and a list of questions: no qrels needed, label-free measures, partial judgments."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from rag_eval.cli import cli
from rag_eval.errors import CorpusError
from rag_eval.eval.compare.agreement import (
    detectable_difference,
    disagreements,
    jaccard,
    overlaps,
    rbo,
    smallest_p,
    zero_hit_rate,
)
from rag_eval.eval.datasets.shipped import corpus_dir
from rag_eval.eval.datasets.sources import infer_builder, question_id, read_questions, source_dataset
from rag_eval.eval.datasets.trec import read_trec_qrels

QUESTIONS = ["如何导出团队的数据", "存储附加包多少钱", "审计日志保留多久", "怎么重置密码"]


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    path = tmp_path / "questions.txt"
    path.write_text("\n".join(QUESTIONS[:2]) + "\n\n" + "\n".join(QUESTIONS[2:]) + "\n", encoding="utf-8")
    return path


def test_rbo_by_hand() -> None:
    # Webber et al. 2010, eq. 32, p = 0.9: X_1 = 0, X_2 = 2 -> 0.1/0.9 * (2/2 * 0.81) + (0 + 2/2) * 0.81 = 0.9
    assert rbo(["a", "b"], ["b", "a"]) == pytest.approx(0.9)
    assert rbo(list("abcde"), list("abcde")) == pytest.approx(1.0)
    assert rbo(list("abc"), list("xyz")) == 0.0
    # A shorter list that agrees with the longer one's prefix is extrapolated as agreeing.
    assert rbo(["a", "b"], ["a", "b", "c", "d"]) == pytest.approx(1.0)
    # X_1 = 1, X_2 = 1 (S = {a}, L = {a, c}); eq. 32 with s = 1, l = 2.
    expected = 0.1 / 0.9 * (1 * 0.9 + 1 / 2 * 0.81 + 1 * (2 - 1) / (1 * 2) * 0.81) + (0 + 1) * 0.81
    assert rbo(["a"], ["a", "c"]) == pytest.approx(expected)
    assert rbo([], []) == 1.0 and rbo([], ["a"]) == 0.0
    assert rbo(["a", "b"], ["b", "a"]) == rbo(["b", "a"], ["a", "b"])
    with pytest.raises(ValueError):
        rbo(["a"], ["a"], p=1.0)


def test_jaccard_overlap_and_disagreements_by_hand() -> None:
    runs = {
        "x": {"q1": ["a", "b"], "q2": ["c"]},
        "y": {"q1": ["a", "b"], "q2": ["d"]},
        "z": {"q1": ["b", "a"], "q2": []},
    }
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3) and jaccard([], []) == 1.0
    pairs = {(p["a"], p["b"]): p for p in overlaps(runs, ["q1", "q2"])}
    assert pairs[("x", "y")]["jaccard@10"] == 0.5  # q1 identical, q2 disjoint
    assert pairs[("x", "z")]["rbo@10"] == round((0.9 + 0.0) / 2, 4)
    assert zero_hit_rate(runs, ["q1", "q2"]) == {"x": 0.0, "y": 0.0, "z": 0.5}
    worst = disagreements(runs, ["q1", "q2"], count=1)
    assert worst[0]["query"] == "q2" and worst[0]["top"]["z"] == []


def test_detectable_difference_shrinks_with_more_queries() -> None:
    few = detectable_difference([0.5, -0.2, 0.1, 0.0, 0.3, 0.2])
    many = detectable_difference([0.5, -0.2, 0.1, 0.0, 0.3, 0.2] * 8)
    assert few is not None and many is not None and many < few / 2
    assert detectable_difference([0.4]) is None
    # Five queries: the exact sign-flip test's smallest p is 2 ** -4 = 0.0625, over 0.05: nothing is detectable.
    assert smallest_p(5) == 0.0625 and smallest_p(6) == 0.03125
    assert detectable_difference([0.5, -0.2, 0.1, 0.0, 0.3]) is None


def test_few_queries_warning_says_when_nothing_can_be_significant(questions: Path, tmp_path: Path) -> None:
    """Four judged questions: the warning says no difference can be significant (it promised 0.149)."""
    from rag_eval.eval.datasets.shipped import corpus_dir

    texts = [line for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()][:4]
    few = tmp_path / "few.txt"
    few.write_text("\n".join(texts) + "\n", encoding="utf-8")
    root = corpus_dir("handbook")
    first_key = next(iter(source_dataset(str(root), few).corpus))
    qrels = tmp_path / "few.qrels"
    qrels.write_text("".join(f"{question_id(t)} 0 {first_key} 1\n" for t in texts), encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "compare",
            str(root),
            "--queries",
            str(few),
            "--qrels",
            str(qrels),
            "-t",
            "bigram",
            "-t",
            "unigram",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    warning = report["without_labels"]["warning"]
    assert "can find no difference significant: with 4 queries the smallest p-value it can give is 0.125" in warning
    assert report["without_labels"]["detectable_difference"] is None
    assert report["significance"]["exact"] and "exact: all 16 sign vectors" in (out / "report.md").read_text("utf-8")


def test_builders_declare_which_sources_they_read(tmp_path: Path) -> None:
    assert infer_builder(corpus_dir("handbook")) == "sections"
    assert infer_builder(corpus_dir("evidence-mini")) == "lines"  # a manifest wins over any .md beside it
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text('{"_id": "p1", "text": "导出"}\n', encoding="utf-8")
    assert infer_builder(beir) == "passages" and infer_builder(beir / "corpus.jsonl") == "passages"
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="no builder recognises"):
        infer_builder(tmp_path / "empty")


def test_questions_get_ids_from_their_text(questions: Path, tmp_path: Path) -> None:
    read = read_questions(questions)
    assert [q.text for q in read.values()] == QUESTIONS  # blank lines skipped, order kept
    assert list(read) == [question_id(text) for text in QUESTIONS]
    moved = tmp_path / "moved.txt"
    moved.write_text("\n".join(reversed(QUESTIONS)), encoding="utf-8")
    assert set(read_questions(moved)) == set(read)  # reordering the file keeps every id


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "no questions"),
        (b"\n \n", "no questions"),
        ("导出\n导出\n".encode(), r"questions.txt:2: the same question as line 1"),
        (b"ok\n\xff\xfe\n", "not valid UTF-8"),
        (b"a\x00b\n", "NUL"),
        (b"a\x07b\n", "control character"),
        (("问" * 2001).encode(), "over 2000"),
    ],
)
def test_bad_questions_files_are_one_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "questions.txt"
    path.write_bytes(content)
    result = CliRunner().invoke(
        cli, ["compare", "handbook", "--queries", str(path), "-t", "bigram", "-o", str(tmp_path / "out")]
    )
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("error: ") and message in lines[0], result.output
    assert not (tmp_path / "out").exists()


def test_source_dataset_passages_are_the_builders_units(questions: Path) -> None:
    data = source_dataset("handbook", questions)
    assert data.meta["builder"] == "sections" and not data.qrels
    assert len(data.corpus) == 385 and all("#" in key for key in data.corpus)
    lines = source_dataset(str(corpus_dir("evidence-mini")), questions)
    assert lines.meta["builder"] == "lines" and all("@" in key and "#L" in key for key in lines.corpus)


def test_compare_without_judgments_reports_what_needs_no_labels(questions: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    args = ["compare", "handbook", "--queries", str(questions), "-t", "bigram", "-t", "unigram", "-o", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "not judged: quality not measured" in result.output and "0.0000" not in result.output
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["metrics"] == [] and report["judged_queries"] == 0 and report["questions"] == 4
    labels = report["without_labels"]
    assert set(labels["zero_hit_rate"]) == {row["name"] for row in report["systems"]}
    assert len(labels["overlap"]) == 1 and 0 <= labels["overlap"][0]["jaccard@10"] <= 1
    assert len(labels["disagreements"]) == 4 and labels["disagreements"][0]["text"] in QUESTIONS
    markdown = (out / "report.md").read_text(encoding="utf-8")
    html = (out / "report.html").read_text(encoding="utf-8")
    for page in (markdown, html):
        assert "Not judged: quality not measured" in page and "0.0000" not in page.split("Without labels")[0]
    assert 'id="not-judged"' in html and "Without labels" in html
    assert all(row["metrics"] == {} for row in report["systems"])


def test_compare_with_a_few_judgments_counts_unjudged_and_warns(questions: Path, tmp_path: Path) -> None:
    ids = list(read_questions(questions))
    judgments = tmp_path / "judgments.qrels"
    judgments.write_text(
        f"{ids[0]} 0 data/export-data.md#下载位置与保留期限 2\n"
        f"{ids[1]} 0 data/storage-quota-attachments.md#各版本的存储配额 1\n"
        f"{ids[1]} 0 billing/billing-faq.md#套餐与席位 0\n",
        encoding="utf-8",
    )
    assert read_trec_qrels(judgments)[ids[1]]["billing/billing-faq.md#套餐与席位"] == 0
    out = tmp_path / "report"
    args = [
        "compare",
        "handbook",
        "--queries",
        str(questions),
        "--qrels",
        str(judgments),
        "-t",
        "bigram",
        "-t",
        "unigram",
    ]
    result = CliRunner().invoke(cli, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["judged_queries"] == 2 and report["questions"] == 4
    for row in report["systems"]:
        assert 0 <= row["judged@10"] <= 0.3  # at most 3 judged passages in a query's top 10
        assert row["unjudged_in_top10"] >= 40 - 3 - 5  # four questions, few results missing, three judged
    warning = report["without_labels"]["warning"]
    assert warning.startswith("conclusions rest on 2 judged queries")
    assert "Warning: conclusions rest on 2 judged queries" in (out / "report.md").read_text(encoding="utf-8")


def test_judgments_from_another_pool_are_refused(questions: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.qrels"
    other.write_text(f"{question_id('另一个问题')} 0 data/export-data.md#常见问题 1\n", encoding="utf-8")
    wrong_doc = tmp_path / "wrong-doc.qrels"
    wrong_doc.write_text(f"{question_id(QUESTIONS[0])} 0 nowhere.md#x 1\n", encoding="utf-8")
    for path, message in ((other, "not among the"), (wrong_doc, "not units of this source")):
        args = ["compare", "handbook", "--queries", str(questions), "--qrels", str(path), "-t", "bigram"]
        result = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "out")])
        assert result.exit_code == 1 and result.output.startswith("error: ") and message in result.output


def test_a_shipped_dataset_with_judgments_from_a_file(tmp_path: Path) -> None:
    """--qrels without --queries replaces a dataset's own judgments; ids it does not have are refused."""
    line = "e01\trefund-policy@r3:e2d40af5f4f949402504ab19fdcc0c482c42bed0e72c1bf05181b4f794c07b1c#L2\t2\n"
    qrels = tmp_path / "one.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n" + line, encoding="utf-8")
    out = tmp_path / "o"
    result = CliRunner().invoke(
        cli, ["compare", "evidence-mini", "--qrels", str(qrels), "-t", "bigram", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["judged_queries"] == 1
    qrels.write_text("query-id\tcorpus-id\tscore\n" + line.replace("#L2", "#L99"), encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["compare", "evidence-mini", "--qrels", str(qrels), "-t", "bigram", "-o", str(out)]
    )
    assert result.exit_code == 1 and "not units of this source" in result.output


def test_a_markdown_folder_is_compared_as_sections(questions: Path, tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    shutil.copytree(corpus_dir("handbook") / "data", folder)
    out = tmp_path / "report"
    result = CliRunner().invoke(
        cli, ["compare", str(folder), "--queries", str(questions), "-t", "bigram", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["systems"][0]["builder"].startswith("sections") and report["dataset"]["id"] == "kb"


def test_a_gate_on_unjudged_questions_is_refused_before_any_build(questions: Path, tmp_path: Path) -> None:
    args = ["compare", "handbook", "--queries", str(questions), "-t", "bigram", "-o", str(tmp_path / "out")]
    baseline = REPO / "reports" / "baseline" / "handbook.json"
    for extra in (["--against", str(baseline)], ["--write-baseline", str(tmp_path / "b.json")]):
        result = CliRunner().invoke(cli, [*args, *extra])
        assert result.exit_code == 1 and "needs judged queries" in result.output
        assert not (tmp_path / "out").exists() and not (tmp_path / "b.json").exists()
