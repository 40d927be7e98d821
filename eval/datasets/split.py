"""Deterministic dev/test splits of a dataset's queries, by a hash of each query id.

A query is in the dev part when the first 8 bytes of sha256(salt, NUL, query id), read as a fraction of
2^64, fall below the dev fraction. The split depends on the query id alone: not on the qrels, the query
text, the order of the files or the other queries, so removing or changing the test part's judgements
cannot move a query between the parts.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from ...errors import RagEvalError
from .records import Dataset

#: Part of every hash; change it and every split changes.
SALT = "rag-eval/split/1"
#: The share of the queries in the dev part unless told otherwise.
DEV_FRACTION = 0.5
# The rest of tune's defaults live here too, where the command line can read them without importing the
# harness.
#: Candidates run on every dev query.
DEFAULT_BUDGET = 12
#: What quality means when choosing.
DEFAULT_METRIC = "nDCG@10"


def dev_share(query_id: str, salt: str = SALT) -> float:
    """Where a query id falls in [0, 1): below the dev fraction means dev."""
    digest = hashlib.sha256(f"{salt}\0{query_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_ids(query_ids: list[str], fraction: float, salt: str = SALT) -> tuple[list[str], list[str]]:
    """(dev ids, test ids), each in the given order."""
    if not 0 < fraction < 1:
        raise RagEvalError(f"the dev fraction must be above 0 and below 1, not {fraction}")
    dev = [query_id for query_id in query_ids if dev_share(query_id, salt) < fraction]
    chosen = set(dev)
    return dev, [query_id for query_id in query_ids if query_id not in chosen]


def subset(dataset: Dataset, query_ids: list[str], part: str) -> Dataset:
    """The dataset restricted to ``query_ids``: the same corpus, those queries and only their judgements."""
    wanted = set(query_ids)
    queries = {query_id: query for query_id, query in dataset.queries.items() if query_id in wanted}
    qrels = {query_id: docs for query_id, docs in dataset.qrels.items() if query_id in wanted}
    return replace(
        dataset, id=f"{dataset.id}[{part}]", queries=queries, qrels=qrels, meta={**dataset.meta, "split": part}
    )
