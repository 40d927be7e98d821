"""Fusion of ranked runs: reciprocal rank fusion, CombSUM and CombMNZ, with ranx's definitions.

A fused system ranks the union of its members' top ``depth`` documents per query and is cut to ``depth``.
The definitions are those of ranx's ``fuse`` (``tests/eval/compare/test_fusion.py`` checks this module against golden
files ranx produced):

- ``rrf``: the sum of ``w / (k + rank)`` over the members that returned the document (ranks from 1, k = 60).
- ``combsum``: the sum of ``w * normalised score``; a member that did not return the document adds 0 (with
  ``zmuv``, 0 is that member's mean: a document it did not return counts as an average one).
- ``combmnz``: combsum times the number of members that returned the document.
- normalisation, per member and query over its top ``depth``: ``minmax`` ``(s - min) / (max - min)``,
  ``sum`` ``(s - min) / sum(s - min)``, ``zmuv`` ``(s - mean) / sd`` (population sd); a denominator below
  1e-9 counts as 1e-9, so a member whose scores are all equal (one document, say) normalises to 0.

Where rag-eval differs from ranx, it is in what ranx leaves open: equal fused scores are ordered by the
members' ranks (the first member's rank first, then the next one's), where ranx's order is its sort's; a
member without a query adds nothing to it, where ranx refuses runs whose queries differ; weights apply to
RRF too (ranx's ``rrf`` has none), and weighted CombMNZ is ``(sum of w * s) * count`` (ranx's ``wmnz``
multiplies the unweighted sum by the sum of the weights of the members that returned the document).
"""

from __future__ import annotations

import math
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import RagEvalError
from ...files.outputs import OutputError, checked_target, refuse_inputs, write_text_atomic
from ...files.paths import given_twice
from ...files.runs import DEPTH, RELATIVE_STEP, strict_run
from ...files.textio import shown
from ...measure import latency_summary
from ...records import RankedDoc
from ...spec import SystemSpec
from ...tokenizers import written_spec
from ..datasets.records import NO_ANSWER, Dataset
from ..datasets.trec import read_run
from .runner import SystemRun

METHODS = ("rrf", "combsum", "combmnz")
NORMALISATIONS = ("minmax", "sum", "zmuv")
DEFAULT_K = 60
DEFAULT_NORMALISATION = "minmax"
MAX_K = 1_000_000
#: Largest fusion weight (only the weights' ratios matter): two members weighted 1e308 summed to inf, a score no
#: run may hold.
MAX_FUSION_WEIGHT = 1000.0
#: Deepest fused run ``rag-eval fuse`` writes (trec_eval's cutoffs stop at the same bound).
MAX_DEPTH = 10_000
FUSED_RUN_WHAT = "fused run"
#: How a fused system's costs are counted, recorded with it in report.json.
FUSED_COSTS = {
    "latency": "per query, the members' tokenize and search times added (they run one after another) "
    "plus the fusion's own time, measured",
    "index_bytes": "the members' indexes added; no build of its own",
}
#: ranx's floor for a normalisation's denominator.
DENOMINATOR_FLOOR = 1e-9
#: Fused scores equal to this many decimals are ties: summing the same terms in another order may differ
#: in the last bit.
TIE_DECIMALS = 12
_ABSENT = sys.maxsize
#: Scores above this in magnitude are scaled down before they are normalised (their squares and sums overflow).
_SCALE_ABOVE = 2.0**500
_SPEC = re.compile(r"\s*([a-z]+)\s*(?::([^()]*))?\((.*)\)\s*", re.S)
_WEIGHT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*\*\s*(.*)", re.S)
SPEC_SYNTAX = "METHOD[:key=value,...](SYSTEM, SYSTEM, ...), e.g. 'rrf(bigram, unigram)'"
#: Members are separated by a comma and whitespace: a tokenizer spec's options are separated by a bare comma.
_MEMBER_SEPARATOR = re.compile(r",\s+")


class FusionError(RagEvalError, ValueError):
    """A fusion that cannot be declared or resolved: unknown method or option, too few or unknown members."""


@dataclass(frozen=True)
class Fusion:
    """A fused system: a method, its option (``k`` for rrf, ``normalise`` for the others), members and weights.

    Members are references as written (a tokenizer spec, a system's full name or a ``--run`` name); a
    comparison resolves them to its systems.
    """

    method: str
    members: tuple[str, ...]
    weights: tuple[float, ...] | None = None
    k: int = DEFAULT_K
    normalise: str = DEFAULT_NORMALISATION

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise FusionError(f"unknown fusion method {self.method!r}; choose from: {', '.join(METHODS)}")
        if self.normalise not in NORMALISATIONS:
            raise FusionError(f"unknown normalisation {self.normalise!r}; choose from: {', '.join(NORMALISATIONS)}")
        if type(self.k) is not int or not 0 <= self.k <= MAX_K:
            raise FusionError(f"rrf's k must be a whole number from 0 to {MAX_K}, not {self.k!r}")
        if len(self.members) < 2:
            raise FusionError(
                f"a fusion needs at least two members (systems or runs), not {len(self.members)}",
                hint=_separator_hint(self.method, self.members),
            )
        if any(not isinstance(m, str) or not m.strip() for m in self.members):
            raise FusionError("a fusion's members are named by non-empty text")
        if len(set(self.members)) != len(self.members):
            raise FusionError(f"a fusion names a member twice: {', '.join(self.members)}")
        if self.weights is not None:
            if len(self.weights) != len(self.members):
                raise FusionError(f"{len(self.weights)} weights for {len(self.members)} members")
            for weight in self.weights:
                if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < math.inf:
                    raise FusionError(f"a fusion weight must be a finite number above 0, not {weight!r}")
                if weight > MAX_FUSION_WEIGHT:
                    raise FusionError(
                        f"a fusion weight must be at most {MAX_FUSION_WEIGHT:g} (only the weights' ratios matter), "
                        f"not {weight!r}"
                    )

    @property
    def options(self) -> str:
        """The options that are not the defaults, as in a spec: ``k=20``, ``normalise=zmuv`` or ``""``."""
        if self.method == "rrf":
            return f"k={self.k}" if self.k != DEFAULT_K else ""
        return f"normalise={self.normalise}" if self.normalise != DEFAULT_NORMALISATION else ""

    def spec(self, labels: Sequence[str] | None = None) -> str:
        """The readable name, which ``parse_fusion`` reads back: ``rrf(bigram, unigram)``,
        ``combsum:normalise=zmuv(2*bigram, unigram)``; ``labels`` name the members (default: as written)."""
        names = list(labels or self.members)
        if self.weights is not None:
            names = [f"{w:g}*{name}" if w != 1 else name for w, name in zip(self.weights, names, strict=True)]
        options = self.options
        return f"{self.method}{':' + options if options else ''}({', '.join(names)})"

    def describe(self) -> dict[str, Any]:
        """What report.json records: the method, its option, the weights."""
        option: dict[str, Any] = {"k": self.k} if self.method == "rrf" else {"normalise": self.normalise}
        return {"method": self.method, **option, "weights": list(self.weights or [1.0] * len(self.members))}


def parse_fusion(text: str) -> Fusion:
    """A fusion from its spec, ``METHOD[:key=value,...](SYSTEM, SYSTEM, ...)``; a member may be ``WEIGHT*SYSTEM``."""
    match = _SPEC.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise FusionError(f"invalid fusion {shown(text)}: expected {SPEC_SYNTAX}")
    method, options_text, members_text = match.groups()
    options: dict[str, Any] = {}
    if options_text is not None:  # "rrf:(...)" too: an empty option list is refused as in every spec
        try:
            options = dict(SystemSpec.parse(f"{method}:{options_text}").options)
        except RagEvalError as exc:
            raise FusionError(f"invalid fusion {shown(text)}: {exc}") from None
    members, weights = [], []
    for part in _MEMBER_SEPARATOR.split(members_text) if members_text.strip() else []:  # "rrf()" has no member
        weighted = _WEIGHT.fullmatch(part)
        weights.append(float(weighted.group(1)) if weighted else 1.0)
        members.append((weighted.group(2) if weighted else part).strip())
    if "k" in options:
        if not re.fullmatch(r"[0-9]{1,7}", options["k"]):
            raise FusionError(f"invalid fusion {shown(text)}: k must be a whole number, not {shown(options['k'])}")
        options["k"] = int(options["k"])
    chosen = weights if any(w != 1 for w in weights) else None
    return _declared(method, members, chosen, options, f"fusion {shown(text)}")


def fusion_from_table(entry: Any, where: str) -> Fusion:
    """A fusion from a ``[[fusion]]`` table: ``method``, ``systems``, optional ``k``, ``normalise``, ``weights``."""
    if not isinstance(entry, dict):
        raise FusionError(f"{where}: expected a table")
    unknown = set(entry) - {"method", "systems", "k", "normalise", "weights"}
    if unknown:
        raise FusionError(f"{where} has unknown keys: {', '.join(sorted(unknown))}")
    method, members, weights = entry.get("method"), entry.get("systems"), entry.get("weights")
    if not isinstance(method, str):
        raise FusionError(f'{where} needs method = "{METHODS[0]}" (one of: {", ".join(METHODS)})')
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        raise FusionError(f'{where} needs systems = ["SPEC", "SPEC", ...]')
    if weights is not None and (not isinstance(weights, list) or not weights):
        raise FusionError(f"{where}: weights must be a list of numbers, one per system")
    options = {key: entry[key] for key in ("k", "normalise") if key in entry}
    return _declared(method, members, tuple(weights) if weights is not None else None, options, where)


def _declared(method: str, members: Sequence[str], weights: Sequence[Any] | None, options: dict, where: str) -> Fusion:
    allowed = "k" if method == "rrf" else "normalise"
    extra = sorted(set(options) - {allowed})
    if extra and method in METHODS:
        raise FusionError(f"{where}: {method} has no option {extra[0]!r} (options: {allowed})")
    try:
        return Fusion(method, tuple(members), tuple(weights) if weights is not None else None, **options)
    except TypeError:  # a wrongly typed option value reaches the dataclass as it is
        raise FusionError(f"{where}: invalid options {options!r}") from None
    except FusionError as exc:
        raise FusionError(f"{where}: {exc}", hint=exc.hint) from None


def _separator_hint(method: str, members: Sequence[str]) -> str | None:
    """For one member with a bare comma in it (``rrf(bigram,jieba)``): how members are separated."""
    if len(members) != 1 or not isinstance(members[0], str) or "," not in members[0]:
        return None
    hint = "separate members with a comma and a space (a bare comma separates a tokenizer's options)"
    if ":" in members[0]:
        return hint
    return f"{hint}, e.g. {method}({', '.join(part.strip() for part in members[0].split(','))})"


def normalised(scores: Sequence[float], how: str) -> list[float]:
    """One member's scores for one query, normalised as ranx normalises them."""
    if not scores:
        return []
    # Scores near the float limit (any engine's run may hold them) overflow the differences, sums and squares
    # below to inf, then nan. Each normalisation, its floor included, is unchanged when the scores and the floor
    # are scaled alike, so such scores are scaled down by a power of two first (exact).
    floor = DENOMINATOR_FLOOR
    largest = max(abs(score) for score in scores)
    if largest > _SCALE_ABOVE:
        exponent = math.frexp(largest)[1]
        scores = [math.ldexp(score, -exponent) for score in scores]
        floor = math.ldexp(floor, -exponent)
    if how == "minmax":
        low = min(scores)
        denominator = max(max(scores) - low, floor)
        return [(s - low) / denominator for s in scores]
    if how == "sum":
        low = min(scores)
        # sum(s - low), which sum(scores) - low * n equals but loses to cancellation when the scores are close
        denominator = max(math.fsum(s - low for s in scores), floor)
        return [(s - low) / denominator for s in scores]
    if how == "zmuv":
        mean = statistics.fmean(scores)
        denominator = max(statistics.pstdev(scores, mean), floor)
        return [(s - mean) / denominator for s in scores]
    raise FusionError(f"unknown normalisation {how!r}; choose from: {', '.join(NORMALISATIONS)}")


def fuse(
    rankings: Sequence[Sequence[tuple[str, float]]], fusion: Fusion, depth: int = DEPTH
) -> list[tuple[str, float]]:
    """One query: each member's ``(document, score)`` list, best first, to the fused list, best first.

    Each member counts with its first ``depth`` documents; the result holds at most ``depth``. Equal fused
    scores are ordered by the members' ranks, the first member's rank first, then the next one's.
    """
    if len(rankings) != len(fusion.members):
        raise FusionError(f"{len(rankings)} rankings for a fusion of {len(fusion.members)} systems")
    weights = fusion.weights or (1.0,) * len(rankings)
    scores: dict[str, float] = {}
    ranks: dict[str, list[int]] = {}
    for member, (ranking, weight) in enumerate(zip(rankings, weights, strict=True)):
        top = list(ranking[:depth])
        if fusion.method == "rrf":
            values = [1 / (fusion.k + rank) for rank in range(1, len(top) + 1)]
        else:
            values = normalised([score for _doc, score in top], fusion.normalise)
        for rank, ((doc, _score), value) in enumerate(zip(top, values, strict=True), start=1):
            places = ranks.setdefault(doc, [_ABSENT] * len(rankings))
            if places[member] != _ABSENT:
                continue  # a document listed twice counts at its best rank
            places[member] = rank
            scores[doc] = scores.get(doc, 0.0) + weight * value
    if fusion.method == "combmnz":
        scores = {doc: score * sum(r != _ABSENT for r in ranks[doc]) for doc, score in scores.items()}
    # Ties are judged on the scores as if the largest weight were 1: weights scaled alike rank alike (weights of 1e-12
    # rounded every score to 0 at 12 decimals, and the members' ranks alone ordered the list).
    scale = max(weights)
    order = sorted(scores, key=lambda doc: (-round(scores[doc] / scale, TIE_DECIMALS), ranks[doc], doc))
    return [(doc, scores[doc]) for doc in order[:depth]]


@dataclass(frozen=True)
class FusedRun:
    """A fused run, strictly ordered as every rag-eval run, and the time fusion took per query."""

    run: list[RankedDoc]
    queries: list[str]
    seconds: list[float]


def fuse_runs(
    runs: Sequence[Sequence[RankedDoc]],
    fusion: Fusion,
    *,
    queries: Sequence[str] | None = None,
    depth: int = DEPTH,
    clock: Callable[[], float] = time.perf_counter,
    exact: bool = False,
) -> FusedRun:
    """Fuse whole runs query by query (``queries``, default: every query of any run, in order of appearance).

    The fused scores are lowered where needed to stay strictly decreasing, so trec_eval reads exactly the fused
    order. By default they are rounded to 6 decimals as ``strict_run`` rounds bm25 (compare writes its runs
    so); ``exact`` keeps every digit (:func:`fused_run_text` writes them), so small scores stay distinct and
    meaningful (RRF with a large k: 1e-06 apart and less).
    """
    grouped: list[dict[str, list[RankedDoc]]] = []
    for run in runs:
        by_query: dict[str, list[RankedDoc]] = {}
        for doc in run:
            by_query.setdefault(doc.query_id, []).append(doc)
        grouped.append({q: sorted(docs, key=lambda d: d.rank) for q, docs in by_query.items()})
    order = list(queries) if queries is not None else list(dict.fromkeys(q for g in grouped for q in g))
    fused: list[RankedDoc] = []
    seconds: list[float] = []
    for query_id in order:
        rankings = [[(d.doc_id, d.score) for d in by_query.get(query_id, ())] for by_query in grouped]
        start = clock()
        ranked = fuse(rankings, fusion, depth)
        seconds.append(clock() - start)
        if exact:
            fused += _strictly_decreasing(query_id, ranked)
        else:
            fused += strict_run(query_id, [(doc, -score) for doc, score in ranked])
    return FusedRun(fused, order, seconds)


#: The smallest normal 32-bit float: a step below it could vanish where trec_eval reads a score as a float.
_FLOAT32_TINY = 2.0**-126


def _strictly_decreasing(query_id: str, ranked: list[tuple[str, float]]) -> list[RankedDoc]:
    """``ranked`` (best first) as RankedDocs whose scores keep every digit, each lowered where needed to be
    distinctly below the previous one even as a 32-bit float (``RELATIVE_STEP``, as ``strict_run`` does)."""
    scale = max((abs(score) for _doc, score in ranked), default=0.0) or 1.0
    out: list[RankedDoc] = []
    previous = math.inf
    for doc, value in ranked:
        score = float(value) + 0.0  # no -0.0
        if out:
            step = max((abs(previous) or scale) * RELATIVE_STEP, _FLOAT32_TINY)
            score = min(score, previous - step)
        out.append(RankedDoc(query_id, doc, len(out) + 1, score))
        previous = score
    return out


def fused_run_text(run: Sequence[RankedDoc], tag: str) -> str:
    """The lines of a fused TREC run file, ``qid Q0 docid rank score tag``, each score written in full (the
    shortest text that reads back as the same number: ``0.016393442622950821``, ``9.99999000001e-07``)."""
    return "".join(f"{doc.query_id} Q0 {doc.doc_id} {doc.rank} {doc.score!r} {tag}\n" for doc in run)


def resolve_members(fusion: Fusion, systems: Mapping[str, str], runs: Sequence[str]) -> list[str]:
    """The full names of a fusion's members: ``systems`` maps each system's full name to its tokenizer spec,
    ``runs`` are the ``--run`` names. A reference is a full name, a run's name, or a tokenizer spec that
    exactly one system has."""
    resolved = []
    for reference in fusion.members:
        wanted = reference.strip()
        try:
            spec = written_spec(wanted)
        except RagEvalError:
            spec = wanted
        found = [n for n in systems if wanted == n or spec == systems[n]] + [n for n in runs if n == wanted]
        found = list(dict.fromkeys(found))
        if not found:
            known = ", ".join([*dict.fromkeys(systems.values()), *runs])
            raise FusionError(
                f"fusion {fusion.spec()!r}: no system {reference!r} in this comparison; systems: {known}",
                hint="name a system by its tokenizer spec (as given with -t or in [[system]]), full name or --run "
                "name; separate systems with a comma and a space",
            )
        if len(found) > 1:
            raise FusionError(
                f"fusion {fusion.spec()!r}: {reference!r} names {len(found)} systems: {', '.join(found)}",
                hint="name the system by its full name, e.g. " + repr(found[0]),
            )
        resolved.append(found[0])
    if len(set(resolved)) != len(resolved):
        raise FusionError(f"fusion {fusion.spec()!r} names one system twice")
    return resolved


def member_label(name: str, systems: Mapping[str, str]) -> str:
    """How a fused system's name shows a member: its tokenizer spec when no other system shares it, else
    the full name (a ``--run`` keeps its own)."""
    spec = systems.get(name)
    if spec is not None and list(systems.values()).count(spec) == 1:
        return spec
    return name


def fused_systems(
    fusions: Sequence[Fusion], systems: Mapping[str, str], runs: Sequence[str]
) -> list[tuple[Fusion, str, list[str]]]:
    """Each fusion with its name in a comparison (``rrf(bigram, unigram)``) and its members' full names;
    ``systems`` maps the compared systems' full names to their tokenizer specs, ``runs`` are ``--run`` names."""
    out = []
    for fusion in fusions:
        members = resolve_members(fusion, systems, runs)
        out.append((fusion, fusion.spec([member_label(m, systems) for m in members]), members))
    return out


def fused_row(
    fusion: Fusion,
    name: str,
    members: Sequence[str],
    fused: FusedRun,
    rows: Sequence[dict[str, Any]],
    measured: Mapping[str, SystemRun],
    dataset: Dataset,
) -> dict[str, Any]:
    """A fused system's row in a comparison, quality aside: its identity (its members' specs, which the gate
    compares) and costs: no build of its own, the members' indexes, per query the members' times added plus
    the fusion's own. A ``--run`` member has no times: then the row has none either."""
    row_of = {row["name"]: row for row in rows}
    row: dict[str, Any] = {
        "name": name,
        "tokenizer": fusion.spec([row_of[m]["tokenizer"] for m in members]),
        "builder": ", ".join(row_of[m]["builder"] or "-" for m in members),
        "mode": "",
        "fusion": {**fusion.describe(), "members": list(members), "depth": DEPTH, **FUSED_COSTS},
    }
    timed = [measured[m] for m in members if m in measured]
    if len(timed) < len(members):
        return row
    tokenize = [sum(times) for times in zip(*(t.tokenize_seconds for t in timed), strict=True)]
    search = [sum(times) for times in zip(*(t.search_seconds for t in timed), fused.seconds, strict=True)]
    hits = Counter(doc.query_id for doc in fused.run)
    no_answer = [q.id for q in dataset.queries.values() if q.kind == NO_ANSWER]
    return row | {
        "latency_ms": {
            "tokenize": latency_summary(tokenize),
            "search": latency_summary(search),
            "fusion": latency_summary(fused.seconds),
        },
        "latency_samples_ms": {"search": [round(v * 1000, 4) for v in search]},
        "build": {"index_bytes": sum(row_of[m]["build"].get("index_bytes") or 0 for m in members)},
        "tokenize_chars_per_second": None,
        "tokens_per_passage": None,
        "zero_hit_queries": sum(1 for q in dataset.queries if not hits[q]),
        "no_answer_queries": len(no_answer),
        "no_answer_false_hit_rate": round(sum(1 for q in no_answer if hits[q]) / len(no_answer), 4)
        if no_answer
        else None,
    }


def fuse_files(
    paths: Sequence[str | Path],
    output: str | Path,
    *,
    method: str = "rrf",
    k: int | None = None,
    normalise: str | None = None,
    weights: Sequence[float] | None = None,
    depth: int = DEPTH,
) -> tuple[Path, FusedRun]:
    """``rag-eval fuse``: fuse TREC run files (from any engine) and write the fused run to ``output``, a new file.

    Each run is ranked as ``read_run`` ranks it (score descending, equal scores by document id); queries are every
    query of any run. Everything is checked before the output is written, and an existing file is never
    replaced.
    """
    if type(depth) is not int or not 1 <= depth <= MAX_DEPTH:
        raise FusionError(f"depth must be a whole number from 1 to {MAX_DEPTH}, not {depth!r}")
    target = checked_target(output, what=FUSED_RUN_WHAT, file=True)
    refuse_inputs(output, [("run", path) for path in paths], what=FUSED_RUN_WHAT)
    if target.exists() or target.is_symlink():  # refused now, before reading the runs, not after
        raise OutputError(
            f"{target}: refusing to replace it: it already exists", hint="choose a new path, or move the file away"
        )
    names = [str(path) for path in paths]
    # One file named twice, however spelled (../a.run and /abs/a.run, a symbolic or hard link to it): counted
    # twice, it would silently double that run's weight.
    twice = given_twice(names)
    if twice is not None:
        if twice[0] == twice[1]:
            raise FusionError(f"run {twice[0]!r} is given twice")
        raise FusionError(f"runs {twice[0]!r} and {twice[1]!r} are one file, given twice")
    options: dict[str, Any] = {key: value for key, value in (("k", k), ("normalise", normalise)) if value is not None}
    fusion = _declared(method, names, tuple(weights) if weights else None, options, "fusion of " + ", ".join(names))
    runs = [read_run(path) for path in paths]
    fused = fuse_runs(runs, fusion, depth=depth, exact=True)
    tag = re.sub(r"[^A-Za-z0-9._=-]+", "_", f"fused-{fusion.method}")
    written = write_text_atomic(target, fused_run_text(fused.run, tag), owned=None, what=FUSED_RUN_WHAT)
    return written, fused
