"""Scoring run files: a TREC run file against qrels, as ``rag-eval evaluate`` and trec_eval do."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ...errors import DatasetError
from ...files.textio import display_name
from ..datasets.records import Qrel
from ..datasets.trec import read_any_qrels, read_run
from .measures import DEFAULT_METRICS, evaluate, metric_names, totalled


def evaluate_files(
    run_file: str | Path, qrels_file: str | Path, metrics: Iterable[str] = ()
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Score a TREC run file against qrels (BEIR TSV or TREC four-column): trec_eval's ``all`` values (the mean
    over the judged queries; for the counts NumQ, NumRel and NumRet, their total) and per-query values, keyed by
    each metric's canonical name (``ndcg@10`` and ``NDCG@10`` are one ``nDCG@10``)."""
    names = metric_names(list(metrics) or DEFAULT_METRICS)  # before any file is read
    qrels = read_any_qrels(qrels_file)
    run = read_run(run_file)
    # A run of none of the judged questions is a wrong pair of files, not a score of 0 for every query.
    ran = {doc.query_id for doc in run}
    if ran and qrels and not ran & set(qrels):
        raise DatasetError(
            f"{display_name(str(run_file))} and {display_name(str(qrels_file))} share no query id (the run's "
            f"{len(ran)} include {min(ran)!r}; the qrels' {len(qrels)} include {min(qrels)!r})",
            hint="score a run against the judgments of its own questions",
        )
    qrel_list = [Qrel(query, doc, grade) for query, docs in qrels.items() for doc, grade in docs.items()]
    means, values = evaluate(qrel_list, run, names)
    for name in totalled(names):  # trec_eval prints num_ret's total, not the mean a query retrieves
        means[name] = sum(row[name] for row in values.values())
    return means, values
