"""Nothing a command writes goes into a corpus it reads: `judge -o docs/data/zz.md` used to write a judgments file
that the next build indexed as a section (and whose pool then no longer matched), `search --run docs/r.run` and
the other writers were accepted too; only compare and tune refused. Every writer now calls
``outputs.refuse_inside_source`` with the folders it reads: one error line, the source folder unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers import invoke, make_docs, one_error

from rag_eval.cli import cli
from rag_eval.eval.datasets import shipped
from rag_eval.index.writer import build

QUESTIONS = "导出文件保留多久\n数据库备份保留几天\n"
#: A judging page that, if it ever starts, stops by itself after a second without requests.
BRIEF = ["--idle-timeout", "0.02"]


def digest(folder: Path) -> str:
    """Every name, kind and byte under ``folder`` (links as their targets' names, not followed)."""
    hashed = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        hashed.update(str(path.relative_to(folder)).encode("utf-8", "surrogateescape") + b"\0")
        if path.is_symlink():
            hashed.update(b"link:" + os.readlink(path).encode("utf-8", "surrogateescape"))
        elif path.is_file():
            hashed.update(b"file:" + path.read_bytes())
        else:
            hashed.update(b"dir")
    return hashed.hexdigest()


def write_beir(folder: Path) -> Path:
    """A three-passage BEIR folder with one judged query."""
    (folder / "qrels").mkdir(parents=True)
    passages = [
        ("d1", "导出", "导出文件保留三十天。"),
        ("d2", "备份", "数据库备份保留七天。"),
        ("d3", "权限", "管理员设置权限。"),
    ]
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}, ensure_ascii=False) + "\n" for i, t, x in passages),
        encoding="utf-8",
    )
    (folder / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "导出文件保留多久"}, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    return folder


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A Markdown knowledge base, a BEIR folder, questions and qrels beside them, an index of the knowledge base
    built outside it, and a copy of the shipped sets standing in for the installed ones (so that a regression
    writes into the copy, never into the package)."""
    src = make_docs(tmp_path / "src")
    beir = write_beir(tmp_path / "beir")
    (tmp_path / "q.txt").write_text(QUESTIONS, encoding="utf-8")
    (tmp_path / "mine.qrels").write_text("q-x 0 notes.md 1\n", encoding="utf-8")
    build(src, tmp_path / "idx.sqlite", builder="sections", tokenizer="bigram")
    copy = tmp_path / "shipped"
    shutil.copytree(shipped.datasets_root(), copy)
    monkeypatch.setattr(shipped, "datasets_root", lambda: copy)
    shipped.manifest.cache_clear()
    yield {
        "src": src,
        "beir": beir,
        "shipped": copy / "evidence-mini",
        "q": tmp_path / "q.txt",
        "qrels": tmp_path / "mine.qrels",
        "idx": tmp_path / "idx.sqlite",
        "out": tmp_path / "out",
    }
    shipped.manifest.cache_clear()


#: Every writing option of every command, written into the source folder it reads: ``(command, option, the
#: folder that must stay unchanged, the command line)``.
INTO_SOURCE = [
    ("compare", "output", "src", ["compare", "{src}", "--queries", "{q}", "-t", "bigram", "-o", "{src}/report"]),
    ("compare", "output", "beir", ["compare", "{beir}", "-t", "bigram", "-o", "{beir}/report"]),
    (
        "compare",
        "write_baseline",
        "beir",
        ["compare", "{beir}", "-t", "bigram", "-o", "{out}/r", "--write-baseline", "{beir}/base.json"],
    ),
    (
        "compare",
        "write_baseline",
        "src",
        ["compare", "{src}", "--queries", "{q}", "-t", "bigram", "-o", "{out}/r", "--write-baseline", "{src}/b.json"],
    ),
    ("tune", "output", "beir", ["tune", "{beir}", "--budget", "2", "-o", "{beir}/tune"]),
    ("tune", "output", "beir", ["tune", "evidence-mini", "--eval-on", "{beir}", "--budget", "2", "-o", "{beir}/t"]),
    ("tune", "output", "shipped", ["tune", "evidence-mini", "--budget", "2", "-o", "{shipped}/tune"]),
    (
        "judge",
        "output",
        "src",
        ["judge", "{src}", "--queries", "{q}", "-t", "bigram", *BRIEF, "-o", "{src}/data/zz.md"],
    ),
    (
        "judge",
        "output",
        "src",
        ["judge", "{src}", "--queries", "{q}", "-t", "bigram", "--oracle", "{qrels}", "-o", "{src}/replay.json"],
    ),
    ("search", "run_file", "src", ["search", "{idx}", "--queries", "{q}", "--run", "{src}/r.run"]),
    ("queries synth", "output", "src", ["queries", "synth", "{src}", "-n", "3", "-o", "{src}/synth"]),
    ("queries synth", "output", "shipped", ["queries", "synth", "evidence-mini", "-n", "3", "-o", "{shipped}/s"]),
    ("index build", "index_path", "src", ["index", "build", "{src}", "-t", "bigram", "-o", "{src}/x.sqlite"]),
    ("index build", "index_path", "beir", ["index", "build", "{beir}/corpus.jsonl", "-o", "{beir}/x.sqlite"]),
    ("datasets export", "target", "shipped", ["datasets", "export", "evidence-mini", "{shipped}/corpus/copy"]),
]

#: Writing options that read no corpus folder, so there is none to write into: fuse reads run files, convert
#: SQuAD files, train-pkuseg a segmented text.
READS_NO_CORPUS = {("fuse", "output"), ("datasets convert", "output"), ("models train-pkuseg", "output")}


def filled(args: list[str], place: dict[str, Path]) -> list[str]:
    return [arg.format(**{key: str(value) for key, value in place.items()}) for arg in args]


@pytest.mark.parametrize(
    ("command", "option", "kept", "args"), INTO_SOURCE, ids=[f"{c} {o} in {k}" for c, o, k, _ in INTO_SOURCE]
)
def test_an_output_inside_the_source_folder_is_refused(
    place: dict[str, Path], command: str, option: str, kept: str, args: list[str]
) -> None:
    before = digest(place[kept])
    result = CliRunner().invoke(cli, filled(args, place))
    assert result.exit_code != 0
    line = one_error(result)
    assert "cannot go inside the source folder" in line and "index it as a document" in line, line
    assert "hint: write it outside" in result.stderr
    assert digest(place[kept]) == before


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
        else:
            found.append((" ".join((*path, name)), command))
    return found


def _writes(name: str, command: click.Command) -> list[str]:
    """The parameters by which ``command`` writes: every -o/--output, and the three writers named otherwise."""
    named = {("search", "run_file"), ("compare", "write_baseline"), ("datasets export", "target")}
    return [
        param.name
        for param in command.params
        if param.name and ("-o" in param.opts or "--output" in param.opts or (name, param.name) in named)
    ]


def test_every_writing_option_is_tried_inside_its_source() -> None:
    """A new command (or a new output option) that writes joins the table above, or says it reads no corpus."""
    tried = {(command, option) for command, option, _kept, _args in INTO_SOURCE}
    for name, command in _commands(cli):
        for option in _writes(name, command):
            assert (name, option) in tried | READS_NO_CORPUS, f"rag-eval {name} writes {option}: add it to INTO_SOURCE"


def test_an_output_reaching_the_source_through_a_link_is_refused(place: dict[str, Path], tmp_path: Path) -> None:
    src = place["src"]
    (tmp_path / "linked").symlink_to(src / "guide", target_is_directory=True)
    (tmp_path / "dangling.qrels").symlink_to(src / "zz.qrels")  # a link to a file not written yet
    (tmp_path / "src-link").symlink_to(src, target_is_directory=True)
    before = digest(src)
    judge = ["judge", str(src), "--queries", str(place["q"]), "-t", "bigram", *BRIEF, "-o"]
    for args in (
        [*judge, str(tmp_path / "linked" / "zz.qrels")],
        [*judge, str(tmp_path / "dangling.qrels")],
        ["search", str(place["idx"]), "--queries", str(place["q"]), "--run", str(tmp_path / "linked" / "r.run")],
        ["index", "build", str(tmp_path / "src-link"), "-o", str(src / "x.sqlite")],
        ["index", "build", str(src), "-o", str(tmp_path / "linked" / "x.sqlite")],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code != 0 and "cannot go inside the source folder" in one_error(result), args
    assert digest(src) == before


def test_an_output_beside_the_source_is_written(place: dict[str, Path], tmp_path: Path) -> None:
    """A sibling folder, even one whose name starts like the source's (src-out beside src), is outside it."""
    before = digest(place["src"])
    beside = tmp_path / "src-out"
    for args, written in (
        (["index", "build", str(place["src"]), "-t", "bigram", "-o", str(beside / "x.sqlite")], "x.sqlite"),
        (["search", str(place["idx"]), "--queries", str(place["q"]), "--run", str(beside / "r.run")], "r.run"),
        (["compare", str(place["src"]), "--queries", str(place["q"]), "-t", "bigram", "-o", str(beside / "r")], "r"),
        (["compare", str(place["beir"]), "-t", "bigram", "-o", str(tmp_path / "beir-report")], "../beir-report"),
        (["datasets", "export", "evidence-mini", str(beside / "set")], "set"),
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, (args, result.output, result.stderr)
        assert (beside / written).exists(), args
    assert digest(place["src"]) == before


def tree(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.mark.parametrize("command", ["compare", "tune"])
def test_a_report_inside_the_dataset_folder_is_refused(tmp_path: Path, command: str) -> None:
    """Only compare --queries refused a report inside its source: compare or tune on a dataset folder (such as
    `datasets export` writes, whose corpus/ is a Markdown knowledge base) put report.md into corpus/, and the next
    `index build .../corpus` indexed the report as documents."""
    result = invoke("datasets", "export", "evidence-mini", str(tmp_path / "set"))
    assert result.exit_code == 0, result.output
    before = tree(tmp_path / "set")
    args = ["-t", "bigram"] if command == "compare" else ["--budget", "2"]
    line = one_error(invoke(command, str(tmp_path / "set"), *args, "-o", str(tmp_path / "set" / "corpus" / "report")))
    assert "cannot go inside" in line
    assert tree(tmp_path / "set") == before
