"""rag-eval queries synth: seeded known-item queries labelled with their unit, in documented kinds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli
from rag_eval.errors import DatasetError
from rag_eval.eval.datasets.beir import load_beir
from rag_eval.eval.datasets.sources import source_units
from rag_eval.eval.synth.generate import KIND_PREFIX, KINDS, generate, synthesize
from rag_eval.eval.synth.wordfind import discover, latin_words
from rag_eval.files.outputs import OutputError


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def handbook_all() -> tuple[dict, list]:
    """Every supported (unit, kind) of the handbook: n is larger than units x kinds."""
    _root, _builder, corpus = source_units("handbook")
    queries, _facts = generate(corpus, len(corpus) * len(KINDS), seed=5)
    return corpus, queries


def test_same_arguments_give_byte_identical_folders(tmp_path: Path) -> None:
    first = synthesize("handbook", 70, tmp_path / "a", seed=3)
    synthesize("handbook", 70, tmp_path / "b", seed=3)
    files = _files(tmp_path / "a")
    assert set(files) == {"corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "synthetic.json"}
    assert files == _files(tmp_path / "b")
    assert sum(first.counts.values()) == 70
    synthesize("handbook", 70, tmp_path / "c", seed=4)
    assert _files(tmp_path / "c")["queries.jsonl"] != files["queries.jsonl"]


def test_the_folder_is_a_beir_set_whose_qrels_name_the_source_unit(tmp_path: Path) -> None:
    synthesize("evidence-mini", 30, tmp_path / "s", seed=1)
    dataset = load_beir(tmp_path / "s")
    _root, _builder, corpus = source_units("evidence-mini")
    assert list(dataset.corpus) == list(corpus)
    assert len(dataset.queries) == 30
    for query in dataset.queries.values():
        assert query.kind.startswith(KIND_PREFIX) and query.kind[len(KIND_PREFIX) :] in KINDS
        assert query.text.strip()
        assert len(dataset.qrels[query.id]) == 1 and set(dataset.qrels[query.id].values()) == {1}
    record = json.loads((tmp_path / "s" / "synthetic.json").read_text(encoding="utf-8"))
    assert record["seed"] == 1 and sum(record["kinds"].values()) == 30 and "synthetic" in record["note"]


def test_every_query_comes_from_its_unit(handbook_all: tuple[dict, list]) -> None:
    corpus, queries = handbook_all
    by_kind: dict[str, dict[str, str]] = {}
    for query in queries:
        assert query.text.strip(), query
        by_kind.setdefault(query.kind, {})[query.unit] = query.text
    assert set(by_kind) == set(KINDS) - {"simplified"}  # the handbook is in simplified script
    for unit, text in by_kind["terms"].items():
        passage = corpus[unit]
        assert all(term in f"{passage.title}\n{passage.text}" for term in text.split(" ")), text
        assert by_kind["compacted"][unit] == text.replace(" ", "")
        typo = by_kind["typo"].get(unit, "")
        if not typo:  # only Latin terms: no Han character to replace
            assert not any("\u4e00" <= char <= "\u9fff" for char in text)
            continue
        assert len(typo) == len(text) and sum(a != b for a, b in zip(typo, text, strict=True)) == 1
        if unit in by_kind["traditional"]:
            assert by_kind["traditional"][unit] != text
    for unit, text in by_kind["heading"].items():
        assert corpus[unit].title.endswith(text)
    headings = list(by_kind["heading"].values())
    assert len(headings) == len(set(headings))  # a heading names one unit only


def test_traditional_queries_differ_from_the_simplified_ones(handbook_all: tuple[dict, list]) -> None:
    _corpus, queries = handbook_all
    terms = {q.unit: q.text for q in queries if q.kind == "terms"}
    traditional = [q for q in queries if q.kind == "traditional"]
    assert traditional
    assert all(q.text != terms[q.unit] and len(q.text) == len(terms[q.unit]) for q in traditional)


def test_word_discovery_finds_recurring_cohesive_free_words_and_keeps_latin_runs() -> None:
    # 数据 and 备份 recur between varied neighbours; strings across them (据春, 数据春) are not words, and
    # 6000 characters of other text make the two words' characters rare enough to be cohesive.
    seasons = "春夏秋冬"
    texts = [f"{a}数据{b}备份{c}" for a in seasons for b in seasons for c in seasons]
    other = "".join(chr(0x4E00 + i) for i in range(6000))
    assert discover([*texts, other]) == {"数据", "备份"}
    assert discover(texts) == set()  # in so little text nothing is rare enough to hold together
    assert latin_words("错误 E-619 与 OAuth 2.0，编号 12 和 2026") == ["E-619", "OAuth", "2026"]


def test_terms_use_no_strategy_under_test(tmp_path: Path) -> None:
    # Regression guard: a generator that segments with one strategy favours it in every comparison.
    script = (
        "import sys\n"
        "from rag_eval.eval.synth.generate import synthesize\n"
        f"synthesize('handbook', 60, {str(tmp_path / 'out')!r}, seed=2)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jieba', 'spacy_pkuseg', 'pkuseg')"
        " or m.startswith('rag_eval.tokenizers')))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_library_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="-n must be"):
        synthesize("handbook", 0, tmp_path / "x")
    with pytest.raises(DatasetError, match="no unit of this source supports query kind 'simplified'"):
        synthesize("handbook", 5, tmp_path / "x", kinds=("simplified",))
    (tmp_path / "taken").mkdir()
    with pytest.raises(OutputError, match="already exists"):
        synthesize("handbook", 5, tmp_path / "taken")
    assert not (tmp_path / "x").exists() and list((tmp_path / "taken").iterdir()) == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["handbook", "-n", "0"], "-n must be from 1"),
        (["handbook", "-n", "5", "--kinds", "terms,nope"], "unknown query kind 'nope'"),
        (["handbook", "-n", "5", "--kinds", "simplified"], "supports query kind 'simplified'"),
        (["no/such/folder", "-n", "5"], "no such file or directory"),
        (["handbook", "-n", "5", "-o", "EXISTING"], "already exists"),
    ],
)
def test_cli_errors_are_one_line(tmp_path: Path, arguments: list[str], message: str) -> None:
    (tmp_path / "EXISTING").mkdir()
    if "-o" not in arguments:
        arguments = [*arguments, "-o", str(tmp_path / "new")]
    arguments = [str(tmp_path / "EXISTING") if a == "EXISTING" else a for a in arguments]
    result = CliRunner().invoke(cli, ["queries", "synth", *arguments])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and message in result.stderr.splitlines()[0]
    assert "Traceback" not in result.stderr and not (tmp_path / "new").exists()


def test_cli_writes_and_summarises(tmp_path: Path) -> None:
    target = tmp_path / "synth"
    result = CliRunner().invoke(
        cli, ["queries", "synth", "handbook", "-n", "12", "--kinds", "heading,terms", "-o", str(target)]
    )
    assert result.exit_code == 0, result.output
    assert f"wrote {target}: 12 synthetic queries" in result.output
    assert "heading      6" in result.output and "terms        6" in result.output
    kinds = {json.loads(line)["kind"] for line in (target / "queries.jsonl").read_text(encoding="utf-8").splitlines()}
    assert kinds == {"synthetic:heading", "synthetic:terms"}


def test_cli_says_when_the_units_support_fewer_queries_than_asked(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["queries", "synth", "evidence-mini", "-n", "5000", "-o", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    total = len((tmp_path / "s" / "queries.jsonl").read_text(encoding="utf-8").splitlines())
    assert 0 < total < 5000 and f"asked for 5000: the units support only {total}" in result.output


def test_the_default_kind_is_terms_and_all_means_every_kind(tmp_path: Path) -> None:
    """The default is the kind measured to agree best with real queries (reports/synthetic.md)."""
    for extra, expected in (([], {"synthetic:terms"}), (["--kinds", "all"], None)):
        target = tmp_path / ("all" if extra else "default")
        result = CliRunner().invoke(cli, ["queries", "synth", "handbook", "-n", "40", *extra, "-o", str(target)])
        assert result.exit_code == 0, result.output
        lines = (target / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        kinds = {json.loads(line)["kind"] for line in lines}
        assert kinds == expected if expected else len(kinds) >= 5


# -- queries synth: why a kind is unsupported, and what helps --------------------------------------------------


@pytest.fixture
def two_notes(tmp_path: Path) -> Path:
    """Two short Markdown files: too little text for any Chinese word to recur four times."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "install.md").write_text("# 安装\n\n先下载安装包，然后运行安装程序。\n", encoding="utf-8")
    (folder / "settings.md").write_text("# 配置\n\n打开设置页面，修改服务器地址。\n", encoding="utf-8")
    return folder


def test_the_default_kind_unsupported_says_why_and_not_to_drop_an_option_never_given(
    two_notes: Path, tmp_path: Path
) -> None:
    """Regression: `queries synth SMALL -n 5` said 'drop it from --kinds' to a user who gave no --kinds."""
    result = CliRunner().invoke(cli, ["queries", "synth", str(two_notes), "-n", "5", "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: no unit of this source supports the default query kind 'terms'")
    assert "occurs at least 4 times in the corpus" in error and "(this corpus has 0 such words)" in error
    assert "drop it" not in hint and "--kinds heading" in hint and "larger corpus" in hint
    assert not (tmp_path / "out").exists()


def test_a_named_unsupported_kind_says_why_and_what_this_source_supports(two_notes: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["queries", "synth", str(two_notes), "-n", "5", "--kinds", "heading,typo", "-o", str(tmp_path / "out")]
    )
    assert result.exit_code == 1
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: no unit of this source supports query kind 'typo'")
    assert "none of its 2 units holds the 2 words a query samples" in error
    assert (
        hint
        == "hint: drop it from --kinds (this source supports: heading), or use a larger corpus, in which words recur"
    )
    handbook = CliRunner().invoke(
        cli, ["queries", "synth", "handbook", "-n", "5", "--kinds", "simplified", "-o", str(tmp_path / "h")]
    )
    assert "traditional-script corpus" in handbook.stderr and "larger corpus" not in handbook.stderr
