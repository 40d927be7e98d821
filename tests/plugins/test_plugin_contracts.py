"""Broken plug-ins fail with one ``error:`` line naming them, never a traceback and never a wrong index; the
contract checks hold built-ins to the same rules (pkuseg's tokens with control characters)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import regex
from click.testing import CliRunner
from helpers import invoke, one_error

from rag_eval.builders import BUILDERS, Builder, QueryDefaults, SourceFile
from rag_eval.builders.base import FileRef
from rag_eval.cli import cli
from rag_eval.errors import RegistryError
from rag_eval.records import Chunk
from rag_eval.spec import Option, OptionSet
from rag_eval.tokenizers import TOKENIZERS, PythonTokenizer, Token, Tokenizer


def _words(text: str) -> list[Token]:
    return [Token(m.group(), m.start(), m.end()) for m in regex.finditer(r"\S+", text)]


class RaisingTokenizer(PythonTokenizer):
    name = "audit-raises"

    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        if "备份" in text:
            raise RuntimeError("boom")
        yield from (m.span() for m in regex.finditer(r"\S+", text))


class SpacedTokenizer(Tokenizer):
    name = "audit-spaced"

    def _tokenize(self, text: str) -> list[Token]:
        return [Token(m.group(), m.start(), m.end()) for m in regex.finditer(r"\S+(?: \S+)?", text)]


class CleanSpacedTokenizer(PythonTokenizer):
    name = "audit-clean-spaced"
    clean_spans = True

    def _spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in regex.finditer(r"\S+(?: \S+)?", text)]


class NumbersTokenizer(Tokenizer):
    name = "audit-numbers"

    def _tokenize(self, text: str) -> list[Any]:
        return [Token(len(t.text), t.start, t.end) for t in _words(text)]  # type: ignore[arg-type]


class StringsTokenizer(Tokenizer):
    name = "audit-strings"

    def _tokenize(self, text: str) -> list[Any]:
        return text.split()


class EmptyTokenizer(Tokenizer):
    name = "audit-empty"

    def _tokenize(self, text: str) -> list[Token]:
        return [Token("", 0, 0), *_words(text)]


class FarTokenizer(Tokenizer):
    name = "audit-far"

    def _tokenize(self, text: str) -> list[Token]:
        return [Token(t.text, t.start + 1000, t.end + 1000) for t in _words(text)]


class NotATokenizer:
    name = "audit-not-a-tokenizer"


class BadDefault(PythonTokenizer):
    name = "audit-bad-default"
    option_set = OptionSet((Option("n", "n", "four", int),))


class BadKey(PythonTokenizer):
    name = "audit-bad-key"
    option_set = OptionSet((Option("Max-Len", "n", 1, int),))


class RaisingBuilder(Builder):
    name = "audit-raising-builder"
    option_set = OptionSet((Option("max_bytes", "largest file", 1_000_000, int),))

    def _plan(self, source: Path) -> tuple[Path, list[FileRef]]:
        root = source.resolve()
        return root, [FileRef(p.name) for p in sorted(root.glob("*.md"))]

    def chunks(self, file: SourceFile) -> Iterator[Chunk]:
        yield Chunk(key=f"{file.path}:1", text="导出 文件", path=file.path)
        raise KeyError("boom in chunks")

    def query_defaults(self) -> QueryDefaults:
        return QueryDefaults(mode="or", snippet="window", open_marker="[", close_marker="]", ellipsis="…")


class BadChunkBuilder(RaisingBuilder):
    name = "audit-bad-chunk-builder"

    def chunks(self, file: SourceFile) -> list[Any]:
        return [("not", "a", "chunk")]


TOKENIZER_PLUGINS = [
    RaisingTokenizer,
    SpacedTokenizer,
    CleanSpacedTokenizer,
    NumbersTokenizer,
    StringsTokenizer,
    EmptyTokenizer,
    FarTokenizer,
]


@pytest.fixture
def plugins() -> Iterator[None]:
    registered = [(TOKENIZERS, cls) for cls in TOKENIZER_PLUGINS] + [
        (BUILDERS, RaisingBuilder),
        (BUILDERS, BadChunkBuilder),
    ]
    for registry, cls in registered:
        registry.register(cls)
    yield
    for registry, cls in registered:
        registry.unregister(cls.name)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# 导出\n\n导出 文件 保留 三十 天\n", encoding="utf-8")
    (folder / "b.md").write_text("# 备份\n\n备份 每天 凌晨 运行\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "audit-raises",
            "tokenizer 'audit-raises:t2s=false' failed on the text '备份' (2 characters): RuntimeError: boom",
        ),
        ("audit-spaced", "the token '# 导出' holds ' '"),
        ("audit-clean-spaced", "holds ' '; a stored token holds no whitespace"),
        ("audit-numbers", "token 0 has the text 2, not a non-empty str"),
        ("audit-strings", "token 0 is '导出', not a rag_eval.tokenizers.Token"),
        ("audit-empty", "token 0 has the text '', not a non-empty str"),
        ("audit-far", "token 0 ('导出') has offsets (1000, 1002) outside [0, 2]"),
    ],
)
def test_a_broken_tokenizer_is_one_error_and_no_index(
    plugins: None, corpus: Path, tmp_path: Path, spec: str, expected: str
) -> None:
    index = tmp_path / "kb.sqlite"
    line = one_error(invoke("index", "build", str(corpus), "-b", "sections", "-t", spec, "-o", str(index)))
    assert expected in line
    assert not index.exists()


def test_a_broken_tokenizer_keeps_the_previous_index(plugins: None, corpus: Path, tmp_path: Path) -> None:
    index = tmp_path / "kb.sqlite"
    CliRunner().invoke(cli, ["index", "build", str(corpus), "-b", "sections", "-t", "bigram", "-o", str(index)])
    before = index.read_bytes()
    one_error(invoke("index", "build", str(corpus), "-b", "sections", "-t", "audit-raises", "-o", str(index)))
    assert index.read_bytes() == before


def test_a_broken_tokenizer_in_tokenize_and_search(plugins: None) -> None:
    assert "RuntimeError: boom" in one_error(invoke("tokenize", "-t", "audit-raises", "备份 文件"))
    assert "holds ' '" in one_error(invoke("tokenize", "-t", "audit-spaced", "导出 文件"))


def test_a_class_that_is_no_tokenizer_is_refused_and_listed_unavailable(tmp_path: Path) -> None:
    for cls in (NotATokenizer, BadDefault, BadKey):
        with pytest.raises(RegistryError, match="cannot register"):
            TOKENIZERS.register(cls)
        assert cls.name not in TOKENIZERS


def test_the_listing_survives_an_entry_point_that_loads_no_tokenizer(tmp_path: Path) -> None:
    """`rag-eval tokenizers` lists an entry point that loads a non-Tokenizer (or one with an unusable option
    declaration) as unavailable instead of dying with an AttributeError traceback."""
    import subprocess
    import sys

    (tmp_path / "audit_bad_plugin.py").write_text(
        "from rag_eval.tokenizers import PythonTokenizer\n"
        "from rag_eval.spec import Option, OptionSet\n"
        "class NotATokenizer:\n    name = 'audit-not-a-tokenizer'\n"
        "class BadDefault(PythonTokenizer):\n"
        "    name = 'audit-bad-default'\n"
        "    option_set = OptionSet((Option('n', 'n', 'four', int),))\n",
        encoding="utf-8",
    )
    dist = tmp_path / "audit_bad_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: audit-bad-plugin\nVersion: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(
        "[rag_eval.tokenizers]\n"
        "audit-not-a-tokenizer = audit_bad_plugin:NotATokenizer\n"
        "audit-bad-default = audit_bad_plugin:BadDefault\n",
        encoding="utf-8",
    )
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "rag_eval", "tokenizers"], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "audit-not-a-tokenizer  (plug-in)  unavailable" in result.stdout
    assert "not a subclass of rag_eval.tokenizers.base.Tokenizer" in result.stdout
    assert "audit-bad-default  (plug-in)  unavailable" in result.stdout
    assert "bigram  (Python)  available" in result.stdout
    built = subprocess.run(
        [sys.executable, "-m", "rag_eval", "tokenize", "-t", "audit-bad-default", "x"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert built.returncode == 1 and "Traceback" not in built.stderr
    assert "declares option 'n' with default 'four', which it refuses" in built.stderr


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        (
            "audit-raising-builder",
            "builder 'audit-raising-builder' failed in chunks on a.md: KeyError: 'boom in chunks'",
        ),
        ("audit-bad-chunk-builder", "not a rag_eval.records.Chunk"),
    ],
)
def test_a_broken_builder_is_one_error_and_no_index(
    plugins: None, corpus: Path, tmp_path: Path, builder: str, expected: str
) -> None:
    index = tmp_path / "kb.sqlite"
    line = one_error(invoke("index", "build", str(corpus), "-b", builder, "-t", "bigram", "-o", str(index)))
    assert expected in line
    assert not index.exists()


def test_no_builder_recognises_names_what_builders_declare(tmp_path: Path) -> None:
    class TxtBuilder(RaisingBuilder):
        name = "audit-txt"
        recognised_layout = "audit .txt paragraphs"

        @classmethod
        def recognises(cls, source: Path) -> bool:
            return any(source.glob("*.txt"))

    BUILDERS.register(TxtBuilder)
    try:
        (tmp_path / "empty").mkdir()
        line = one_error(
            invoke("index", "build", str(tmp_path / "empty"), "-t", "bigram", "-o", str(tmp_path / "x.sqlite"))
        )
        assert "a lines manifest.json, a corpus.jsonl, Markdown files or audit .txt paragraphs" in line
    finally:
        BUILDERS.unregister("audit-txt")


@pytest.mark.parametrize("spec", ["pkuseg:model=mini", "jieba", "bigram"])
def test_tokens_never_hold_a_control_character_fts5_separates_on(spec: str) -> None:
    """pkuseg gave '\\x01c' and '\\x00z': FTS5's whitespace clause stores 'c' and 'z' (and stops at NUL)."""
    from rag_eval.tokenizers import get_tokenizer

    tokenizer = get_tokenizer(spec)
    terms = tokenizer.terms("ab\x01cd 导出\x7f文件 x \x00z 后面")
    assert not any(regex.search(r"[\x00-\x1f\x7f]", term) for term in terms), terms
    assert [t.text for t in tokenizer.tokenize("ab\x01cd")] == tokenizer.terms("ab\x01cd")


def test_a_plug_in_that_fails_to_import_is_left_out_of_a_default_compare(tmp_path: Path) -> None:
    """docs/plugins.md: a plug-in that fails to import is reported as unavailable without breaking the others;
    `compare` without -t aborted on it."""
    import json
    import os
    import subprocess
    import sys

    dist = tmp_path / "audit_missing_plugin-1.0.dist-info"
    dist.mkdir()
    metadata = "Metadata-Version: 2.1\nName: audit-missing-plugin\nVersion: 1.0\n"
    (dist / "METADATA").write_text(metadata, encoding="utf-8")
    (dist / "entry_points.txt").write_text(
        "[rag_eval.tokenizers]\naudit-import-fails = audit_no_such_module:Tokenizer\n", encoding="utf-8"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "rag_eval", "compare", "evidence-mini", "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "audit-import-fails" in result.stdout + result.stderr  # named as left out, with its reason
    systems = json.loads((out / "report.json").read_text(encoding="utf-8"))["systems"]
    assert systems and not any("audit-import-fails" in json.dumps(system) for system in systems)
