"""Words found in a corpus by its own statistics (no dictionary, no segmenter): the term unit of synthetic
queries, chosen so that no tokenization strategy under comparison decides what a "term" is.

A Han string is a word when it recurs, holds together (every split of it has high pointwise mutual
information, "cohesion") and is free on both sides (the characters before and after it vary: high left and
right branching entropy, as in accessor-variety word discovery). Runs of Latin letters and digits are words
as they stand, since every strategy under test keeps them whole or splits them the same way.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import regex

_HAN = regex.compile(r"\p{Han}+")
_HAN_CHAR = regex.compile(r"\p{Han}")
_LATIN_LETTER = regex.compile(r"\p{Latin}")
# A link: a URL, in the characters a URL may hold (so that the text after it, Chinese punctuation included,
# stays), or a Markdown link's target, ``[text](target)``.
_LINK = r"(?:[A-Za-z][A-Za-z0-9+.-]*://|www\.)[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+|(?<=\])\([^()\s]*\)"
_URL = regex.compile(_LINK)
# What is neither language of a passage's prose: fenced code, inline code and links. A Chinese passage that
# quotes a command, a JSON sample or a URL is still a Chinese passage.
_NOT_PROSE = regex.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`|" + _LINK, regex.S)
# A bare number needs three digits (a year, a code): shorter ones are counts and dates that a person rarely
# searches by, and their high idf would otherwise make them the likeliest "terms".
_LATIN = regex.compile(r"(?<![A-Za-z0-9])(?:[A-Za-z][A-Za-z0-9]*(?:[._+-][A-Za-z0-9]+)*|[0-9]{3,})(?![A-Za-z0-9])")

#: Shortest and longest Han word considered (one character is too weak a query term; five rarely recurs).
MIN_LEN, MAX_LEN = 2, 4
#: A word must occur at least this often in the corpus (MIN_ENTROPY needs four different neighbours anyway).
MIN_COUNT = 4
#: Least branching entropy on either side, in nats (log 4 = 1.39); chosen by reading the words found in the
#: handbook and in a public set at several thresholds: lower ones admit "word + particle" strings.
MIN_ENTROPY = 1.2
#: Least cohesion over the word's splits (pointwise mutual information, natural log: e^4 = 55 times more
#: often together than by chance).
MIN_COHESION = 4.0


@dataclass(frozen=True)
class Lexicon:
    """The words found in a corpus, and in how many of its units each occurs."""

    words: frozenset[str]
    df: dict[str, int]
    units: int

    def idf(self, word: str) -> float:
        """Inverse document frequency, smoothed so a word in every unit still weighs a little."""
        return math.log((self.units + 1) / (self.df.get(word, 0) + 0.5))


def han_runs(text: str) -> list[str]:
    """The maximal runs of Han characters in ``text``."""
    return _HAN.findall(text)


def without_links(text: str) -> str:
    """``text`` with its URLs blanked: a host or path is not a word of the text (``github.com``, a user name)."""
    return _URL.sub(" ", text)


def han_share(text: str) -> float | None:
    """The Han share of the letters of ``text``'s prose: Han characters over Han characters plus Latin letters,
    code (fenced or inline) and links left out; the whole text's when its prose has no letter; None when
    neither has one."""
    for part in (_NOT_PROSE.sub(" ", text), text):
        han, latin = len(_HAN_CHAR.findall(part)), len(_LATIN_LETTER.findall(part))
        if han + latin:
            return han / (han + latin)
    return None


def script_of(text: str) -> str:
    """``han`` (Han characters, no Latin letter), ``mixed`` (both), ``latin`` (Latin letters, no Han) or
    ``none`` (neither: digits and signs only)."""
    han, latin = bool(_HAN_CHAR.search(text)), bool(_LATIN_LETTER.search(text))
    return ("mixed" if latin else "han") if han else ("latin" if latin else "none")


#: The script classes of a query (:func:`script_of`), in the order they are reported, and their names.
SCRIPTS = ("han", "mixed", "latin")
SCRIPT_NAMES = {"han": "Han-only", "mixed": "mixed", "latin": "Latin-only", "none": "no letter"}


def script_counts(texts: Iterable[str]) -> dict[str, int]:
    """How many of ``texts`` are Han-only, mixed and Latin-only (``SCRIPTS``; ``none`` too, when any is)."""
    found = Counter(script_of(text) for text in texts)
    return {script: found[script] for script in (*SCRIPTS, "none") if script in SCRIPTS or found[script]}


def script_shares(counts: Mapping[str, int]) -> str:
    """``Han-only 315 (82%), mixed 69 (18%), Latin-only 0 (0%)`` from :func:`script_counts`."""
    total = sum(counts.values())
    return ", ".join(
        f"{SCRIPT_NAMES[script]} {count} ({100 * count / total if total else 0:.0f}%)"
        for script, count in counts.items()
    )


def latin_words(text: str) -> list[str]:
    """Runs of Latin letters and digits (with inner ``. _ + -``) that hold a letter, and numbers of 3+ digits."""
    return _LATIN.findall(text)


def _entropy(counts: Iterable[int], boundary: int) -> float:
    """Branching entropy of a neighbour distribution; each run boundary counts as a distinct neighbour."""
    values = [c for c in counts if c > 0] + [1] * max(boundary, 0)
    total = sum(values)
    return -sum(c / total * math.log(c / total) for c in values) if total else 0.0


def discover(texts: Iterable[str]) -> frozenset[str]:
    """Han words of length MIN_LEN..MAX_LEN that recur, hold together and are free on both sides."""
    grams: Counter[str] = Counter()
    for text in texts:
        for run in han_runs(text):
            for size in range(1, MAX_LEN + 2):
                for start in range(len(run) - size + 1):
                    grams[run[start : start + size]] += 1
    chars = sum(count for gram, count in grams.items() if len(gram) == 1)
    if not chars:
        return frozenset()
    right: dict[str, list[int]] = defaultdict(list)
    left: dict[str, list[int]] = defaultdict(list)
    for gram, count in grams.items():
        if len(gram) > MIN_LEN:
            right[gram[:-1]].append(count)
            left[gram[1:]].append(count)
    found = set()
    for gram, count in grams.items():
        if not MIN_LEN <= len(gram) <= MAX_LEN or count < MIN_COUNT:
            continue
        cohesion = min(math.log(count * chars / (grams[gram[:cut]] * grams[gram[cut:]])) for cut in range(1, len(gram)))
        if cohesion < MIN_COHESION:
            continue
        after, before = right.get(gram, []), left.get(gram, [])
        if min(_entropy(after, count - sum(after)), _entropy(before, count - sum(before))) >= MIN_ENTROPY:
            found.add(gram)
    return frozenset(found)


def occurrences(text: str, words: frozenset[str]) -> Counter[str]:
    """How often each found word (and each Latin word) occurs in ``text``."""
    counts: Counter[str] = Counter(latin_words(text))
    for run in han_runs(text):
        for size in range(MIN_LEN, min(MAX_LEN, len(run)) + 1):
            for start in range(len(run) - size + 1):
                gram = run[start : start + size]
                if gram in words:
                    counts[gram] += 1
    return counts


def build_lexicon(texts: list[str]) -> tuple[Lexicon, list[Counter[str]]]:
    """The corpus's lexicon and each text's word counts (in the order given)."""
    words = discover(texts)
    per_text = [occurrences(text, words) for text in texts]
    df: Counter[str] = Counter()
    for counts in per_text:
        df.update(counts.keys())
    return Lexicon(words, dict(df), len(texts)), per_text
