"""Random runs and qrels, and trec_eval's value of every measure on them (through ir-measures' pytrec_eval)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from rag_eval.eval.metrics.measures import parse_metric

CUTOFFS = (1, 3, 5, 10, 20)


#: Every measure rag-eval's parser accepts, with parameters: cutoffs, rel levels, judged_only, gains, betas.
SPECS = [
    *(f"{name}@{k}" for name in ("P", "R", "nDCG", "AP", "RR", "Success") for k in CUTOFFS),
    *("P(rel=2)@5", "P(rel=3)@1", "P(judged_only=True)@5", "R(judged_only=True)@5"),
    *("nDCG", "nDCG(judged_only=True)@10", "nDCG(gains={0:1,1:1,2:5})@10", "nDCG(gains={1:0,2:2})@5"),
    *("nDCG(gains={0:0,1:1,2:3})", "AP", "AP(rel=2)", "AP(rel=2)@5", "AP(judged_only=True)"),
    *("RR", "RR(rel=2)", "RR(rel=3)@3", "RR(rel=2)@10", "RR(judged_only=True)"),
    *("Success(rel=2)@3", "Success(judged_only=True)@1", "Rprec", "Rprec(rel=2)", "Rprec(judged_only=True)"),
    *("Bpref", "Bpref(rel=2)", "infAP", "infAP(rel=3)", "IPrec@0.0", "IPrec@0.3", "IPrec@1.0"),
    *("IPrec(judged_only=True)@0.5", "NumQ", "NumRel", "NumRet", "NumRet(rel=1)", "NumRet(rel=2)"),
    *("SetAP", "SetAP(rel=2)", "SetF", "SetF(beta=2.0)", "SetF(rel=2,beta=0.5)", "SetP", "SetP(relative=True)"),
    *("SetP(rel=2)", "SetP(judged_only=True)", "SetR", "SetR(rel=2)"),
]


TOLERANCE = 1e-9


Qrels = dict[str, dict[str, int]]


Run = dict[str, dict[str, float]]


Case = tuple[Qrels, Run, list[str]]


QUERIES = ["q1", "q10", "q2", "q3", "q4"]


# Ids whose byte order differs from their "natural" order, so score ties exercise trec_eval's tie-break.
DOCS = ["a", "ab", "b", "B", "d1", "d10", "d2", "d9", "e", "é", "z", "Z0", "x-1", "x_1", "ß"]


UNJUDGED = [f"u{n}" for n in range(12)]


SCORES = [-1.0, 0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 3.25, 7.0]


def _trec_measure(measure: Any) -> tuple[str, str, int, bool]:
    """trec_eval's measure string, the key pytrec_eval returns, relevance level (-l) and judged-only flag (-J)."""
    name, params = measure.NAME, measure.params
    rel, judged = params.get("rel", 1), params.get("judged_only", False)
    cutoff = params.get("cutoff")
    if name in ("P", "R", "Success"):
        trec = {"P": "P", "R": "recall", "Success": "success"}[name]
        return f"{trec}.{cutoff}", f"{trec}_{cutoff}", rel, judged
    if name == "nDCG":
        return (f"ndcg_cut.{cutoff}", f"ndcg_cut_{cutoff}", 1, judged) if cutoff else ("ndcg", "ndcg", 1, judged)
    if name == "AP":
        return (f"map_cut.{cutoff}", f"map_cut_{cutoff}", rel, judged) if cutoff else ("map", "map", rel, judged)
    if name == "IPrec":
        recall = f"{params['recall']:.2f}"
        return f"iprec_at_recall.{recall}", f"iprec_at_recall_{recall}", 1, judged
    if name == "SetF":
        return f"set_F.{params.get('beta', 1.0)}", "set_F", rel, judged
    if name == "SetP" and params.get("relative"):
        return "set_relative_P", "set_relative_P", rel, judged
    if name == "NumRet" and "rel" in params:
        return "num_rel_ret", "num_rel_ret", rel, False
    simple = {"RR": "recip_rank", "Rprec": "Rprec", "Bpref": "bpref", "infAP": "infAP", "NumQ": "num_q"}
    simple |= {"NumRel": "num_rel", "NumRet": "num_ret", "SetAP": "set_map", "SetP": "set_P", "SetR": "set_recall"}
    return simple[name], simple[name], rel, judged


def _trec_order(docs: dict[str, float]) -> list[str]:
    """trec_eval's ranking: score descending, equal scores by document id descending as C strcmp compares."""
    return sorted(docs, key=lambda doc: (docs[doc], doc.encode("utf-8")), reverse=True)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    qrels: Qrels = {}
    for query in draw(st.lists(st.sampled_from(QUERIES), min_size=1, unique=True)):
        judged = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=10, unique=True))
        grades = st.sampled_from([0, 0, 1, 1, 2, 3])
        qrels[query] = {doc: draw(grades) for doc in judged}
    assume(any(g > 0 for docs in qrels.values() for g in docs.values()))
    run: Run = {}
    for query in draw(st.lists(st.sampled_from([*QUERIES, "q-unjudged"]), min_size=1, unique=True)):
        # from one document to past every cutoff; judged and unjudged documents mixed
        docs = draw(st.lists(st.sampled_from(DOCS + UNJUDGED), min_size=1, max_size=25, unique=True))
        run[query] = {doc: draw(st.sampled_from(SCORES)) for doc in docs}
    assume(set(run) & set(qrels))  # else evaluate refuses the pair of files
    # the measures in a random order (from a seed: shrinking a permutation of them is slow)
    specs = list(SPECS)
    random.Random(draw(st.integers(0, 2**16))).shuffle(specs)
    return qrels, run, specs


COUNTS = [spec for spec in SPECS if parse_metric(spec).NAME in ("NumQ", "NumRel", "NumRet")]


QUALITY = [spec for spec in SPECS if spec not in COUNTS]
