"""Synthetic known-item queries generated from a corpus itself, each labelled with the unit it came from.

Terms are words the corpus's own statistics find (:mod:`.wordfind`), sampled with probability by a
discrimination weight (tf x idf, after Azzopardi, de Rijke and Balog, SIGIR 2007), never tokens of a
strategy under test: a generator that cuts text the way one strategy does favours that strategy. Every
choice comes from a random generator seeded by (seed, purpose, unit key), so the same source, count,
kinds and seed give byte-identical files. Their bias against real queries is measured in
reports/synthetic.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ... import __version__
from ...errors import DatasetError
from ...files.outputs import check_new_target, new_folder, refuse_inside_source
from ..datasets.beir import write_beir
from ..datasets.records import SYNTHETIC_KIND, Dataset, Passage, Query
from ..datasets.shipped import read_from
from ..datasets.sources import check_trec_ids, source_units
from .wordfind import (
    MAX_LEN,
    MIN_COHESION,
    MIN_COUNT,
    MIN_ENTROPY,
    MIN_LEN,
    Lexicon,
    build_lexicon,
    han_runs,
    han_share,
    script_counts,
    script_of,
    without_links,
)

#: Version of the generator: a change that alters any output for the same arguments bumps it.
GENERATOR = "rag-eval synth 2"
#: The kind prefix in queries.jsonl, so a report can tell synthetic queries from real ones.
KIND_PREFIX = f"{SYNTHETIC_KIND}:"
#: Largest -n accepted.
MAX_QUERIES = 100_000
SYNTH_WHAT = "synthetic query folder"
#: What helps a corpus too small for words to recur in it.
LARGER = "use a larger corpus, in which words recur"
#: Terms per ``terms`` query: drawn uniformly from this range.
MIN_TERMS, MAX_TERMS = 2, 4
#: A unit whose prose has at least this Han share of its letters (:func:`.wordfind.han_share`) is Han-majority:
#: each of its queries holds Han; below it, each holds a Latin letter.
HAN_MAJORITY = 0.5
#: Question templates (simplified script; converted to traditional for a traditional-script corpus).
QUESTION_TEMPLATES = (
    "{a}的{b}是什么？",
    "{a}和{b}有什么关系？",
    "什么是{a}{b}？",
    "{a}{b}是多少？",
    "为什么{a}会{b}？",
    "如何{a}{b}？",
    "{a}{b}是谁？",
    "{a}中的{b}指的是什么？",
    "关于{a}，{b}怎么样？",
    "{a}{b}在哪里？",
)
SYNTHETIC_NOTE = (
    "These are synthetic known-item queries generated from the corpus itself: each is judged relevant "
    "(grade 1) to the one unit it came from and to no other. They are not real users' questions; "
    "reports/synthetic.md measures how far a strategy ranking from them agrees with real queries."
)


@dataclass(frozen=True)
class Unit:
    """A judged unit prepared for generation: its passage, its sampled base terms, its heading and the Han share
    of its prose's letters (None: it has no letter)."""

    passage: Passage
    terms: tuple[str, ...]
    heading: str
    han_share: float | None = None

    def fits(self, text: str) -> bool:
        """Whether query ``text`` is in the unit's script (:func:`in_script`)."""
        return in_script(text, self.han_share)


def in_script(text: str, share: float | None) -> bool:
    """Whether query ``text`` is in the script of a unit whose prose is ``share`` Han: it holds Han when the
    unit is Han-majority, a Latin letter when it is not; a query with no letter fits no unit."""
    script = script_of(text)
    if share is None or script == "none":
        return False
    return script != "latin" if share >= HAN_MAJORITY else script != "han"


@dataclass(frozen=True)
class Context:
    """What every generator may use: the corpus's lexicon, character frequencies, script and query limit."""

    lexicon: Lexicon
    chars: tuple[tuple[str, ...], tuple[int, ...]]
    traditional: bool
    max_chars: int
    seed: int


#: A generator: the query text for one unit, or None when the unit does not support the kind.
Generator = Callable[[Unit, Context], "str | None"]


@dataclass(frozen=True)
class Kind:
    """A documented kind of synthetic query; ``needs`` says what a unit must have for it, beyond sampled terms
    (for the message when no unit has it)."""

    name: str
    summary: str
    make: Generator
    needs: str


@dataclass(frozen=True)
class SynthQuery:
    """One generated query and the unit it came from."""

    id: str
    text: str
    kind: str
    unit: str

    @property
    def script(self) -> str:
        """``han``, ``mixed`` or ``latin`` (:func:`.wordfind.script_of`)."""
        return script_of(self.text)


@dataclass(frozen=True)
class SynthSummary:
    """What ``synthesize`` wrote."""

    target: Path
    counts: dict[str, int]
    skipped: tuple[str, ...]
    units: int
    words: int
    builder: str
    #: Queries per script class (:func:`.wordfind.script_counts`); units per script majority (:func:`unit_scripts`).
    scripts: dict[str, int]
    unit_scripts: dict[str, int]


def _rng(seed: int, purpose: str, key: str) -> random.Random:
    # A string seed is hashed with SHA-512 (random's version 2 seeding): stable across runs and platforms,
    # independent of PYTHONHASHSEED, and one unit's choices never depend on which other units exist.
    return random.Random(f"{seed}\x1f{purpose}\x1f{key}")


@lru_cache(maxsize=2)
def _opencc(config: str) -> Any:
    import opencc

    return opencc.OpenCC(config)


def _script(text: str, config: str) -> str:
    return str(_opencc(config).convert(text))


def _heading(unit: Unit, context: Context) -> str | None:
    return unit.heading or None


def _terms(unit: Unit, context: Context) -> str | None:
    return " ".join(unit.terms)


def _compacted(unit: Unit, context: Context) -> str | None:
    return "".join(unit.terms)


def _question(unit: Unit, context: Context) -> str | None:
    rng = _rng(context.seed, "question", unit.passage.id)
    first, second = rng.sample(unit.terms, 2)
    text = rng.choice(QUESTION_TEMPLATES).format(a=first, b=second)
    return _script(text, "s2tw") if context.traditional else text


def _traditional(unit: Unit, context: Context) -> str | None:
    text = " ".join(unit.terms)
    converted = _script(text, "s2tw")
    return converted if converted != text else None


def _simplified(unit: Unit, context: Context) -> str | None:
    text = " ".join(unit.terms)
    converted = _script(text, "t2s")
    return converted if converted != text else None


def _typo(unit: Unit, context: Context) -> str | None:
    rng = _rng(context.seed, "typo", unit.passage.id)
    spots = [(i, j) for i, term in enumerate(unit.terms) for j, char in enumerate(term) if han_runs(char)]
    if not spots:
        return None
    term_index, char_index = rng.choice(spots)
    term = unit.terms[term_index]
    replacement = term[char_index]
    chars, weights = context.chars
    if len(chars) < 2:
        return None
    while replacement == term[char_index]:  # ends: at least two characters to draw
        replacement = rng.choices(chars, weights)[0]
    changed = list(unit.terms)
    changed[term_index] = term[:char_index] + replacement + term[char_index + 1 :]
    return " ".join(changed)


#: Every kind, in the order queries are allocated and written.
KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind(
            "heading",
            "the unit's own heading (last part of its title), when no other unit has it",
            _heading,
            "a heading that no other unit has",
        ),
        Kind(
            "terms",
            "2-4 corpus-found words sampled by tf x idf from the unit, space-separated",
            _terms,
            "sampled words that fit in a query",
        ),
        Kind(
            "question",
            "two sampled words in a question template (是什么, 有什么关系, 如何, ...)",
            _question,
            "sampled words that fit in a question",
        ),
        Kind(
            "traditional",
            "the terms query in traditional script (OpenCC s2tw), when that changes it",
            _traditional,
            "sampled words that traditional script writes differently (a simplified-script corpus)",
        ),
        Kind(
            "simplified",
            "the terms query in simplified script (OpenCC t2s), when that changes it",
            _simplified,
            "sampled words that simplified script writes differently (a traditional-script corpus)",
        ),
        Kind(
            "typo",
            "the terms query with one Han character replaced by a corpus character",
            _typo,
            "a sampled Han word, in a corpus of two Han characters or more",
        ),
        Kind("compacted", "the terms query run together, no spaces", _compacted, "sampled words that fit in a query"),
    )
}


#: What ``queries synth`` writes unless told: the kind whose strategy ranking agreed best with real queries
#: (reports/synthetic.md: the same winner in 10 of 12 set x seed runs, against 9 of 12 for the mix of all).
DEFAULT_KINDS = ("terms",)


def parse_kinds(raw: str | None) -> tuple[str, ...] | None:
    """Kinds from ``a,b,c`` (None: ``DEFAULT_KINDS``; ``all``: every kind a unit supports); an unknown kind
    lists the known ones."""
    if raw is None:
        return DEFAULT_KINDS
    if raw.strip() == "all":
        return None
    names = tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    if not names:
        raise DatasetError("--kinds names no kind", hint=f"choose from: {', '.join(KINDS)}")
    for name in names:
        if name not in KINDS:
            raise DatasetError(f"unknown query kind {name!r}; choose from: {', '.join(KINDS)}")
    return names


def han_terms(wanted: int, share: float) -> int:
    """How many of ``wanted`` terms are Han words for a unit whose prose is ``share`` Han: the nearest whole
    number (a half rounds up), at least one in a Han-majority unit and at most ``wanted - 1`` in another."""
    count = math.floor(wanted * share + 0.5)
    return max(count, 1) if share >= HAN_MAJORITY else min(count, wanted - 1)


def _sample_terms(
    counts: Counter[str], lexicon: Lexicon, rng: random.Random, text: str, share: float | None
) -> tuple[str, ...]:
    """2-4 words drawn without replacement, weight tf x idf, in the script mix of the unit's prose (``share``:
    :func:`han_terms` of them Han words, the rest Latin words and numbers, each script filling in for the
    other when it runs out); a word inside or around a drawn one is dropped. None when the words found
    cannot make a query in the unit's script."""
    if share is None:
        return ()
    pool = {word: count * lexicon.idf(word) for word, count in counts.items() if len(word) >= MIN_LEN}
    pool = {word: weight for word, weight in pool.items() if weight > 0}
    wanted = rng.randint(MIN_TERMS, MAX_TERMS)
    han = han_terms(wanted, share)
    chosen: list[str] = []
    for is_han, count in ((True, han), (False, wanted - han), (True, wanted), (False, wanted)):
        while len(chosen) < wanted and count > 0:
            words = sorted(word for word in pool if bool(han_runs(word)) == is_han)
            if not words:
                break
            pick = rng.choices(words, [pool[word] for word in words])[0]
            chosen.append(pick)
            count -= 1
            pool = {word: weight for word, weight in pool.items() if word not in pick and pick not in word}
    if len(chosen) < MIN_TERMS:
        return ()
    ordered = tuple(sorted(chosen, key=lambda word: (text.find(word), word)))  # in reading order
    return ordered if in_script(" ".join(ordered), share) else ()


def prepare(corpus: dict[str, Passage], seed: int) -> tuple[list[Unit], Lexicon, Counter[str]]:
    """Units with their base terms, unique headings and script shares, the lexicon and the corpus's Han
    character counts. Words are counted with links blanked (a host or a path is not a word of the text)."""
    texts = [f"{passage.title}\n{passage.text}" for passage in corpus.values()]
    lexicon, per_text = build_lexicon([without_links(text) for text in texts])
    seen = Counter(texts)
    headings = [passage.title.rsplit(" > ", 1)[-1].strip() for passage in corpus.values()]
    heading_count = Counter(headings)
    chars: Counter[str] = Counter()
    units = []
    for passage, text, counts, heading in zip(corpus.values(), texts, per_text, headings, strict=True):
        chars.update("".join(han_runs(text)))
        if seen[text] > 1:  # a duplicated unit cannot be a known item
            continue
        share = han_share(text)
        terms = _sample_terms(counts, lexicon, _rng(seed, "terms", passage.id), text, share)
        units.append(Unit(passage, terms, heading if heading_count[heading] == 1 else "", share))
    return units, lexicon, chars


def _is_traditional(chars: Counter[str]) -> bool:
    """Whether converting to simplified changes more of the corpus than converting to traditional."""
    common = "".join(char for char, _count in chars.most_common(3000))
    to_simplified = sum(a != b for a, b in zip(common, _script(common, "t2s"), strict=False))
    to_traditional = sum(a != b for a, b in zip(common, _script(common, "s2tw"), strict=False))
    return to_simplified > to_traditional


def _allocate(n: int, supply: dict[str, int]) -> dict[str, int]:
    """``n`` queries shared evenly over the kinds, none past its supply, the rest passed to kinds with room."""
    share = dict.fromkeys(supply, 0)
    left = n
    while left > 0:
        open_kinds = [kind for kind in supply if share[kind] < supply[kind]]
        if not open_kinds:
            break
        each, extra = divmod(left, len(open_kinds))
        for position, kind in enumerate(open_kinds):
            give = min(each + (1 if position < extra else 0), supply[kind] - share[kind])
            share[kind] += give
            left -= give
    return share


def _made(name: str, units: list[Unit], context: Context) -> list[tuple[Unit, str]]:
    """Each unit that supports kind ``name``, with its query text."""
    made = []
    for unit in units:
        text = KINDS[name].make(unit, context) if (unit.terms or name == "heading") else None
        if text and text.strip() and len(text) <= context.max_chars and unit.fits(text):
            made.append((unit, text))
    return made


def _no_words(units: list[Unit]) -> bool:
    """Whether no unit holds the words a query samples: every kind but ``heading`` needs them."""
    return not any(unit.terms for unit in units)


def _why_not(name: str, units: list[Unit], lexicon: Lexicon) -> str:
    """Why no unit supports kind ``name``: most often, too little text for words to recur in."""
    if not units:
        return "each of its units has the same text as another, and a known item must be unique"
    if name != "heading" and _no_words(units):
        return (
            f"none of its {len(units)} units holds the {MIN_TERMS} words a query samples; a word is a Latin word "
            f"of {MIN_LEN} characters or more, a number of 3 digits or more, or a Chinese word of {MIN_LEN} to "
            f"{MAX_LEN} characters that occurs at least {MIN_COUNT} times in the corpus with varied characters "
            f"on both sides (this corpus has {len(lexicon.words)} such words)"
        )
    return f"it needs {KINDS[name].needs}, and no unit has that"


def _unsupported(
    name: str, units: list[Unit], lexicon: Lexicon, context: Context, *, kinds_named: bool
) -> DatasetError:
    """The error for a kind no unit supports: why, and what helps (naming the kinds that do work, if any)."""
    working = [kind for kind in KINDS if kind != name and _made(kind, units, context)]
    which = "query kind" if kinds_named else "the default query kind"
    message = f"no unit of this source supports {which} {name!r} ({KINDS[name].summary}): "
    message += _why_not(name, units, lexicon)
    larger = LARGER if units and name != "heading" and _no_words(units) else ""
    if not working:
        hint = f"{larger}: this source supports no kind of query" if larger else "this source supports no kind of query"
    elif kinds_named:
        hint = f"drop it from --kinds (this source supports: {', '.join(working)})" + (
            f", or {larger}" if larger else ""
        )
    else:
        hint = f"name the kinds this source supports: --kinds {','.join(working)}" + (
            f"; or {larger}" if larger else ""
        )
    return DatasetError(message, hint=hint)


def unit_majorities(counts: dict[str, int]) -> str:
    """``384 Han-majority, 1 Latin-majority`` (and how many hold no letter, if any) from :func:`unit_scripts`."""
    words = [f"{counts['han']} Han-majority", f"{counts['latin']} Latin-majority"]
    return ", ".join(words + ([f"{counts['none']} without a letter"] if counts.get("none") else []))


def unit_scripts(units: list[Unit]) -> dict[str, int]:
    """How many units are Han-majority (``han``), Latin-majority (``latin``) or hold no letter (``none``)."""
    found = Counter(
        "none" if unit.han_share is None else "han" if unit.han_share >= HAN_MAJORITY else "latin" for unit in units
    )
    return {script: found[script] for script in ("han", "latin", "none")}


def generate(
    corpus: dict[str, Passage],
    n: int,
    *,
    kinds: tuple[str, ...] | None = None,
    seed: int = 0,
    max_chars: int = 200,
    kinds_named: bool = True,
) -> tuple[list[SynthQuery], dict[str, Any]]:
    """``n`` synthetic queries over ``kinds`` (None: every kind a unit supports), and generation facts.
    ``kinds_named``: whether the caller chose ``kinds`` rather than took ``DEFAULT_KINDS``, so that an error
    about an unsupported kind suggests dropping it only when the caller named it."""
    if not 1 <= n <= MAX_QUERIES:
        raise DatasetError(f"-n must be from 1 to {MAX_QUERIES}, got {n}")
    units, lexicon, chars = prepare(corpus, seed)
    han = sorted(chars)
    context = Context(lexicon, (tuple(han), tuple(chars[c] for c in han)), _is_traditional(chars), max_chars, seed)
    candidates = {name: _made(name, units, context) for name in kinds or tuple(KINDS)}
    empty = tuple(name for name, made in candidates.items() if not made)
    if kinds is not None and empty:
        raise _unsupported(empty[0], units, lexicon, context, kinds_named=kinds_named)
    supply = {name: len(made) for name, made in candidates.items() if made}
    if not supply:
        why = _why_not("terms", units, lexicon) + ("; and no unit has a heading of its own" if units else "")
        raise DatasetError(f"no unit of this source supports any query kind: {why}", hint=LARGER if units else None)
    share = _allocate(n, supply)
    queries = []
    for name, count in share.items():
        picked = random.Random(f"{seed}\x1fpick\x1f{name}").sample(range(supply[name]), count)
        for index in sorted(picked):
            unit, text = candidates[name][index]
            digest = hashlib.sha256(unit.passage.id.encode()).hexdigest()[:12]
            queries.append(SynthQuery(f"syn-{name}-{digest}", text, name, unit.passage.id))
    facts = {
        "scripts": script_counts(query.text for query in queries),
        "unit_scripts": unit_scripts(units),
        "traditional_script": context.traditional,
        "words_found": len(lexicon.words),
        "han_majority": HAN_MAJORITY,
        "units_with_terms": sum(1 for unit in units if unit.terms),
        "skipped_kinds": list(empty),
    }
    return queries, facts


def synthesize(
    source: str,
    n: int,
    target: str | Path,
    *,
    kinds: tuple[str, ...] | None = None,
    seed: int = 0,
    builder: str | None = None,
    kinds_named: bool = True,
) -> SynthSummary:
    """Write ``n`` synthetic known-item queries of ``source`` as a new BEIR folder ``target`` (corpus.jsonl of
    the source's units, queries.jsonl with ``synthetic:<kind>``, qrels/test.tsv, synthetic.json);
    ``kinds_named`` as in :func:`generate`."""
    if not 1 <= n <= MAX_QUERIES:
        raise DatasetError(f"-n must be from 1 to {MAX_QUERIES}, got {n}")
    check_new_target(target, what=SYNTH_WHAT)  # before the corpus is read and the queries made
    refuse_inside_source(target, [read_from(source)], what=SYNTH_WHAT)
    _root, chosen, corpus = source_units(source, builder)
    check_trec_ids(Dataset(str(source), corpus, {}, {}))
    queries, facts = generate(
        corpus,
        n,
        kinds=kinds,
        seed=seed,
        max_chars=chosen.query_defaults().max_query_chars,
        kinds_named=kinds_named,
    )
    counts = dict(Counter(query.kind for query in queries))
    dataset = Dataset(
        f"synthetic-{Path(source).name}",
        corpus,
        {q.id: Query(q.id, q.text, KIND_PREFIX + q.kind) for q in queries},
        {q.id: {q.unit: 1} for q in queries},
    )
    with new_folder(target, what=SYNTH_WHAT) as staging:
        write_beir(dataset, staging)
        units_sha256 = hashlib.sha256((staging / "corpus.jsonl").read_bytes()).hexdigest()
        record = _generation_record(source, chosen.system, len(corpus), units_sha256, seed, n, counts, facts)
        (staging / "synthetic.json").write_text(
            json.dumps(record, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
    return SynthSummary(
        Path(target),
        counts,
        tuple(facts["skipped_kinds"]),
        len(corpus),
        facts["words_found"],
        chosen.system,
        facts["scripts"],
        facts["unit_scripts"],
    )


def _generation_record(
    source: str,
    builder: str,
    units: int,
    units_sha256: str,
    seed: int,
    n: int,
    kinds: dict[str, int],
    facts: dict[str, Any],
) -> dict[str, Any]:
    """What synthetic.json records: the generator and its settings, the source's units and their checksum, the
    queries made of each kind, and the generation facts, so that the set can be traced and made again."""
    return {
        "generator": GENERATOR,
        "rag_eval": __version__,
        "note": SYNTHETIC_NOTE,
        "source": source,
        "builder": builder,
        "units": units,
        "units_sha256": units_sha256,
        "seed": seed,
        "n": n,
        "kinds": kinds,
        "kind_prefix": KIND_PREFIX,
        "word_discovery": {
            "lengths": [MIN_LEN, MAX_LEN],
            "min_count": MIN_COUNT,
            "min_entropy": MIN_ENTROPY,
            "min_cohesion": MIN_COHESION,
        },
        **facts,
    }
