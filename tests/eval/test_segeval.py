"""Segmentation accuracy (rag-eval segeval): the bakeoff's definitions on hand-computed cases, the test-set
layout and its errors, which strategies count as segmenters, and, when present, the SIGHAN 2005 data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO, invoke, one_error, tokenizer_for

from rag_eval.cli import cli
from rag_eval.errors import DatasetError
from rag_eval.eval.segeval import (
    CHARACTERS,
    WORDS,
    Gold,
    evaluate_segmentation,
    find_sets,
    read_output,
    score,
)
from rag_eval.files.textio import read_text, split_lines
from rag_eval.tokenizers import TOKENIZERS, Token

#: The shared SIGHAN 2005 test sets (research use only: never copied into the project), when present.
SIGHAN = REPO.parent / "shared" / "datasets" / "segmentation"

# Our own sentences. Gold: 我们|喜欢|北京|。 and 研究生|命|起源; the training list lacks 研究生 and 命 (OOV).
GOLD = ["我们  喜欢  北京  。", "研究生  命  起源"]
TEXT = ["我们喜欢北京。", "研究生命起源"]
VOCABULARY = {"我们", "喜欢", "北京", "。", "研究", "生命", "起源"}
# The output: 我们|喜欢北京 (。 is covered by no token) and 研究|生命|起源.
TOKENS = [
    [Token("我们", 0, 2), Token("喜欢北京", 2, 6)],
    [Token("研究", 0, 2), Token("生命", 2, 4), Token("起源", 4, 6)],
]


def scores(gold: list[str], text: list[str], tokens: list[list[Token]], rule: str, vocabulary: set[str] = VOCABULARY):
    built = Gold.from_lines(gold, vocabulary)
    return score(built, read_output(built.text, text, tokens), rule)


def test_precision_recall_f1_and_oov_recall_by_hand() -> None:
    # Output words 我们 喜欢北京 。 研究 生命 起源 (6); correct 我们 。 起源 (3); gold 7, of which 2 OOV, 0 found.
    result = scores(GOLD, TEXT, TOKENS, "chars")
    assert (result.output_words, result.gold_words, result.correct) == (6, 7, 3)
    assert result.precision == pytest.approx(3 / 6)
    assert result.recall == pytest.approx(3 / 7)
    assert result.f1 == pytest.approx(6 / 13)  # 2PR/(P+R) = (3/7) / (13/14)
    assert (result.oov_words, result.oov_correct, result.oov_recall) == (2, 0, 0.0)
    assert result.iv_recall == pytest.approx(3 / 5)


def test_skip_rule_leaves_punctuation_out_of_both_sides() -> None:
    # Gold without 。: 6 words (2 OOV); output without it: 5 words, correct 我们 起源.
    result = scores(GOLD, TEXT, TOKENS, "skip")
    assert (result.output_words, result.gold_words, result.correct) == (5, 6, 2)
    assert result.precision == pytest.approx(2 / 5)
    assert result.recall == pytest.approx(2 / 6)
    assert result.f1 == pytest.approx(4 / 11)
    assert result.oov_recall == 0.0
    assert result.iv_recall == pytest.approx(2 / 4)


def test_uncovered_run_counts_as_one_word_or_one_per_character() -> None:
    gold, text, tokens = ["好  ！！"], ["好！！"], [[Token("好", 0, 1)]]
    per_character = scores(gold, text, tokens, "chars", {"好"})
    assert (per_character.output_words, per_character.correct, per_character.gold_words) == (3, 1, 2)
    assert per_character.oov_recall == 0.0  # ！！ is not in the word list
    per_run = scores(gold, text, tokens, "run", {"好"})
    assert (per_run.precision, per_run.recall, per_run.f1, per_run.oov_recall) == (1.0, 1.0, 1.0, 1.0)


def test_spans_use_the_original_offsets_of_normalised_tokens() -> None:
    # unigram folds ＡＢ to ab but its token keeps offsets 0-2 of the original text; the space is not a character.
    text = ["ＡＢ 导出"]
    tokens = [tokenizer_for("unigram").tokenize(text[0])]
    assert tokens[0][0] == Token("ab", 0, 2)
    result = scores(["ＡＢ  导出"], text, tokens, "chars", {"导出"})
    assert (result.output_words, result.correct, result.gold_words) == (3, 1, 2)  # ＡＢ right, 导|出 wrong
    assert result.oov_recall == 1.0 and result.iv_recall == 0.0


def test_a_line_break_moved_between_the_files_still_aligns() -> None:
    # As in the MSR release: the opening quote ends a gold line but starts the next test line.
    gold, text = ["他说  “", "好  。"], ["他说", "“好。"]
    tokens = [[Token("他说", 0, 2)], [Token("好", 1, 2)]]
    result = scores(gold, text, tokens, "chars", {"他说", "好"})
    assert (result.precision, result.recall, result.f1) == (1.0, 1.0, 1.0)


def test_a_cut_inside_a_character_that_normalisation_expands_is_no_overlap() -> None:
    # ℃ normalises to °c; a segmenter that cuts 3°|c之 gives two tokens that both take the whole ℃.
    text = ["3℃之间"]
    output = read_output("3℃之间", text, [[Token("3°", 0, 2), Token("c之", 1, 3), Token("间", 3, 4)]])
    assert (output.overlaps, output.split_characters) == (0, 1)
    assert output.kind() == (WORDS, "")
    overlapping = read_output("3℃之间", text, [[Token("3°c之", 0, 3), Token("之间", 2, 4)]])
    assert (overlapping.overlaps, overlapping.split_characters) == (1, 0)


def test_different_text_is_an_error_naming_the_line() -> None:
    built = Gold.from_lines(GOLD, VOCABULARY)
    with pytest.raises(DatasetError, match=r"test:2: the text differs from the gold at character 3"):
        read_output(built.text, ["我们喜欢北京。", "研究所命起源"], [[], []], "test")
    with pytest.raises(DatasetError, match="not the same text"):
        read_output(built.text, TEXT[:1], [[]], "test")


def test_no_output_words_leaves_precision_undefined() -> None:
    built = Gold.from_lines([], set())
    result = score(built, read_output("", [], []), "chars")
    assert (result.precision, result.recall, result.f1, result.oov_recall) == (None, None, None, None)


@pytest.mark.parametrize(
    ("spec", "kind", "why"),
    [
        ("unigram", CHARACTERS, ""),
        ("jieba:mode=precise", WORDS, ""),
        ("jieba", "", "overlap"),  # search mode adds 中华, 华人, 人民 ... inside 中华人民共和国
        ("bigram", "", "overlap"),
        ("trigram", "", "overlap"),
        ("unicode61", "", "never cuts between two Han characters"),
    ],
)
def test_what_counts_as_a_segmentation_is_measured(spec: str, kind: str, why: str) -> None:
    text = ["中华人民共和国成立了，我们喜欢北京。"]
    output = read_output("".join(text[0].split()), text, [tokenizer_for(spec).tokenize(text[0])])
    found, reason = output.kind()
    assert found == kind
    assert why in reason


def write_set(folder: Path, name: str = "toy", gold: list[str] = GOLD, text: list[str] = TEXT) -> Path:
    """A test set in the SIGHAN layout from our own sentences (CRLF line ends, as the originals have)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}_test_gold.utf8").write_bytes("".join(f"{line}\r\n" for line in gold).encode())
    (folder / f"{name}_test.utf8").write_bytes("".join(f"{line}\r\n" for line in text).encode())
    (folder / f"{name}_training_words.utf8").write_text("".join(f"{word}\n" for word in sorted(VOCABULARY)))
    return folder


def test_every_registered_strategy_is_scored_listed_or_skipped(tmp_path: Path) -> None:
    report = evaluate_segmentation(write_set(tmp_path / "data"))
    (result,) = report.sets
    assert (result.name, result.lines, result.characters, result.gold_words, result.oov_words) == ("toy", 2, 13, 7, 2)
    labels = [row.label for row in result.scored] + [row.label for row in result.not_scored + report.skipped]
    assert sorted(label.split(":")[0] for label in labels) == sorted(TOKENIZERS)
    scored = {row.label: row for row in result.scored}
    assert scored["unigram"].kind == CHARACTERS
    assert scored["jieba:mode=precise"].kind == WORDS  # jieba's declared segmentation options
    assert {row.label for row in result.not_scored} == {"bigram", "trigram", "unicode61"}
    assert set(scored["unigram"].scores) == {"chars", "run", "skip"}
    assert list(result.files) == ["toy_training_words.utf8", "toy_test_gold.utf8", "toy_test.utf8"]


def test_cli_table(tmp_path: Path) -> None:
    data = write_set(tmp_path / "data")
    result = CliRunner().invoke(cli, ["segeval", "--data", str(data), "-t", "unigram", "-t", "bigram"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("TOY: 2 lines, 13 characters, 7 gold words, OOV rate 0.286;")
    assert " ".join(lines[1].split()) == "strategy kind P R F1 OOV-R IV-R F1 run F1 skip seconds"
    # unigram: 12 one-character words + 。, correct 。 and 命: P 2/13, R 2/7, F1 2*2/(13+7) = 0.2.
    assert lines[2].split()[:7] == ["unigram", "baseline", "0.154", "0.286", "0.200", "0.500", "0.200"]
    assert "bigram: not scored, its tokens overlap (8 times): not one cut of the text" in lines


def test_a_strategy_named_without_its_segmentation_options_gets_a_hint(tmp_path: Path) -> None:
    # jieba's search mode adds 中华, 华人, 人民, 共和, 共和国 inside 中华人民共和国.
    data = write_set(tmp_path / "data", gold=["中华人民共和国  成立  了"], text=["中华人民共和国成立了"])
    (result,) = evaluate_segmentation(data, ["jieba"]).sets
    (not_scored,) = result.not_scored
    assert not_scored.reason.startswith("its tokens overlap")
    assert not_scored.hint == "score it as jieba:mode=precise"


def test_cli_json_and_rule(tmp_path: Path) -> None:
    data = write_set(tmp_path / "data")
    result = CliRunner().invoke(cli, ["segeval", "--data", str(data), "-t", "unigram", "--uncovered", "skip", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["rule"] == "skip"
    row = payload["sets"][0]["scored"][0]
    assert row["label"] == "unigram" and row["kind"] == CHARACTERS
    # skip: gold without 。 (6 words), output 12 characters, correct 命: P 1/12, R 1/6.
    assert row["scores"]["skip"]["precision"] == round(1 / 12, 4)
    assert row["scores"]["skip"]["recall"] == round(1 / 6, 4)
    assert payload["sets"][0]["files"]["toy_test.utf8"].startswith("sha256:")
    assert "created_utc" in payload["environment"]


def test_missing_data_is_one_error_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["segeval", "--data", str(tmp_path / "nowhere")])
    assert result.exit_code == 1
    assert f"error: no SIGHAN data at {tmp_path / 'nowhere'}; pass --data" in result.output
    assert "Traceback" not in result.output


def test_set_errors(tmp_path: Path) -> None:
    data = write_set(tmp_path / "data")
    with pytest.raises(DatasetError, match="no test set 'pku'.*choose from: toy"):
        find_sets(data, ["pku"])
    (data / "toy_training_words.utf8").unlink()
    with pytest.raises(DatasetError, match="toy_training_words.utf8: file not found"):
        find_sets(data)
    write_set(tmp_path / "bad", text=["我们喜欢北京。", "研究生命起点"])
    with pytest.raises(DatasetError, match=r"toy_test.utf8:2: the text differs"):
        evaluate_segmentation(tmp_path / "bad", ["unigram"])


def _naive_f1(gold_lines: list[str], text_lines: list[str], spec: str) -> float:
    """An independent per-line scorer for sets whose lines align: spans per line, uncovered characters one word each."""
    tokenizer = tokenizer_for(spec)
    gold_total = output_total = correct = 0
    for gold_line, line in zip(gold_lines, text_lines, strict=True):
        gold_spans, position = set(), 0
        for word in gold_line.split():
            gold_spans.add((position, position + len(word)))
            position += len(word)
        tokens = tokenizer.tokenize(line)
        covered = {i for token in tokens for i in range(token.start, token.end)}
        output = {(t.start, t.end) for t in tokens} | {(i, i + 1) for i in range(len(line)) if i not in covered}
        gold_total, output_total = gold_total + len(gold_spans), output_total + len(output)
        correct += len(gold_spans & output)
    precision, recall = correct / output_total, correct / gold_total
    return 2 * precision * recall / (precision + recall)


@pytest.mark.skipif(not SIGHAN.is_dir(), reason="SIGHAN 2005 data not present (../shared/datasets/segmentation)")
def test_sighan_2005_when_present() -> None:
    report = evaluate_segmentation(SIGHAN, ["unigram", "jieba:mode=precise"])
    by_name = {result.name: result for result in report.sets}
    # Counts from the data's SOURCE.md (lines, words, characters of the gold files).
    assert (by_name["pku"].lines, by_name["pku"].gold_words, by_name["pku"].characters) == (1945, 104372, 172733)
    assert (by_name["msr"].lines, by_name["msr"].gold_words, by_name["msr"].characters) == (3985, 106873, 184355)
    pku = {row.label: row.scores["chars"] for row in by_name["pku"].scored}
    # PKU's lines align, and its test lines hold no whitespace: a per-line scorer must agree exactly.
    gold_lines = split_lines(read_text(SIGHAN / "pku_test_gold.utf8", DatasetError))
    text_lines = split_lines(read_text(SIGHAN / "pku_test.utf8", DatasetError))
    for spec in ("unigram", "jieba:mode=precise"):
        assert pku[spec].f1 == pytest.approx(_naive_f1(gold_lines, text_lines, spec), abs=1e-12)
    # jieba 0.42.1, precise mode, HMM on (reports/segmentation.md).
    assert pku["jieba:mode=precise"].f1 == pytest.approx(0.821, abs=0.0005)


def test_segeval_finds_the_project_data_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rag_eval.cli import segeval as segeval_cli

    monkeypatch.chdir(tmp_path)
    found = segeval_cli._default_data()
    project_data = Path(segeval_cli.__file__).resolve().parents[2] / segeval_cli.DEFAULT_DATA
    if not project_data.is_dir():
        assert found == segeval_cli.DEFAULT_DATA  # nothing beside the project: the relative default and its error
        pytest.skip("no ../shared/datasets/segmentation beside this checkout")
    assert found == project_data and found.is_dir()


# --- segeval: an empty or blank gold file was "0 gold words", nothing scored, exit 0.


@pytest.mark.parametrize("gold", [b"", b"\n\n", b"\xef\xbb\xbf", b" \r\n\t\r\n", "\u3000\n".encode()])
def test_segeval_refuses_a_gold_file_without_words(tmp_path: Path, gold: bytes) -> None:
    data = tmp_path / "seg"
    data.mkdir()
    (data / "x_test_gold.utf8").write_bytes(gold)
    (data / "x_test.utf8").write_bytes(b"")
    (data / "x_training_words.utf8").write_text("我们\n", encoding="utf-8")
    line = one_error(invoke("segeval", "--data", data, "-t", "unigram"))
    assert "x_test_gold.utf8" in line and "no gold word" in line
