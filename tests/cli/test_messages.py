"""Messages a user understands without the source: how question ids are made when judgments name others, the
same ``error:`` first on every usage error, the significance legend only where a test was made, and what a
chunk and a passage are where index build and compare count them."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers import invoke, make_docs

from rag_eval.builders import BUILDERS, get_builder
from rag_eval.cli import cli
from rag_eval.eval.datasets.sources import question_id

QUESTIONS = ["导出文件保留多久", "数据库备份保留几天"]
#: A judged passage of make_docs's knowledge base, and the ids a person might have given the questions.
QRELS = "q1 0 notes.md#_root 1\nq2 0 faq/fullwidth.md#資料庫備份 1\n"
LEGEND = "significantly better/worse"


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    return make_docs(tmp_path / "kb")


# -- judged ids that are not the questions' ids -------------------------------------------------------------------


def test_judged_ids_of_a_plain_text_file_say_how_its_ids_are_made(kb: Path, tmp_path: Path) -> None:
    """The hint used to say only that judgments belong to their questions: nothing said that a text file's
    questions are named q- and a hash, nor how to name them q1, q2 oneself."""
    (tmp_path / "q.txt").write_text("\n".join(QUESTIONS) + "\n", encoding="utf-8")
    (tmp_path / "mine.qrels").write_text(QRELS, encoding="utf-8")
    result = invoke(
        "compare", kb, "--queries", tmp_path / "q.txt", "--qrels", tmp_path / "mine.qrels", "-o", tmp_path / "o"
    )
    assert result.exit_code == 1
    assert "2 judged query ids are not among the 2 questions compared, e.g. 'q1'" in result.stderr
    hint = next(line for line in result.stderr.splitlines() if line.startswith("hint:"))
    made = question_id(QUESTIONS[0])
    assert f"'q-' and the first 12 hex digits of its sha256 (here {made!r}" in hint, hint
    assert "queries.jsonl" in hint and "qid<TAB>question" in hint and ".tsv" in hint, hint


def test_the_ways_the_hint_names_give_the_questions_their_own_ids(kb: Path, tmp_path: Path) -> None:
    (tmp_path / "mine.qrels").write_text(QRELS, encoding="utf-8")
    (tmp_path / "q.tsv").write_text("".join(f"q{n}\t{text}\n" for n, text in enumerate(QUESTIONS, 1)), "utf-8")
    (tmp_path / "q.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{n}", "text": t}, ensure_ascii=False) + "\n" for n, t in enumerate(QUESTIONS, 1)),
        encoding="utf-8",
    )
    for questions in ("q.tsv", "q.jsonl"):
        args = ["compare", kb, "--queries", tmp_path / questions, "--qrels", tmp_path / "mine.qrels", "-t", "bigram"]
        result = invoke(*args, "-o", tmp_path / f"out-{questions}")
        assert result.exit_code == 0, result.stderr
        assert json.loads((tmp_path / f"out-{questions}" / "report.json").read_text("utf-8"))["judged_queries"] == 2
    # Judgments naming other ids than a queries.jsonl's own: the hint names those, not a hash.
    (tmp_path / "other.qrels").write_text(QRELS.replace("q1", "Q1").replace("q2", "Q2"), encoding="utf-8")
    result = invoke(
        "compare", kb, "--queries", tmp_path / "q.jsonl", "--qrels", tmp_path / "other.qrels", "-o", tmp_path / "o"
    )
    assert result.exit_code == 1 and "their file's own ids (here 'q1'" in result.stderr, result.stderr


# -- usage errors: error: first, as every other error ---------------------------------------------------------------


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found: list[tuple[tuple[str, ...], click.Command]] = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


def _usage_errors() -> list[list[str]]:
    """For every command: an unknown option; no arguments, when some are required; each option that takes a value
    given none (click raises that one without a context); each number or choice option given a bad value."""
    cases: list[list[str]] = [["--no-such-option"], ["no-such-command"]]
    for path, command in _commands(cli):
        cases.append([*path, "--no-such-option"])
        if any(param.required for param in command.params):
            cases.append(list(path))
        for param in command.params:
            if not isinstance(param, click.Option) or param.is_flag or param.hidden:
                continue
            cases.append([*path, param.opts[-1]])
            if isinstance(param.type, (click.Choice, click.types.IntParamType, click.types.FloatParamType)):
                cases.append([*path, param.opts[-1], "not-a-value"])
    return cases


USAGE_ERRORS = _usage_errors()


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=[" ".join(case) for case in USAGE_ERRORS])
def test_a_usage_error_starts_with_error(args: list[str]) -> None:
    """Click printed its "Usage:" line first (and its own "Error:" where it handles the error itself); every other
    error of rag-eval is one line starting "error:"."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    words = result.stderr.split()
    assert words[:1] == ["error:"], result.stderr
    assert [line for line in result.stderr.splitlines() if line.lower().startswith("error")] == [
        result.stderr.splitlines()[0]
    ], result.stderr
    assert "Traceback" not in result.stderr + result.output


# -- the significance legend only where a test was made -------------------------------------------------------------


def _legends(report: Path, printed: str) -> dict[str, bool]:
    return {
        "report.md": LEGEND in (report / "report.md").read_text("utf-8"),
        "report.html": LEGEND in (report / "report.html").read_text("utf-8"),
        "printed": LEGEND in " ".join(printed.split()),  # the console wraps its long first line
    }


@pytest.mark.parametrize(
    ("judged", "systems", "tested"),
    [(False, ["bigram", "unigram"], False), (True, ["bigram"], False), (True, ["bigram", "unigram"], True)],
    ids=["unjudged", "judged, one system", "judged, two systems"],
)
def test_the_significance_legend_shows_only_where_a_test_was_made(
    kb: Path, tmp_path: Path, judged: bool, systems: list[str], tested: bool
) -> None:
    """An unjudged report carried "↑/↓: significantly better/worse than the reference" in report.html, and a
    judged one with a single system (nothing to test it against) everywhere."""
    (tmp_path / "q.txt").write_text("\n".join(QUESTIONS) + "\n", encoding="utf-8")
    relevant = ["guide/export.md#导出指南", "faq/fullwidth.md#資料庫備份"]
    qrels = "".join(f"{question_id(q)} 0 {doc} 1\n" for q, doc in zip(QUESTIONS, relevant, strict=True))
    (tmp_path / "q.qrels").write_text(qrels, encoding="utf-8")
    args: list[object] = ["compare", kb, "--queries", tmp_path / "q.txt", "-o", tmp_path / "report"]
    args += ["--qrels", tmp_path / "q.qrels"] if judged else []
    for system in systems:
        args += ["-t", system]
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text("utf-8"))
    assert any(row.get("significance") for row in report["systems"]) == tested
    assert _legends(tmp_path / "report", result.output) == dict.fromkeys(
        ["report.md", "report.html", "printed"], tested
    )


# -- chunks and passages name their unit ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_builder_says_what_its_chunks_and_units_are(name: str) -> None:
    builder = get_builder(name)
    assert builder.unit_words.strip() and builder.chunk_words().strip()


def test_index_build_and_compare_name_what_they_count(kb: Path, tmp_path: Path) -> None:
    """`index build` said "262 chunks" where compare said "244 passages" of the same folder, without a word why:
    a section longer than max_chars is indexed in parts, and judged (and compared) whole."""
    built = invoke("index", "build", kb, "-t", "bigram", "-o", tmp_path / "kb.sqlite")
    assert built.exit_code == 0, built.stderr
    chunks = int(built.output.split()[1])
    assert "chunks (Markdown sections, one longer than 2,000 characters split into parts) from 4 files" in built.output
    (tmp_path / "q.txt").write_text("\n".join(QUESTIONS) + "\n", encoding="utf-8")
    compared = invoke("compare", kb, "--queries", tmp_path / "q.txt", "-t", "bigram", "-o", tmp_path / "report")
    assert compared.exit_code == 0, compared.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text("utf-8"))
    passages = report["dataset"]["stats"]["passages"]
    assert passages < chunks  # guide/long.md's section is split: the reason the two counts differ
    assert f"{passages} passages (whole Markdown sections)" in " ".join(compared.output.split())
    for page in ("report.md", "report.html"):
        assert f"{passages} passages (whole Markdown sections)" in (tmp_path / "report" / page).read_text("utf-8")
