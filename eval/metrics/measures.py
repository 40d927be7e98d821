"""Retrieval metrics with trec_eval's definitions (pytrec_eval through ir-measures), named as ir-measures names them."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ...errors import RagEvalError
from ...records import RankedDoc
from ..datasets.records import MAX_RELEVANCE, Qrel

#: Reported by default: the harness's headline metrics.
DEFAULT_METRICS = ("nDCG@10", "R@10", "R@100", "RR@10", "P@1", "MAP@100")
#: Names people use that ir-measures spells differently.
ALIASES = {"MAP": "AP", "MRR": "RR", "Recall": "R", "Precision": "P"}
#: Largest rank cutoff accepted (``P@k``, ``R@k``, ...). TREC runs go 1,000 deep; pytrec_eval keeps the
#: cutoff in a C int, and a negative or overflowing one aborts the whole process.
MAX_CUTOFF = 10_000
#: Longest metric name accepted; ir-measures parses names with Python's own parser.
MAX_NAME_CHARS = 200
#: Largest ``beta`` of SetF accepted.
MAX_BETA = 100.0


class MetricError(RagEvalError, ValueError):
    """A metric name that cannot be parsed, or one trec_eval cannot compute with the parameters given."""


class EvaluationError(RagEvalError, ValueError):
    """Qrels or a run that cannot be scored: invalid grades, scores or ids, or no judged query."""


def ranked_ids(run: Iterable[RankedDoc]) -> dict[str, list[str]]:
    """A run as query id -> document ids in rank order (queries in the order they first appear)."""
    by_query: dict[str, list[RankedDoc]] = {}
    for doc in run:
        by_query.setdefault(doc.query_id, []).append(doc)
    return {query: [doc.doc_id for doc in sorted(docs, key=lambda d: d.rank)] for query, docs in by_query.items()}


def _ir_measures() -> Any:
    try:
        import ir_measures
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise RagEvalError("metrics need ir-measures", hint="pip install 'ir-measures>=0.3'") from exc
    return ir_measures


def parse_metric(name: str) -> Any:
    """An ir-measures measure from a name such as ``nDCG@10``, ``R@100``, ``MRR@10`` or ``P(rel=2)@5``.

    Names are read with rag-eval's own grammar, ``NAME[(key=value, ...)][@CUTOFF]``, before anything reaches
    ir-measures or pytrec_eval: measure names and keys are case-insensitive (``ndcg@10`` is ``nDCG@10``), a
    cutoff is a whole number from 1 to MAX_CUTOFF and ``rel`` one from 1 to MAX_RELEVANCE, without sign or
    leading zeros. Anything else, or a measure trec_eval does not compute, is a MetricError naming the spec.
    """
    return _parse(name)[1]


def canonical_metric(name: str) -> str:
    """The canonical spelling of a metric name: ``ndcg@10`` -> ``nDCG@10``, ``map@100`` -> ``MAP@100``,
    ``P(rel=1)@5`` -> ``P@5`` (parameters at their default are left out)."""
    return _parse(name)[0]


def metric_names(names: Iterable[str]) -> list[str]:
    """Each name's canonical spelling, once, in the order first given: two spellings of one measure are one
    (``MAP@100`` and ``AP@100``: the first given names it)."""
    chosen: dict[str, str] = {}
    for name in names:
        canonical, measure = _parse(name)
        chosen.setdefault(str(measure), canonical)
    return list(chosen.values())


#: ``NAME``, ``NAME@AT``, ``NAME(key=value, ...)`` or ``NAME(key=value, ...)@AT``, with nothing around it.
_SPEC = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9_]*)(?:\((?P<params>[^()]*)\))?(?:@(?P<at>[^@()\s]*))?")
#: One ``key=value`` of a parameter list; a value is a ``{...}`` mapping or runs to the next comma.
_PARAM = re.compile(r"\s*(?P<key>[A-Za-z_]+)\s*=\s*(?P<value>\{[^{}]*\}|[^,{}=]*?)\s*(?:,|$)")
_WHOLE = re.compile(r"0|[1-9][0-9]*")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_FORM = "NAME, NAME@CUTOFF or NAME(key=value, ...)@CUTOFF, e.g. nDCG@10, R@100, P(rel=2)@5"


def _parse(name: str) -> tuple[str, Any]:
    """The canonical name and the ir-measures measure of a metric spec, every value checked."""
    if not isinstance(name, str) or not name.strip():
        raise MetricError(f"invalid metric name {name!r}; examples: {', '.join(DEFAULT_METRICS)}")
    if len(name) > MAX_NAME_CHARS:
        raise MetricError(f"metric name of {len(name)} characters is over the limit of {MAX_NAME_CHARS}")
    match = _SPEC.fullmatch(name)
    if match is None:
        raise MetricError(f"unknown metric {name!r}: expected {_FORM}")
    spelled, measure_type = _measure_type(name, match["name"])
    supported = measure_type.SUPPORTED_PARAMS
    texts: dict[str, str] = {}
    if match["params"] is not None:
        params, position = match["params"], 0
        while position < len(params) or not texts:
            item = _PARAM.match(params, position)
            if item is None or item.end() == position:
                raise MetricError(f"metric {name!r}: parameters are key=value separated by commas; expected {_FORM}")
            key = item["key"].lower()
            if key in texts:
                raise MetricError(f"metric {name!r}: parameter {key!r} is given twice")
            texts[key] = item["value"]
            position = item.end()
        if params.rstrip().endswith(","):
            raise MetricError(f"metric {name!r}: a comma ends the parameters; expected {_FORM}")
    at_key = getattr(measure_type, "AT_PARAM", "cutoff")
    if match["at"] is not None:
        if at_key in texts:
            raise MetricError(f"metric {name!r}: {at_key} is given twice (in parentheses and after @)")
        texts[at_key] = match["at"]
    values = {key: _param_value(name, measure_type, key, text) for key, text in texts.items()}
    for key, info in supported.items():
        if info.required and key not in values:
            raise MetricError(
                f"metric {name!r}: {measure_type.NAME} needs {key} (e.g. {measure_type.NAME}@10)"
                if key == at_key
                else f"metric {name!r}: {measure_type.NAME} needs the parameter {key}"
            )
    # Parameters at their default are left out, so ``P(rel=1)@5`` and ``P@5`` are one measure with one name.
    values = {key: value for key, value in values.items() if not _same(value, supported[key].default)}
    inner = ",".join(f"{key}={_written(values[key])}" for key in supported if key in values and key != at_key)
    canonical = spelled + (f"({inner})" if inner else "")
    if at_key in values:
        canonical += f"@{_written(values[at_key])}"
    measure = measure_type(**values)
    if not _computable(measure):
        computable = ", ".join(_computable_names())
        raise MetricError(
            f"metric {name!r}: trec_eval does not compute {measure.NAME} with these parameters; "
            f"rag-eval reports trec_eval's definitions only (measures: {computable})"
        )
    return canonical, measure


def _computable_names() -> list[str]:
    return sorted({m.NAME for m in _ir_measures().pytrec_eval.SUPPORTED_MEASURES})


def _measure_type(name: str, head: str) -> tuple[str, Any]:
    """The ir-measures measure named ``head``, case-insensitively, rag-eval's aliases included, and the name's
    own spelling (``map`` -> ``MAP``: reports and baselines keep the names they were written with)."""
    registry = _ir_measures().measures.registry
    spellings = [(key, key) for key in registry] + list(ALIASES.items())
    matches = [(key, target) for key, target in spellings if key.lower() == head.lower()]
    # The measure's own name when it is one of the matches (nDCG, not NDCG); else an alias as rag-eval spells it
    # (MAP, MRR: the names reports and baselines were written with).
    found = next((m for m in matches if m[0] == registry[m[1]].NAME), matches[0] if matches else None)
    if found is None:
        known = _computable_names()
        close = difflib.get_close_matches(head.lower(), [k.lower() for k in known], n=1, cutoff=0.7)
        guess = next((f"did you mean {k}? " for k in known if close and k.lower() == close[0]), "")
        raise MetricError(f"unknown metric {name!r}: no measure {head!r}; {guess}measures: {', '.join(known)}")
    return found[0], registry[found[1]]


def _param_value(name: str, measure_type: Any, key: str, text: str) -> Any:
    """One parameter's value from its text, checked against what trec_eval takes."""
    supported = measure_type.SUPPORTED_PARAMS
    if key not in supported:
        raise MetricError(
            f"metric {name!r}: {measure_type.NAME} has no parameter {key!r} "
            f"(parameters: {', '.join(sorted(supported)) or 'none'})"
        )
    if key == "cutoff":
        return _whole(name, "cutoff", text, 1, MAX_CUTOFF)
    if key == "rel":  # trec_eval's -l: the lowest grade counted relevant; grade 0 is "not relevant"
        return _whole(name, "rel", text, 1, MAX_RELEVANCE)
    if key == "gains":
        return _gains(name, text)
    if key == "recall":
        value = float(text) if _DECIMAL.fullmatch(text) else math.nan
        if not 0 <= value <= 1 or round(value, 2) != value:
            raise MetricError(
                f"metric {name!r}: recall must be a number from 0 to 1 with at most two decimals, not {text!r}"
            )
        return value
    if key == "beta":
        value = float(text) if _DECIMAL.fullmatch(text) else math.nan
        if not 0 < value <= MAX_BETA:
            raise MetricError(f"metric {name!r}: beta must be a number above 0 and at most {MAX_BETA:g}, not {text!r}")
        return value
    info = supported[key]
    if info.dtype is bool:
        if text.lower() not in ("true", "false"):
            raise MetricError(f"metric {name!r}: {key} must be a bool (True or False), not {text!r}")
        return text.lower() == "true"
    choices = getattr(info, "choices", None)
    if info.dtype is str and isinstance(choices, (list, tuple)):
        choice = text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text
        if choice not in choices:
            raise MetricError(f"metric {name!r}: {key} must be one of {', '.join(map(str, choices))}, not {text!r}")
        return choice
    raise MetricError(f"metric {name!r}: rag-eval does not take the parameter {key!r}")  # pragma: no cover


def _whole(name: str, key: str, text: str, low: int, high: int) -> int:
    if not _WHOLE.fullmatch(text) or len(text) > len(str(high)) or not low <= int(text) <= high:
        raise MetricError(
            f"metric {name!r}: {key} must be a whole number from {low} to {high} without sign or leading zeros, "
            f"not {text!r}"
        )
    return int(text)


def _gains(name: str, text: str) -> dict[int, int]:
    pairs = [pair.strip() for pair in text[1:-1].split(",")] if text.startswith("{") else []
    if not pairs or not all(pair.count(":") == 1 for pair in pairs):
        raise MetricError(f"metric {name!r}: gains must be a mapping of grades to gains, e.g. gains={{0:0,1:1,2:3}}")
    gains: dict[int, int] = {}
    for pair in pairs:
        grade, gain = (part.strip() for part in pair.split(":"))
        number = _whole(name, "a gains grade", grade, 0, MAX_RELEVANCE)
        if number in gains:
            raise MetricError(f"metric {name!r}: gains give grade {number} twice")
        gains[number] = _whole(name, "a gain", gain, 0, MAX_RELEVANCE)
    return dict(sorted(gains.items()))


def _same(value: Any, default: Any) -> bool:
    return type(value) is type(default) and value == default


def _written(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{grade}:{gain}" for grade, gain in value.items()) + "}"
    return repr(value) if isinstance(value, (str, float)) else str(value)


def _computable(measure: Any) -> bool:
    provider = _ir_measures().pytrec_eval
    if measure.NAME == "RR" and "cutoff" in measure.params:
        # trec_eval's recip_rank has no cutoff: RR@k is recip_rank over each query's top k (trec_eval -M k).
        if measure["judged_only"]:
            return False
        measure = _without_cutoff(measure)
    try:
        return bool(provider.supports(measure))
    except AssertionError:  # ir-measures validates with assert
        return False


def _without_cutoff(measure: Any) -> Any:
    params = {k: v for k, v in measure.params.items() if k != "cutoff"}
    return type(measure)(**params)


def totalled(names: Iterable[str]) -> set[str]:
    """The names among ``names`` of counts (NumQ, NumRel, NumRet), which trec_eval's ``all`` row (and ir-measures)
    aggregate as a total over the queries; every other measure's is the mean."""
    return {name for name in names if not is_quality(name)}


def is_quality(name: str) -> bool:
    """Whether a metric measures retrieval quality: a value from 0 to 1, higher is better.

    What the measure declares decides: ir-measures declares the counts (NumQ, NumRel, NumRet and NumRet(rel=N))
    as totalled over the queries, and every other measure trec_eval computes is a mean of values from 0 to 1.
    A count is not quality: more documents retrieved, or more relevant ones in the qrels, is not a better system."""
    return not isinstance(parse_metric(name).aggregator(), _ir_measures().SumAgg)


def value_range(name: str) -> tuple[float, float]:
    """The values a metric can take: 0 to 1 for a quality measure, 0 and up for a count."""
    return (0.0, 1.0) if is_quality(name) else (0.0, math.inf)


def quality_metric(name: str, purpose: str) -> str:
    """The canonical spelling of ``name``; a MetricError when it is a count, which ``purpose`` cannot rank by."""
    canonical = canonical_metric(name)
    if not is_quality(canonical):
        raise MetricError(
            f"{purpose} needs a quality measure, and {canonical} is a count (higher is not better)",
            hint=f"use a measure from 0 to 1 where higher is better, e.g. {', '.join(DEFAULT_METRICS[:3])}",
        )
    return canonical


def check_qrels(qrels: Iterable[Qrel]) -> dict[str, dict[str, int]]:
    """Qrels as ``{query: {doc: grade}}``, refusing grades outside 0..MAX_RELEVANCE, non-integer grades,
    invalid ids and one pair judged twice with different grades."""
    out: dict[str, dict[str, int]] = {}
    checked: set[str] = set()
    for qrel in qrels:
        try:
            query_id, doc_id, grade = qrel
        except (TypeError, ValueError):
            raise EvaluationError(f"qrels: {qrel!r} is not a (query, document, grade) record") from None
        _check_id(query_id, "query id", checked)
        _check_id(doc_id, "document id", checked)
        if type(grade) is not int or not 0 <= grade <= MAX_RELEVANCE:
            raise EvaluationError(
                f"qrels: query {query_id!r}, document {doc_id!r}: grade {grade!r} is not a whole "
                f"number from 0 to {MAX_RELEVANCE}"
            )
        docs = out.setdefault(query_id, {})
        if docs.get(doc_id, grade) != grade:
            raise EvaluationError(
                f"qrels: query {query_id!r}, document {doc_id!r} is judged twice ({docs[doc_id]} and {grade})"
            )
        docs[doc_id] = grade
    return out


def check_run(run: Iterable[RankedDoc], queries: set[str] | None = None) -> dict[str, dict[str, float]]:
    """A run as ``{query: {doc: score}}`` (only ``queries`` when given), refusing scores that are not
    finite numbers, invalid ids and a document returned twice for one query (as trec_eval does)."""
    out: dict[str, dict[str, float]] = {}
    checked: set[str] = set()
    for doc in run:
        try:
            query_id, doc_id, score = doc.query_id, doc.doc_id, doc.score
        except AttributeError:
            raise EvaluationError(f"run: {doc!r} is not a RankedDoc (query, document, rank, score)") from None
        _check_id(query_id, "query id", checked)
        _check_id(doc_id, "document id", checked)
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not _finite(score):
            raise EvaluationError(
                f"run: query {query_id!r}, document {doc_id!r}: score {score!r} is not a finite number"
            )
        if queries is not None and query_id not in queries:
            continue
        docs = out.setdefault(query_id, {})
        if doc_id in docs:
            raise EvaluationError(f"run: query {query_id!r} returns document {doc_id!r} twice")
        docs[doc_id] = float(score)
    return out


def _finite(score: int | float) -> bool:
    try:
        return math.isfinite(score)
    except OverflowError:  # an int too large for a float
        return False


def _check_id(value: Any, what: str, checked: set[str]) -> None:
    if value in checked:  # each distinct id is checked once: runs repeat them many times
        return
    # pytrec_eval hands ids to C: a NUL truncates them and a lone surrogate crashes the process.
    if not isinstance(value, str) or not value or "\x00" in value:
        raise EvaluationError(f"invalid {what} {value!r}: ids are non-empty text without NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise EvaluationError(f"invalid {what} {value!r}: not valid Unicode (a lone surrogate)") from None
    checked.add(value)


def judged_queries(qrels: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Queries with at least one judgment, sorted: the queries every mean is taken over, as trec_eval -c takes
    it over every query of the qrels (one whose judgments are all 0 scores 0 and still counts)."""
    return sorted(q for q, docs in qrels.items() if docs)


def relevant_queries(qrels: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Queries with at least one positive grade, sorted: those on which systems can differ."""
    return sorted(q for q, docs in qrels.items() if any(grade > 0 for grade in docs.values()))


def evaluate(
    qrels: Iterable[Qrel], run: Iterable[RankedDoc], metrics: Iterable[str] = DEFAULT_METRICS
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean and per-query values of each metric over every judged query (every query of the qrels).

    As ``trec_eval -c``: a judged query with no results counts as zero in every measure of what was retrieved, in
    NumQ as one query and in NumRel with its relevant documents (NumRel comes from the qrels, whatever the run
    holds), and a query whose judgments are all 0 counts too (its values are 0, including the interpolated
    precision trec_eval leaves undefined, 0/0, for it under judged_only); the run may contain other queries (they
    are ignored).
    Qrels without a positive grade (every metric would be 0), grades outside 0..MAX_RELEVANCE and scores that
    are not finite are EvaluationErrors.
    """
    ir_measures = _ir_measures()
    names = list(dict.fromkeys(metrics))
    if not names:
        raise MetricError("no metrics to compute")
    measures = {name: parse_metric(name) for name in names}
    qrel_dict = check_qrels(qrels)
    judged = judged_queries(qrel_dict)
    if not relevant_queries(qrel_dict):
        raise EvaluationError(
            "no relevant document: no qrel has a positive grade, so every metric would be 0",
            hint="check the qrels file: grades 1 and above mark relevant documents",
        )
    run_dict = check_run(run, set(judged))
    # trec_eval -c scores a judged query the run lacks on a ranking of one document no qrel judges (trec_eval.c's
    # bogus_ranking), then sets its num_ret to 0: NumRel still counts the query's relevant documents (from the
    # qrels), and every measure of what was retrieved is 0. (pytrec_eval given an empty ranking is not reliable:
    # its num_rel was 0 or the qrels' count depending on the other queries.)
    missing = [q for q in judged if q not in run_dict]
    scored = {**run_dict, **{q: {_unjudged_doc(qrel_dict[q]): 1.0} for q in missing}}
    per_query: dict[str, dict[str, float]] = {q: {name: 0.0 for name in names} for q in judged}
    # Names that parse to one measure (``MRR@10`` and ``RR@10``) each get its values.
    by_measure: dict[Any, list[str]] = {}
    for name, measure in measures.items():
        by_measure.setdefault(measure, []).append(name)
    provider = ir_measures.pytrec_eval
    for measures_batch, docs, origin in _batches(list(by_measure), scored):
        for value in provider.evaluator(measures_batch, qrel_dict).iter_calc(docs):
            if value.query_id in per_query:
                found = float(value.value)
                # trec_eval's 0/0: interpolated precision under judged_only for a query with no relevant and no
                # judged retrieved document; every other measure gives such a query 0, and so does this one
                found = 0.0 if math.isnan(found) else found
                for name in by_measure[origin[value.measure]]:
                    per_query[value.query_id][name] = found
    for query in missing:  # the placeholder ranking retrieved nothing: trec_eval -c resets num_ret to 0
        for name in names:
            if measures[name].NAME == "NumRet":
                per_query[query][name] = 0.0
    means = {name: sum(per_query[q][name] for q in judged) / len(judged) for name in names}
    return means, per_query


def _batches(
    measures: list[Any], scored: dict[str, dict[str, float]]
) -> list[tuple[list[Any], dict[str, dict[str, float]], dict[Any, Any]]]:
    """The pytrec_eval runs that compute ``measures``: (the measures of one run, the ranking it scores, each
    measure computed -> the measure asked for). Measures run together when they share their settings; trec_eval's
    recip_rank has no cutoff, so RR@k runs as RR over each query's top k (trec_eval -M k)."""
    plain = [m for m in measures if not (m.NAME == "RR" and "cutoff" in m.params)]
    batches: list[tuple[list[Any], dict[str, dict[str, float]], dict[Any, Any]]] = []
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for measure in plain:
        groups.setdefault(_pytrec_eval_settings(measure), []).append(measure)
    batches.extend((group, scored, {m: m for m in group}) for group in groups.values())
    for cutoff in sorted({m["cutoff"] for m in measures if m not in plain}):
        cut = [m for m in measures if m not in plain and m["cutoff"] == cutoff]
        uncut = {_without_cutoff(m): m for m in cut}
        batches.append((list(uncut), _top(scored, cutoff), uncut))
    return batches


#: The document of trec_eval -c's ranking for a query the run lacks (trec_eval.c's bogus_ranking).
PLACEHOLDER_DOC = "ceci_nest_pas_un_docno"


def _unjudged_doc(judged: Mapping[str, int]) -> str:
    """trec_eval's placeholder document id, made longer until no judgment of the query names it."""
    doc = PLACEHOLDER_DOC
    while doc in judged:
        doc += "_"
    return doc


def _pytrec_eval_settings(measure: Any) -> tuple[Any, ...]:
    """The pytrec_eval settings (relevance level, judged-only, gains) a measure is computed with.

    ir-measures' pytrec_eval provider runs pytrec_eval once per setting and puts a measure that has none
    (NumQ, NumRet, nDCG without gains) into whichever run comes first: NumRet was counted with judged_only and
    nDCG@10 computed on another nDCG's gains. Measures are batched by setting so each runs with its own."""
    params = measure.SUPPORTED_PARAMS
    gains = measure["gains"] if "gains" in params else None
    return (
        measure["rel"] if "rel" in params else 1,
        measure["judged_only"] if "judged_only" in params else False,
        tuple(sorted(gains.items())) if isinstance(gains, dict) else None,
    )


def _top(run: dict[str, dict[str, float]], depth: int) -> dict[str, dict[str, float]]:
    """Each query's first ``depth`` documents in trec_eval's order: score descending, ties by document id
    descending (trec_eval's ``-M depth``)."""
    return {
        query: dict(sorted(docs.items(), key=lambda item: (item[1], item[0]), reverse=True)[:depth])
        for query, docs in run.items()
    }
