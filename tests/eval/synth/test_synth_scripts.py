"""queries synth writes queries in the script mix of the unit they come from: a Chinese passage with English
words, URLs and code gives queries that hold Chinese; an English passage still gives English queries; the
share of Han-only, mixed and Latin-only queries is reported (synthetic.json, the command's output, compare's
label-free section)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli
from rag_eval.eval.datasets.sources import source_units
from rag_eval.eval.synth.generate import KINDS, generate, han_terms, synthesize
from rag_eval.eval.synth.wordfind import han_share, script_of, without_links

# The test's own reading of scripts, independent of the code under test.
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
LATIN = re.compile(r"[A-Za-z]")

# 50 two-character "words" of distinct Han characters: each recurs between varied neighbours, so the
# corpus's own statistics find them (as in test_synth's discovery test).
WORDS = [chr(0x5000 + 2 * i) + chr(0x5001 + 2 * i) for i in range(50)]
ENGLISH = (
    "install configure server client token webhook account backup restore migrate cluster deploy network "
    "storage record export import review release upgrade monitor schedule archive session".split()
)
TECH = ["OAuth", "GitHub", "Docker", "Redis", "Kafka", "Nginx", "PostgreSQL", "Kubernetes"]
CODE = """```bash
export API_TOKEN=example_token_value
curl --silent --header accept https://api.example.com/v1/items/{n}
kubectl apply --filename deployment.yaml --namespace production
```"""


def _chinese(rng: random.Random, words: int) -> str:
    parts = []
    for position in range(words):
        parts.append(rng.choice(WORDS))
        if position % 7 == 6:
            parts.append(rng.choice("，。"))
    return "".join(parts) + "。"


def _mixed_corpus(root: Path) -> dict[str, str]:
    """A Markdown folder of Chinese sections carrying English words, a URL and a code block, and English
    sections; returns each section's title's last part -> ``zh`` or ``en`` (what the test wrote)."""
    rng = random.Random(11)
    written: dict[str, str] = {}
    for number in range(4):
        sections = [f"# {WORDS[number]}{WORDS[number + 10]}指南\n"]
        for index in range(10):
            heading = "Installation" if (number, index) == (0, 0) else f"{rng.choice(WORDS)}{rng.choice(WORDS)}{index}"
            tech = rng.sample(TECH, 2)
            body = (
                f"{_chinese(rng, 15)}{tech[0]} {_chinese(rng, 8)}详见 https://github.com/Ailln/project-{number}-{index}，"
                f"{_chinese(rng, 10)}`{tech[1]}`{_chinese(rng, 5)}\n\n{CODE.format(n=index)}\n"
            )
            sections.append(f"## {heading}\n\n{body}")
            written[heading] = "zh"
        (root / f"zh{number}.md").write_text("\n".join(sections), encoding="utf-8")
    sections = ["# Operations guide\n"]
    for index in range(12):
        heading = f"Operations step {index}"
        sentences = [" ".join(rng.choice(ENGLISH) for _ in range(9)).capitalize() + "." for _ in range(4)]
        sections.append(f"## {heading}\n\n{' '.join(sentences)} See https://docs.example.org/guide/{index}.\n")
        written[heading] = "en"
    (root / "en.md").write_text("\n".join(sections), encoding="utf-8")
    return written


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict[str, str]]:
    root = tmp_path_factory.mktemp("mixed-docs")
    written = _mixed_corpus(root)
    _root, _builder, corpus = source_units(str(root))
    language = {}
    for key, passage in corpus.items():
        last = passage.title.rsplit(" > ", 1)[-1].strip()
        if last in written:
            language[key] = written[last]
    return root, corpus, language


def test_the_corpus_is_what_the_test_means(mixed: tuple[Path, dict, dict[str, str]]) -> None:
    """Chinese sections whose letters, code and link included, are mostly Latin: only their prose is Chinese."""
    _root, corpus, language = mixed
    assert Counter(language.values()) == {"zh": 40, "en": 12}
    latin_heavy = 0
    for key, lang in language.items():
        text = f"{corpus[key].title}\n{corpus[key].text}"
        latin_heavy += lang == "zh" and len(LATIN.findall(text)) > len(HAN.findall(text))
    assert latin_heavy == 40


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_no_query_without_han_comes_from_a_chinese_unit(mixed: tuple[Path, dict, dict[str, str]], seed: int) -> None:
    _root, corpus, language = mixed
    queries, facts = generate(corpus, len(corpus) * len(KINDS), seed=seed)
    assert facts["words_found"] >= 20  # the Han words recur: Chinese units have Chinese words to draw
    by_language: Counter[tuple[str, str]] = Counter()
    for query in queries:
        lang = language.get(query.unit)
        if lang == "zh":
            assert HAN.search(query.text), (query.kind, query.text)
        elif lang == "en":
            assert LATIN.search(query.text), (query.kind, query.text)
        assert not re.search(r"github|Ailln|https?", query.text), query.text  # a link is not a word of the text
        by_language[lang, query.kind] += 1
    # Latin units still give queries, of the kinds their terms support.
    assert by_language["en", "terms"] == 12 and by_language["en", "compacted"] == 12
    assert by_language["zh", "terms"] == 40
    # The English heading of a Chinese section is not a query of it; the Chinese headings are.
    headings = {query.text for query in queries if query.kind == "heading"}
    assert "Installation" not in headings and len(headings) >= 39


def test_chinese_units_with_english_words_give_mostly_chinese_and_some_mixed_queries(
    mixed: tuple[Path, dict, dict[str, str]],
) -> None:
    _root, corpus, language = mixed
    queries, _facts = generate(corpus, 200, kinds=("terms",), seed=5)
    scripts = Counter(script_of(q.text) for q in queries if language.get(q.unit) == "zh")
    assert set(scripts) <= {"han", "mixed"} and scripts["han"] > scripts["mixed"] > 0
    words = [word for q in queries if language.get(q.unit) == "zh" for word in q.text.split(" ")]
    assert sum(1 for word in words if HAN.search(word)) / len(words) >= 0.75


def test_script_shares_are_reported_and_counted_right(tmp_path: Path, mixed: tuple[Path, dict, dict[str, str]]) -> None:
    root, _corpus, language = mixed
    target = tmp_path / "synth"
    result = CliRunner().invoke(
        cli, ["queries", "synth", str(root), "-n", "150", "--kinds", "terms,question,heading", "-o", str(target)]
    )
    assert result.exit_code == 0, result.output
    lines = (target / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines]
    expected = Counter(
        "mixed" if HAN.search(t) and LATIN.search(t) else "han" if HAN.search(t) else "latin" for t in texts
    )
    assert all(expected.values()) and len(expected) == 3  # this corpus gives every class
    record = json.loads((target / "synthetic.json").read_text(encoding="utf-8"))
    assert record["scripts"] == {script: expected[script] for script in ("han", "mixed", "latin")}
    # The sections the test wrote, and each file's top heading (a unit too): four Chinese, one English.
    assert record["unit_scripts"] == {"han": 40 + 4, "latin": 12 + 1, "none": 0} and len(language) == 52
    total = len(texts)
    shares = ", ".join(
        f"{name} {expected[script]} ({100 * expected[script] / total:.0f}%)"
        for script, name in (("han", "Han-only"), ("mixed", "mixed"), ("latin", "Latin-only"))
    )
    assert f"scripts: {shares} (units: 44 Han-majority, 13 Latin-majority)" in result.output

    # compare's label-free section counts them too, and the report says it for synthetic questions.
    report = tmp_path / "report"
    result = CliRunner().invoke(cli, ["compare", str(target), "-t", "unigram", "--no-text", "-o", str(report)])
    assert result.exit_code == 0, result.output
    section = json.loads((report / "report.json").read_text(encoding="utf-8"))["without_labels"]
    assert section["scripts"] == record["scripts"]
    line = f"The {total} synthetic questions by script: {shares}."
    assert line in (report / "report.md").read_text(encoding="utf-8")
    assert line in (report / "report.html").read_text(encoding="utf-8")


def test_real_questions_get_no_synthetic_script_line(tmp_path: Path) -> None:
    report = tmp_path / "report"
    result = CliRunner().invoke(cli, ["compare", "evidence-mini", "-t", "unigram", "-o", str(report)])
    assert result.exit_code == 0, result.output
    section = json.loads((report / "report.json").read_text(encoding="utf-8"))["without_labels"]
    assert sum(section["scripts"].values()) == section["questions"]
    assert "synthetic questions by script" not in (report / "report.md").read_text(encoding="utf-8")


def test_the_same_seed_gives_the_same_files(tmp_path: Path, mixed: tuple[Path, dict, dict[str, str]]) -> None:
    root, _corpus, _language = mixed
    files = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        synthesize(str(root), 120, tmp_path / name, kinds=None, seed=seed)
        files.append({p.name: p.read_bytes() for p in sorted((tmp_path / name).rglob("*")) if p.is_file()})
    assert files[0] == files[1] and files[0]["queries.jsonl"] != files[2]["queries.jsonl"]


def test_han_share_reads_the_prose_not_its_code_or_links() -> None:
    prose = "用数据备份恢复账号"  # 9 Han characters
    assert han_share(prose) == 1.0
    code = f"{prose}\n```bash\nexport TOKEN=abcdefghijklmnop\n```\n`inline_code_here` https://github.com/Ailln/x"
    assert han_share(code) == 1.0
    assert han_share(f"{prose} OAuth") == pytest.approx(9 / 14)
    assert han_share("```\nonly code\n```") == 0.0  # no prose: the code's own letters decide
    assert han_share("2026 404") is None
    assert without_links("见 https://github.com/Ailln/nlp，然后[文档](docs/a.md)。") == "见  ，然后[文档] 。"
    assert [script_of(t) for t in ("数据", "数据 OAuth", "OAuth", "404")] == ["han", "mixed", "latin", "none"]


@pytest.mark.parametrize(
    ("wanted", "share", "han"),
    [
        (4, 1.0, 4),
        (4, 0.9, 4),
        (4, 0.8, 3),
        (4, 0.6, 2),
        (2, 0.5, 1),
        (2, 0.51, 1),
        (4, 0.3, 1),
        (3, 0.0, 0),
        (2, 0.49, 1),
        (3, 0.45, 1),
    ],
)
def test_the_han_quota_follows_the_share(wanted: int, share: float, han: int) -> None:
    assert han_terms(wanted, share) == han
