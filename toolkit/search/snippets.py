"""Snippets: seed 001's density window on the raw text, and an FTS5-style token window."""

from __future__ import annotations

import heapq
import itertools
import unicodedata
from collections.abc import Iterator

from ..tokenizers import Token
from ..tokenizers.normalise import normalise_with_offsets


def _mark(text: str, spans: list[tuple[int, int]], open_marker: str, close_marker: str) -> str:
    # Inserted back to front so earlier insertions do not shift later offsets.
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + open_marker + text[start:end] + close_marker + text[end:]
    return text


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching spans merged, so bigrams 导出 + 出文 + 文件 read as one 【导出文件】."""
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def term_positions(text: str, terms: tuple[str, ...], *, t2s: bool = False) -> list[tuple[int, int, str]]:
    """Every occurrence of each term in ``text``, case-insensitively (both sides normalised), as raw offsets."""
    normalised = normalise_with_offsets(text, t2s=t2s)
    found = []
    for term in dict.fromkeys(t for t in terms if t):
        position = normalised.text.find(term)
        while position != -1:
            _, _, start, end = normalised.span(position, position + len(term))
            found.append((start, end, term))
            position = normalised.text.find(term, position + len(term))
    return found


#: Characters searched for the window at a time. A text this long or shorter is searched whole; a
#: longer one region by region from its start, and the window is chosen in the first region holding an
#: occurrence, so a snippet never normalises megabytes when its first region suffices.
SCAN_CHARS = 65_536
#: Occurrences considered when choosing the window: the first ones in text order.
MAX_OCCURRENCES = 10_000


def _unit_boundary(text: str, position: int) -> int:
    """``position`` moved forward past combining marks, where normalisation can cut the text."""
    while position < len(text) and unicodedata.category(text[position]).startswith("M"):
        position += 1
    return position


def _term_finds(text: str, term: str, rank: int) -> Iterator[tuple[int, int]]:
    position = text.find(term)
    while position != -1:
        yield position, rank
        position = text.find(term, position + len(term))


def _first_occurrences(text: str, terms: list[str], t2s: bool, limit: int) -> list[tuple[int, int, str]]:
    """The first ``limit`` occurrences in text order, listed like ``term_positions`` (by term, then position)."""
    normalised = normalise_with_offsets(text, t2s=t2s)
    # A lazy merge of each term's occurrences finds no more than ``limit`` plus one per term.
    merged = heapq.merge(*(_term_finds(normalised.text, term, rank) for rank, term in enumerate(terms)))
    found = []
    for position, rank in sorted(itertools.islice(merged, limit), key=lambda item: (item[1], item[0])):
        _, _, start, end = normalised.span(position, position + len(terms[rank]))
        found.append((start, end, terms[rank]))
    return found


def _densest_center(positions: list[tuple[int, int, str]], window: int) -> int:
    """Seed 001's choice: the first occurrence (in ``positions`` order) with the most distinct terms starting
    within ``window`` characters of it, counted by one sliding window over the starts in text order."""
    if window < 0:
        return positions[0][0]
    starts = sorted((start, term) for start, _, term in positions)
    inside: dict[str, int] = {}
    distinct_at: dict[int, int] = {}
    low = high = 0
    for center, _ in starts:
        while high < len(starts) and starts[high][0] <= center + window:
            inside[starts[high][1]] = inside.get(starts[high][1], 0) + 1
            high += 1
        while starts[low][0] < center - window:
            term = starts[low][1]
            inside[term] -= 1
            if not inside[term]:
                del inside[term]
            low += 1
        distinct_at[center] = len(inside)
    best_center, best_count = positions[0][0], 0
    for center, _, _ in positions:
        if distinct_at[center] > best_count:
            best_count, best_center = distinct_at[center], center
    return best_center


def window_snippet(
    text: str,
    terms: tuple[str, ...],
    *,
    open_marker: str = "【",
    close_marker: str = "】",
    ellipsis: str = "…",
    window: int = 150,
    max_highlights: int = 5,
    max_len: int = 300,
    t2s: bool = False,
    scan_chars: int = SCAN_CHARS,
    max_occurrences: int = MAX_OCCURRENCES,
) -> str:
    """Seed 001's snippet: the ±``window`` span around the occurrence with the most distinct terms nearby,
    cut to ``max_len``, ``…`` at cut ends; the first ``max_len`` characters when no term occurs literally.

    The first occurrence of each of the ``max_highlights`` longest terms is marked; where those overlap
    or touch (a word and its sub-words, overlapping bigrams) they are merged into one highlight, so
    highlights never nest or overlap. Markers are inserted back to front.

    Cost is linear in the text and bounded for long texts. Only a region of ``scan_chars`` characters
    is normalised and searched at a time: a longer text is searched region by region from its start
    (regions overlap by four times the longest term, so a term across a border is still found) until a
    region holds an occurrence, and the window is chosen in that region. Of its occurrences the first
    ``max_occurrences`` in text order are considered, and one sliding window over their starts counts
    the distinct terms near each, instead of comparing every occurrence with every other. A text of at
    most ``scan_chars`` characters with at most ``max_occurrences`` occurrences gets exactly seed 001's
    snippet; only the search for a first occurrence far into a long text reads more than one region.
    """
    unique = list(dict.fromkeys(t for t in terms if t))
    if not unique:
        return text[:max_len] + (ellipsis if len(text) > max_len else "")
    scan_chars, max_occurrences = max(1, scan_chars), max(1, max_occurrences)
    overlap = min(scan_chars // 2, 4 * max(map(len, unique)))
    region_start = 0
    while True:
        region_end = _unit_boundary(text, min(len(text), region_start + scan_chars))
        found = _first_occurrences(text[region_start:region_end], unique, t2s, max_occurrences)
        if found or region_end >= len(text):
            break
        region_start = _unit_boundary(text, max(region_start + 1, region_end - overlap))
    positions = [(start + region_start, end + region_start, term) for start, end, term in found]
    if not positions:
        return text[:max_len] + (ellipsis if len(text) > max_len else "")
    best_center = _densest_center(positions, window)
    start = max(0, best_center - window)
    end = min(len(text), best_center + window, start + max_len)
    snippet = text[start:end]
    chosen = sorted({term for _, _, term in positions}, key=lambda t: (-len(t), t))[:max_highlights]
    first: dict[str, tuple[int, int]] = {}
    for s, e, t in term_positions(snippet, tuple(chosen), t2s=t2s):
        first.setdefault(t, (s, e))
    spans = _merge(sorted(first.values()))
    marked = _mark(snippet, spans, open_marker, close_marker)
    return (ellipsis if start > 0 else "") + marked + (ellipsis if end < len(text) else "")


def token_snippet(
    text: str,
    tokens: list[Token],
    terms: set[str],
    *,
    open_marker: str = "[",
    close_marker: str = "]",
    ellipsis: str = " … ",
    size: int = 18,
) -> str:
    """An FTS5-style snippet from a tokenizer's tokens: the ``size``-token window with the most distinct
    matching terms (earliest on ties), matching tokens marked, ``ellipsis`` where the text is cut.

    One sliding window over the tokens counts the matching terms in each, so the cost is linear in the
    number of tokens whatever ``size`` is.
    """
    if not tokens:
        return text
    if size < 1:
        raise ValueError(f"a token snippet needs a size of at least 1, not {size}")
    inside: dict[str, int] = {}
    for token in tokens[:size]:
        if token.text in terms:
            inside[token.text] = inside.get(token.text, 0) + 1
    best_start, best_count = 0, len(inside)
    for first in range(1, len(tokens) - size + 1):
        leaving, entering = tokens[first - 1].text, tokens[first + size - 1].text
        if leaving in terms:
            inside[leaving] -= 1
            if not inside[leaving]:
                del inside[leaving]
        if entering in terms:
            inside[entering] = inside.get(entering, 0) + 1
        if len(inside) > best_count:
            best_start, best_count = first, len(inside)
    window = tokens[best_start : best_start + size]
    start = 0 if best_start == 0 else window[0].start
    at_end = best_start + size >= len(tokens)
    end = len(text) if at_end else window[-1].end
    spans = _merge([(token.start, token.end) for token in window if token.text in terms])  # tokens are sorted
    marked = _mark(text[start:end], [(s - start, e - start) for s, e in spans], open_marker, close_marker)
    return (ellipsis if start > 0 else "") + marked + ("" if at_end else ellipsis)
