"""Plug-ins of every kind, defined here, work through every command with no change elsewhere; and no
module branches on a built-in strategy's or builder's name outside its own module."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import regex
from click.testing import CliRunner
from helpers import REPO

from rag_eval.builders import BUILDERS, Builder, QueryDefaults, SourceFile
from rag_eval.builders.base import FileRef, locate
from rag_eval.cli import cli
from rag_eval.eval.datasets.formats import DATASET_FORMATS, DatasetFormat
from rag_eval.eval.datasets.records import Dataset, Passage, Query
from rag_eval.records import Chunk
from rag_eval.spec import Option, OptionSet
from rag_eval.tokenizers import TOKENIZERS, PythonTokenizer, Token, Tokenizer

ROOT = REPO


class WhitespaceTokenizer(PythonTokenizer):
    """A Python strategy: whitespace-separated words, normalised and filtered by the template."""

    name = "whitespace-test"
    summary = "words between whitespace (a test plug-in)"

    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        for match in regex.finditer(r"\S+", text):
            yield match.span()


class AsciiTokenizer(Tokenizer):
    """A native strategy: FTS5's ``ascii`` tokenizer, mirrored in Python (ASCII letters and digits and every
    non-ASCII character are token characters; A-Z folded)."""

    name = "ascii-test"
    summary = "FTS5's native ascii tokenizer (a test plug-in)"
    native: ClassVar[bool] = True

    @property
    def fts5_clause(self) -> str:
        return "ascii"

    def _tokenize(self, text: str) -> list[Token]:
        return [
            Token(m.group().translate(_ASCII_FOLD), m.start(), m.end())
            for m in regex.finditer(r"[0-9A-Za-z\u0080-\U0010FFFF]+", text.split("\x00", 1)[0])
        ]


_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class ParagraphsBuilder(Builder):
    """``.txt`` files under a folder; one chunk per blank-line paragraph, key ``path:pN``."""

    name = "paragraphs-test"
    summary = "paragraphs of .txt files (a test plug-in)"
    option_set = OptionSet((Option("max_bytes", "largest file", 1_000_000, int),))

    def _plan(self, source: Path) -> tuple[Path, list[FileRef]]:
        root = source.resolve()
        names = sorted(p.relative_to(root).as_posix() for p in root.glob("*.txt"))
        for name in names:
            locate(root, name, max_bytes=self.options["max_bytes"])
        return root, [FileRef(name) for name in names]

    def chunks(self, file: SourceFile) -> list[Chunk]:
        paragraphs = [p.strip() for p in file.text().split("\n\n") if p.strip()]
        return [
            Chunk(key=f"{file.path}:p{n}", text=p, path=file.path, doc=file.path, title=file.path, sha256=file.sha256)
            for n, p in enumerate(paragraphs, start=1)
        ]

    def query_defaults(self) -> QueryDefaults:
        return QueryDefaults(mode="or", snippet="window", open_marker="<", close_marker=">", ellipsis="...")


class TsvFormat(DatasetFormat):
    """A folder with ``docs/*.txt`` (built with paragraphs-test), ``queries.tsv`` and ``qrels.tsv``."""

    name = "tsv-test"
    summary = "paragraph files with TSV queries and qrels (a test plug-in)"

    def detect(self, reference: str) -> bool:
        return (Path(reference) / "queries.tsv").is_file()

    def load(self, reference: str) -> Dataset:
        folder = Path(reference)
        builder = ParagraphsBuilder()
        root, refs = builder.plan(folder / "docs")
        corpus = {
            key: Passage(key, title, text)
            for ref in refs
            for key, title, text in builder.units(builder.read(root, ref))
        }
        queries = {}
        for line in (folder / "queries.tsv").read_text(encoding="utf-8").splitlines():
            query_id, text = line.split("\t")
            queries[query_id] = Query(query_id, text)
        qrels: dict[str, dict[str, int]] = {}
        for line in (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines():
            query_id, doc_id, grade = line.split("\t")
            qrels.setdefault(query_id, {})[doc_id] = int(grade)
        return Dataset(
            folder.name,
            corpus,
            queries,
            qrels,
            {
                "format": self.name,
                "path": str(folder),
                "corpus_dir": str(folder / "docs"),
                "builder": builder.name,
                "mode": "or",
            },
        )


@pytest.fixture
def plugins() -> Iterator[None]:
    registered = [
        (TOKENIZERS, WhitespaceTokenizer),
        (TOKENIZERS, AsciiTokenizer),
        (BUILDERS, ParagraphsBuilder),
        (DATASET_FORMATS, TsvFormat),
    ]
    for registry, cls in registered:
        registry.register(cls)
    yield
    for registry, cls in registered:
        registry.unregister(cls.name)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "set"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "export.txt").write_text(
        "导出 文件 保留 三十 天 。\n\nexport files are kept for 30 days\n\n备份 每天 凌晨 运行\n", encoding="utf-8"
    )
    (folder / "docs" / "billing.txt").write_text("账单 每月 一日 生成\n\ninvoice monthly\n", encoding="utf-8")
    (folder / "queries.tsv").write_text("q1\t导出 文件\nq2\texport days\nq3\t账单 生成\n", encoding="utf-8")
    (folder / "qrels.tsv").write_text(
        "q1\texport.txt:p1\t1\nq2\texport.txt:p2\t1\nq3\tbilling.txt:p1\t1\n", encoding="utf-8"
    )
    return folder


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, (args, result.stderr)
    return result.stdout


@pytest.mark.parametrize("spec", ["whitespace-test", "ascii-test"])
def test_plugins_work_through_every_command(plugins: None, dataset: Path, tmp_path: Path, spec: str) -> None:
    listed = json.loads(run("tokenizers", "--json"))
    assert {row["name"]: row["available"] for row in listed}[spec] is True
    tokens = json.loads(run("tokenize", "-t", spec, "--json", "export Files 30 days"))
    assert [t["text"] for t in tokens["tokens"]] == ["export", "files", "30", "days"]
    index = tmp_path / f"{spec}.sqlite"
    run("index", "build", str(dataset / "docs"), "-b", "paragraphs-test", "-t", spec, "-o", str(index))
    info = json.loads(run("index", "info", str(index), "--json"))
    assert info["builder"] == "paragraphs-test:max_bytes=1000000" and info["tokenizer"].split(":")[0] == spec
    keys = [json.loads(run("index", "list", str(index), "--json"))[n]["key"] for n in range(5)]
    assert keys == ["billing.txt:p1", "billing.txt:p2", "export.txt:p1", "export.txt:p2", "export.txt:p3"]
    assert run("index", "verify", str(index)).count("ok\t") == 2
    hits = json.loads(run("search", str(index), "export days", "--json", "--explain"))
    assert hits["hits"][0]["key"] == "export.txt:p2" and "<" in hits["hits"][0]["snippet"]
    assert json.loads(run("read", str(index), "export.txt", "--json"))["text"].startswith("导出")
    phrase = json.loads(run("search", str(index), "kept for 30", "--mode", "phrase", "--json"))
    assert [h["key"] for h in phrase["hits"]] == ["export.txt:p2"]
    shown = run("datasets", "show", str(dataset), "--json")
    assert json.loads(shown)["judged_queries"] == 3
    report = json.loads(
        run(
            "compare",
            str(dataset),
            "-t",
            spec,
            "-t",
            "bigram",
            "--reference-system",
            "bigram",
            "--json",
            "-o",
            str(tmp_path / "report"),
        )
    )
    rows = {row["name"].split(":")[0].split(" |")[0]: row for row in report["systems"]}
    assert rows[spec]["metrics"]["R@10"] == 1.0 and "paragraphs-test" in rows[spec]["name"]
    run_file = next((tmp_path / "report" / "runs").glob(f"{spec}*.run"))
    scored = json.loads(run("evaluate", str(run_file), str(dataset / "qrels.tsv"), "--json"))
    assert scored["all"]["R@10"] == 1.0


def test_the_native_plugin_mirror_equals_fts5(plugins: None) -> None:
    from helpers.fts5 import fts5_terms

    tokenizer = AsciiTokenizer()
    text = "Wi-Fi 密码 v2.3 ＡＢＣ naïve 导出文件"
    assert tokenizer.terms(text) == fts5_terms(tokenizer.fts5_clause, text)


# Names of the built-in plug-ins; a string equal to one of them compared against anything is a branch on
# a plug-in's name, allowed only inside that plug-in's own module.
OWN_MODULE = {
    **{name: f"tokenizers/{name}.py" for name in ("unicode61", "trigram", "jieba", "pkuseg", "bigram", "unigram")},
    **{name: f"toolkit/builders/{name}.py" for name in ("lines", "sections", "passages")},
}


def test_no_module_branches_on_a_plug_in_name() -> None:
    found = []
    for folder in ("toolkit", "eval", "tokenizers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, (ast.Compare, ast.Match)):
                    continue
                for constant in ast.walk(node):
                    if (
                        isinstance(constant, ast.Constant)
                        and constant.value in OWN_MODULE
                        and OWN_MODULE[constant.value] != relative
                    ):
                        found.append(f"{relative}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "branches on plug-in names:\n" + "\n".join(found)


def test_the_name_check_catches_a_branch(tmp_path: Path) -> None:
    """The check above finds what it looks for (a module with one such branch)."""
    source = 'def f(tokenizer):\n    return 1 if tokenizer.name == "trigram" else 2\n'
    tree = ast.parse(source)
    hits = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(isinstance(c, ast.Constant) and c.value in OWN_MODULE for c in ast.walk(node))
    ]
    assert len(hits) == 1
