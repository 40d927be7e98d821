"""The numpy helpers the impact ranking runs on: reusable per-thread buffers (a fresh array per query costs
page faults) and operations on ascending row-id lists (union, intersection, lookups, the ``k``-th value, the
top ``k`` in FTS5's order).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_local = threading.local()


def _buffer(name: str, size: int, dtype: str = "f8", *, zeroed: bool = False) -> np.ndarray:
    """A reusable array of ``size`` (contents left from its last use), one per name and thread: a fresh
    megabyte array per query costs page faults, which at 135k rows took longer than the additions.
    ``zeroed``: a new array starts as zeros (see :func:`_clean`)."""
    import numpy as np

    buffers = _local.__dict__.setdefault("buffers", {})
    found = buffers.get(name)
    if found is None or len(found) < size:
        found = buffers[name] = (np.zeros if zeroed else np.empty)(size, dtype=dtype)
    view: np.ndarray = found[:size]
    return view


def _zeros(name: str, size: int) -> np.ndarray:
    view = _buffer(name, size)
    view.fill(0.0)
    return view


def _clean(name: str, size: int) -> np.ndarray:
    """A reusable array of ``size`` zeros, kept zero between uses by :func:`_clear` (filling a megabyte per
    query cost about as much as summing a rare term's list); its own name space, apart from other buffers'."""
    return _buffer(f"clean:{name}", size, zeroed=True)


def _clear(view: np.ndarray, lists: list[np.ndarray]) -> None:
    """Zero what :func:`_clean`'s ``view`` received from ``lists`` (all of it when they are long)."""
    if sum(len(ids) for ids in lists) * 4 > len(view):
        view.fill(0.0)
    else:
        for ids in lists:
            view[ids] = 0.0


def _distinct(lists: list[np.ndarray]) -> np.ndarray:
    """The rows of ``lists`` (each ascending), ascending, each once."""
    import numpy as np

    if len(lists) == 1:
        return lists[0]
    rows = np.sort(np.concatenate(lists))  # np.unique's hashing is slower at this size
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))]


def _kth(values: np.ndarray, rows: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` at ``rows`` (0 when fewer)."""
    import numpy as np

    if len(rows) < k:
        return 0.0
    taken = values[rows]
    return float(np.partition(taken, len(taken) - k)[len(taken) - k])


def _nonzero(scores: np.ndarray, cut: float) -> np.ndarray:
    """The ids whose score is positive and at least ``cut`` (a boolean mask first: numpy's nonzero on a
    float array is several times slower)."""
    import numpy as np

    mask = _buffer("mask", len(scores), "?")
    if cut > 0:
        np.greater_equal(scores, cut, out=mask)
    else:
        np.greater(scores, 0.0, out=mask)
    return np.flatnonzero(mask)


def _intersected(lists: list[np.ndarray]) -> np.ndarray:
    """The rows in every one of ``lists`` (each ascending): the shortest list's rows looked up in the others."""
    lists = sorted(lists, key=len)
    rows = lists[0]
    for ids in lists[1:]:
        rows = rows[_lookup(ids, rows)[1]]
    return rows


def _lookup(ids: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each candidate is in ``ids`` (ascending), and which candidates are there at all."""
    import numpy as np

    positions = np.searchsorted(ids, candidates)
    np.minimum(positions, len(ids) - 1, out=positions)
    return positions, ids[positions] == candidates


def _top(candidates: np.ndarray, values: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The first ``k`` (id, score) by (score, id): ``candidates`` ascend, so a stable sort breaks ties."""
    import numpy as np

    if len(values) > k:
        ordered = _buffer("partition", len(values))
        ordered[:] = values
        ordered.partition(k - 1)
        mask = np.less_equal(values, ordered[k - 1], out=_buffer("kept", len(values), "?"))
        kept = np.flatnonzero(mask)  # every row tied with the k-th stays in the running
        candidates, values = candidates[kept], values[kept]
    order = np.argsort(values, kind="stable")[:k]
    return list(zip(candidates[order].tolist(), values[order].tolist(), strict=True))
