"""Snippets: seed 001's density window on the raw text, and an FTS5-style token window."""

from __future__ import annotations

from .tokenizers import Token
from .tokenizers.normalise import normalise_with_offsets


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


def window_snippet(
    text: str, terms: tuple[str, ...], *, open_marker: str = "【", close_marker: str = "】", ellipsis: str = "…",
    window: int = 150, max_highlights: int = 5, max_len: int = 300, t2s: bool = False,
) -> str:
    """Seed 001's snippet: the ±``window`` span around the occurrence with the most distinct terms nearby,
    cut to ``max_len``, ``…`` at cut ends; the first ``max_len`` characters when no term occurs literally.

    The first occurrence of each of the ``max_highlights`` longest terms is marked; where those overlap
    or touch (a word and its sub-words, overlapping bigrams) they are merged into one highlight, so
    highlights never nest or overlap. Markers are inserted back to front.
    """
    positions = term_positions(text, terms, t2s=t2s)
    if not positions:
        return text[:max_len] + (ellipsis if len(text) > max_len else "")
    best_center, best_count = positions[0][0], 0
    for center, _, _ in positions:
        count = len({term for start, _, term in positions if abs(start - center) <= window})
        if count > best_count:
            best_count, best_center = count, center
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
    text: str, tokens: list[Token], terms: set[str], *, open_marker: str = "[", close_marker: str = "]",
    ellipsis: str = " … ", size: int = 18,
) -> str:
    """An FTS5-style snippet from a tokenizer's tokens: the ``size``-token window with the most distinct
    matching terms (earliest on ties), matching tokens marked, ``ellipsis`` where the text is cut."""
    if not tokens:
        return text
    best_start, best_count = 0, -1
    for first in range(max(1, len(tokens) - size + 1)):
        count = len({t.text for t in tokens[first : first + size] if t.text in terms})
        if count > best_count:
            best_start, best_count = first, count
    window = tokens[best_start : best_start + size]
    start = 0 if best_start == 0 else window[0].start
    at_end = best_start + size >= len(tokens)
    end = len(text) if at_end else window[-1].end
    spans: list[list[int]] = []
    for token in window:
        if token.text in terms:
            if spans and token.start <= spans[-1][1]:  # overlapping or touching matches read as one
                spans[-1][1] = max(spans[-1][1], token.end)
            else:
                spans.append([token.start, token.end])
    marked = _mark(text[start:end], [(s - start, e - start) for s, e in spans], open_marker, close_marker)
    return (ellipsis if start > 0 else "") + marked + ("" if at_end else ellipsis)
