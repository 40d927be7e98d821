"""Word segmentation accuracy against SIGHAN 2005 gold (``rag-eval segeval``), with the bakeoff scorer's definitions.

A test set is three files in one folder: ``NAME_test.utf8`` (the unsegmented lines), ``NAME_test_gold.utf8``
(the same lines, words separated by whitespace) and ``NAME_training_words.utf8`` (the training word list: a
gold word not in it is out of vocabulary, OOV). Each strategy tokenizes the test file line by line; a word
is correct when its character span equals a gold word's. Spans index the test set's characters with
whitespace removed, so the two files align even where a line break moved (the MSR release moves an
opening quote to the next line in 8 places). Precision, recall, OOV and IV recall are micro-averaged over
the whole file.

Tokenizers drop tokens with no letter or digit, so punctuation is covered by no token, while the gold counts
it as words. ``UNCOVERED_RULES`` say how those characters count; every rule is scored, one is shown.

Whether a strategy's tokens are a segmentation (one non-overlapping cut of the text into words) is measured
on the very text scored, not declared: tokens that overlap (bigram, trigram, jieba's search mode) or that
never cut between two Han characters (unicode61) are not scored; a cut into single Han characters
(unigram) is scored as a baseline. A strategy whose default options do not segment names the options that
do in ``segmentation_options`` (jieba: ``mode=precise``), which the default run uses.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any, NamedTuple

import regex

from ..errors import DatasetError, RagEvalError
from ..files.textio import decode_utf8, display_name, read_bytes, split_lines
from ..records import Progress
from ..spec import SystemSpec, format_value
from ..tokenizers import TOKENIZERS, Token, Tokenizer, get_tokenizer, normalise, tokenizer_class

TEXT_SUFFIX = "_test.utf8"
GOLD_SUFFIX = "_test_gold.utf8"
WORDS_SUFFIX = "_training_words.utf8"
LAYOUT_HINT = (
    f"the folder holds NAME{TEXT_SUFFIX}, NAME{GOLD_SUFFIX} and NAME{WORDS_SUFFIX} for each test set "
    "(files of the SIGHAN 2005 bakeoff's icwb2-data: testing/ and gold/)"
)
#: Largest data file read, in bytes (the largest SIGHAN 2005 file is about 1 MB).
MAX_FILE_BYTES = 100_000_000

#: How characters that no token covers (punctuation and symbols, which tokenizers drop) count as words.
UNCOVERED_RULES = {
    "chars": "each uncovered character is one word (the official scorer counts punctuation as words)",
    "run": "each run of uncovered characters (between tokens, whitespace and line ends) is one word",
    "skip": "words with no letter or digit are left out of both the gold and the output",
}
DEFAULT_RULE = "chars"
#: What a scored strategy's tokens are: words, or single Han characters (a baseline).
WORDS, CHARACTERS = "words", "characters"

_HAN_RUN = regex.compile(r"\p{Script=Han}+")
_FREE_RUN = re.compile(b"\\x00+")
_WORDLIKE = regex.compile(r"[\p{L}\p{N}]")

Span = tuple[int, int]


class SighanSet(NamedTuple):
    """The three files of one test set."""

    name: str
    text: Path
    gold: Path
    words: Path


def find_sets(folder: str | Path, names: Sequence[str] = ()) -> list[SighanSet]:
    """The test sets in ``folder`` (each ``NAME_test_gold.utf8`` with its test file and word list), or ``names``."""
    folder = Path(folder)
    found = {}
    if folder.is_dir():
        for gold in sorted(folder.glob("*" + GOLD_SUFFIX)):
            name = gold.name.removesuffix(GOLD_SUFFIX)
            found[name] = SighanSet(name, folder / f"{name}{TEXT_SUFFIX}", gold, folder / f"{name}{WORDS_SUFFIX}")
    if not found:
        raise DatasetError(f"no SIGHAN data at {display_name(str(folder))}; pass --data", hint=LAYOUT_HINT)
    for name in names:
        if name not in found:
            raise DatasetError(f"no test set {name!r} in {display_name(str(folder))}; choose from: {', '.join(found)}")
    chosen = [found[name] for name in dict.fromkeys(names)] if names else list(found.values())
    for test_set in chosen:
        for path in (test_set.text, test_set.words):
            if not path.is_file():
                raise DatasetError(
                    f"{display_name(str(path))}: file not found (test set {test_set.name!r} needs it)", hint=LAYOUT_HINT
                )
    return chosen


@dataclass(frozen=True)
class Gold:
    """The gold segmentation of a test set: word spans over its characters with whitespace removed."""

    text: str
    spans: frozenset[Span]
    oov: frozenset[Span]
    wordlike: frozenset[Span]

    @classmethod
    def from_lines(cls, lines: Sequence[str], vocabulary: Collection[str]) -> Gold:
        """Gold lines (words separated by whitespace); a word not in ``vocabulary`` is OOV."""
        pieces, spans, oov, wordlike = [], set(), set(), set()
        position = 0
        for line in lines:
            for word in line.split():
                span = (position, position + len(word))
                spans.add(span)
                if word not in vocabulary:
                    oov.add(span)
                if _WORDLIKE.search(word):
                    wordlike.add(span)
                pieces.append(word)
                position += len(word)
        return cls("".join(pieces), frozenset(spans), frozenset(oov), frozenset(wordlike))


class Output(NamedTuple):
    """A strategy's tokens over a test set's characters, and what they are as a cut of the text."""

    tokens: frozenset[Span]
    #: Maximal runs of characters no token covers, between tokens, whitespace and line ends.
    uncovered: tuple[Span, ...]
    #: Tokens that start before an earlier token ends (0 for one cut of the text), apart from ``split_characters``.
    overlaps: int
    #: Tokens that overlap on just one character that normalisation expands (℃ is °c): a segmenter cut inside
    #: it, and the two tokens' offsets in the original text both take the whole character.
    split_characters: int
    #: Token boundaries between two Han characters (0: the strategy does not segment Chinese).
    han_cuts: int
    han_tokens: int
    #: Tokens holding a Han character and more than one character (0 for a cut into single characters).
    long_han_tokens: int

    def kind(self) -> tuple[str, str]:
        """``(WORDS or CHARACTERS, "")`` when the tokens are a segmentation, else ``("", why not)``."""
        if self.overlaps:
            return "", f"its tokens overlap ({self.overlaps} times): not one cut of the text"
        if not self.han_tokens:
            return "", "it gives no token with a Han character"
        if not self.han_cuts:
            return "", "it never cuts between two Han characters: no word segmentation"
        return (WORDS if self.long_han_tokens else CHARACTERS), ""


def read_output(gold_text: str, lines: Sequence[str], tokens: Sequence[Sequence[Token]], label: str = "text") -> Output:
    """Map each line's tokens (offsets into that line) onto ``gold_text``, checking the characters agree."""
    if len(lines) != len(tokens):
        raise ValueError(f"{len(lines)} lines but {len(tokens)} token lists")
    spans: set[Span] = set()
    uncovered: list[Span] = []
    overlaps = split_characters = han_cuts = han_tokens = long_han_tokens = 0
    base = 0
    for number, (line, line_tokens) in enumerate(zip(lines, tokens, strict=True), start=1):
        # covered[i]: 1 where a token or whitespace covers character i; han[i]: 1 on a Han character.
        covered = bytearray(char.isspace() for char in line)
        prefix = list(accumulate((1 - flag for flag in covered), initial=0))  # non-space characters before i
        stripped = "".join(line.split())
        if gold_text[base : base + len(stripped)] != stripped:
            raise DatasetError(_mismatch(gold_text, base, stripped, f"{label}:{number}"))
        han = bytearray(len(line))
        for run in _HAN_RUN.finditer(line):
            han[run.start() : run.end()] = b"\x01" * (run.end() - run.start())
        boundaries: set[int] = set()
        end_so_far = 0
        for start, end in ((token.start, token.end) for token in line_tokens):
            if start < end_so_far:
                if end_so_far - start == 1 and len(normalise(line[start])) > 1:
                    split_characters += 1
                else:
                    overlaps += 1
            end_so_far = max(end_so_far, end)
            covered[start:end] = b"\x01" * (end - start)
            if prefix[end] > prefix[start]:
                spans.add((base + prefix[start], base + prefix[end]))
            if 1 in han[start:end]:
                han_tokens += 1
                long_han_tokens += end - start > 1
            boundaries.update((start, end))
        han_cuts += sum(1 for b in boundaries if 0 < b < len(line) and han[b - 1] and han[b])
        for free in _FREE_RUN.finditer(covered):
            uncovered.append((base + prefix[free.start()], base + prefix[free.end()]))
        base += len(stripped)
    if base != len(gold_text):
        raise DatasetError(f"{label}: {base} characters, the gold has {len(gold_text)}: not the same text")
    return Output(frozenset(spans), tuple(uncovered), overlaps, split_characters, han_cuts, han_tokens, long_han_tokens)


def _mismatch(gold_text: str, base: int, stripped: str, where: str) -> str:
    given = gold_text[base : base + len(stripped)]
    column = next((i for i, (a, b) in enumerate(zip(given, stripped, strict=False)) if a != b), len(given))
    return (
        f"{where}: the text differs from the gold at character {column + 1} of the line (whitespace ignored): "
        f"{stripped[column : column + 1]!r} against {given[column : column + 1]!r}"
    )


class Scores(NamedTuple):
    """The bakeoff's figures: word precision, recall, F1, OOV and IV recall, and the counts behind them."""

    precision: float | None
    recall: float | None
    f1: float | None
    oov_recall: float | None
    iv_recall: float | None
    gold_words: int
    output_words: int
    correct: int
    oov_words: int
    oov_correct: int


def _check_rule(rule: str) -> None:
    if rule not in UNCOVERED_RULES:
        raise RagEvalError(f"unknown rule {rule!r} for uncovered characters; choose from: {', '.join(UNCOVERED_RULES)}")


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def score(gold: Gold, output: Output, rule: str = DEFAULT_RULE) -> Scores:
    """Word P/R/F1 and OOV/IV recall of ``output`` against ``gold``, uncovered characters counted by ``rule``."""
    _check_rule(rule)
    reference: frozenset[Span] | set[Span]
    if rule == "skip":
        reference = gold.wordlike
        words = {span for span in output.tokens if _WORDLIKE.search(gold.text, *span)}
    else:
        reference = gold.spans
        words = set(output.tokens)
        for start, end in output.uncovered:
            words.update(((i, i + 1) for i in range(start, end)) if rule == "chars" else [(start, end)])
    oov = gold.oov & reference
    correct = len(words & reference)
    oov_correct = len(words & oov)
    precision, recall = _ratio(correct, len(words)), _ratio(correct, len(reference))
    f1 = None
    if precision is not None and recall is not None:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    oov_recall, iv_recall = _ratio(oov_correct, len(oov)), _ratio(correct - oov_correct, len(reference) - len(oov))
    counts = (len(reference), len(words), correct, len(oov), oov_correct)
    return Scores(precision, recall, f1, oov_recall, iv_recall, *counts)


@dataclass
class Scored:
    """One strategy on one test set: its scores under every rule and what it cost."""

    label: str
    system: str
    spec: str
    kind: str
    scores: dict[str, Scores]
    tokenize_seconds: float
    #: Cuts inside a character that normalisation expands (see ``Output.split_characters``).
    split_characters: int = 0


@dataclass
class NotScored:
    """A strategy left out: unavailable, or its tokens are not a segmentation of this set."""

    label: str
    reason: str
    hint: str = ""


@dataclass
class SetResult:
    """Every strategy on one test set."""

    name: str
    files: dict[str, str]
    lines: int
    characters: int
    gold_words: int
    oov_words: int
    scored: list[Scored] = field(default_factory=list)
    not_scored: list[NotScored] = field(default_factory=list)


@dataclass
class SegEvalReport:
    """``rag-eval segeval``'s result: per test set, each strategy's scores; load times; what was skipped."""

    data: str
    rule: str
    sets: list[SetResult]
    load_seconds: dict[str, float]
    skipped: list[NotScored]
    environment: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, ratios rounded to 4 places."""
        data = asdict(self)
        data["rules"] = dict(UNCOVERED_RULES)
        for test_set, result in zip(data["sets"], self.sets, strict=True):
            for row, scored in zip(test_set["scored"], result.scored, strict=True):
                row["scores"] = {rule: _rounded(scores) for rule, scores in scored.scores.items()}
                row["tokenize_seconds"] = round(scored.tokenize_seconds, 3)
        data["load_seconds"] = {label: round(seconds, 3) for label, seconds in self.load_seconds.items()}
        return data


def _rounded(scores: Scores) -> dict[str, Any]:
    return {key: round(value, 4) if isinstance(value, float) else value for key, value in scores._asdict().items()}


def _read(path: Path, files: dict[str, str]) -> str:
    data = read_bytes(path, DatasetError, max_bytes=MAX_FILE_BYTES)
    files[path.name] = "sha256:" + hashlib.sha256(data).hexdigest()
    return decode_utf8(data, str(path), DatasetError)


def load_set(test_set: SighanSet) -> tuple[Gold, list[str], dict[str, str]]:
    """The gold, the test lines and the files' checksums of one test set."""
    files: dict[str, str] = {}
    vocabulary = frozenset(word.strip() for word in split_lines(_read(test_set.words, files)) if word.strip())
    gold = Gold.from_lines(split_lines(_read(test_set.gold, files)), vocabulary)
    if not gold.spans:  # no word to score: every strategy would be "not scored", and the command would succeed
        raise DatasetError(
            f"{display_name(str(test_set.gold))}: no gold word: the file is empty or blank", hint=LAYOUT_HINT
        )
    return gold, split_lines(_read(test_set.text, files)), files


def _strategies(specs: Sequence[str]) -> tuple[list[tuple[str, Tokenizer]], list[NotScored]]:
    """Named specs (their errors propagate), or every registered strategy with its segmentation options
    (an unavailable one is reported, not fatal)."""
    if specs:
        chosen = []
        for spec in dict.fromkeys(specs):
            tokenizer = get_tokenizer(spec)
            tokenizer.check_available()
            chosen.append((spec, tokenizer))
        return chosen, []
    chosen, skipped = [], []
    for name in TOKENIZERS:
        try:
            cls = tokenizer_class(name)
            label = str(SystemSpec(name, tuple(sorted(cls.segmentation_options))))
            tokenizer = get_tokenizer(label)
            tokenizer.check_available()
        except RagEvalError as exc:
            reason = str(exc).removeprefix(f"tokenizer {name!r} is unavailable: ")
            skipped.append(NotScored(name, reason, exc.hint or ""))
            continue
        chosen.append((label, tokenizer))
    return chosen, skipped


def _segmentation_hint(tokenizer: Tokenizer) -> str:
    options = type(tokenizer).segmentation_options
    if not options or all(format_value(tokenizer.options.get(key)) == value for key, value in options):
        return ""
    return f"score it as {SystemSpec(tokenizer.name, tuple(sorted(options)))}"


def evaluate_segmentation(
    data: str | Path,
    specs: Sequence[str] = (),
    *,
    sets: Sequence[str] = (),
    rule: str = DEFAULT_RULE,
    progress: Progress | None = None,
) -> SegEvalReport:
    """Score each strategy (``specs``, or every registered one) on each SIGHAN test set in ``data``.

    Every file is read and checked before the first tokenizer loads. ``progress(phase, done, total)``
    hears of each strategy's lines on each set.
    """
    from .compare.compare import environment

    _check_rule(rule)
    loaded = []
    for test_set in find_sets(data, sets):
        gold, lines, files = load_set(test_set)
        where = display_name(str(test_set.text))
        read_output(gold.text, lines, [()] * len(lines), where)  # the same text as the gold, or an error
        result = SetResult(test_set.name, files, len(lines), len(gold.text), len(gold.spans), len(gold.oov))
        loaded.append((gold, lines, where, result))
    strategies, skipped = _strategies(specs)
    load_seconds: dict[str, float] = {}
    for label, tokenizer in strategies:
        started = time.perf_counter()
        tokenizer.load()
        load_seconds[label] = time.perf_counter() - started
        for gold, lines, where, result in loaded:
            started = time.perf_counter()
            tokens = _tokenize_lines(tokenizer, lines, f"{result.name}: {label}", progress)
            seconds = time.perf_counter() - started
            output = read_output(gold.text, lines, tokens, where)
            kind, reason = output.kind()
            if not kind:
                result.not_scored.append(NotScored(label, reason, _segmentation_hint(tokenizer)))
                continue
            scores = {name: score(gold, output, name) for name in UNCOVERED_RULES}
            result.scored.append(
                Scored(label, tokenizer.system, tokenizer.spec, kind, scores, seconds, output.split_characters)
            )
    return SegEvalReport(str(data), rule, [item[-1] for item in loaded], load_seconds, skipped, environment())


def _tokenize_lines(
    tokenizer: Tokenizer, lines: Sequence[str], phase: str, progress: Progress | None
) -> list[list[Token]]:
    tokens = []
    for number, line in enumerate(lines, start=1):
        tokens.append(tokenizer.tokenize(line))
        if progress is not None and (number % 100 == 0 or number == len(lines)):
            progress(phase, number, len(lines))
    return tokens
