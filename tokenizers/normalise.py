"""Shared normalisation for the Python strategies: NFKC, case folding, optional traditional-to-simplified.

``normalise`` works on *units*: a character with the combining marks that follow it. Each unit is
normalised on its own (NFKC, case fold, NFKC again) and the results are concatenated, so a span of the
original text that starts and ends on unit boundaries normalises to exactly the matching slice of the
normalised text. That is what lets every token carry offsets into the original text with
``normalise(text[start:end]) == token.text``. For all but a few inputs (decomposed Hangul jamo) this is
the same as NFKC-casefolding the whole string.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import regex

from ..errors import InvalidTextError

_SURROGATE = regex.compile(r"[\ud800-\udfff]")
# Code points past this (bar the tag/variation-selector block) have no decomposition or case mapping.
_SCAN_LIMITS = ((0, 0x323B0), (0xE0000, 0xE1000))


def check_text(text: str) -> None:
    """Raise InvalidTextError for text that is not valid Unicode (lone surrogates)."""
    found = _SURROGATE.search(text)
    if found is not None:
        raise InvalidTextError(
            f"text is not valid Unicode: lone surrogate U+{ord(found.group()):04X} at character {found.start()}",
            hint="decode input as UTF-8 with errors='strict' and fix or drop the broken bytes",
        )


def _fold_char(unit: str) -> str:
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", unit).casefold())


@dataclass(frozen=True)
class _Tables:
    special: re.Pattern[str]  # finds any character that needs the slow path
    units: re.Pattern[str]  # a character with its combining marks, or one whose normal form has another length
    one_to_one: dict[int, str]  # characters that change into exactly one other character (Ａ -> a, ， -> ,)


@lru_cache(maxsize=1)
def _tables() -> _Tables:
    """Character tables for normalisation, built once per process (about 0.1 s).

    Most text contains no combining mark and no character whose normal form has another length
    (ﬁ, ß, ㍻); it is normalised by ``str.translate`` alone, offsets unchanged. Other text goes through
    the units pattern. The stdlib ``re`` engine is used because it tests large BMP classes in O(1).
    """
    expanding: list[int] = []
    marks: list[int] = []
    one_to_one: dict[int, str] = {}
    for low, high in _SCAN_LIMITS:
        for code in range(low, high):
            if 0xD800 <= code < 0xE000:
                continue
            char = chr(code)
            if unicodedata.category(char).startswith("M"):
                marks.append(code)
            folded = _fold_char(char)
            if folded == char:
                continue
            if len(folded) == 1:
                one_to_one[code] = folded
            else:
                expanding.append(code)
    mark_class = char_class(marks)
    bmp_special = char_class(sorted(c for c in expanding + marks if c < 0x10000))
    return _Tables(
        special=re.compile(f"[{bmp_special}]|[\U00010000-\U0010ffff]"),
        units=re.compile(f".[{mark_class}]+|[{char_class(expanding)}][{mark_class}]*", re.DOTALL),
        one_to_one=one_to_one,
    )


def char_class(codes: list[int]) -> str:
    """The inside of a regex character class matching exactly ``codes`` (sorted), as ranges."""
    parts: list[str] = []
    index = 0
    while index < len(codes):
        first = last = codes[index]
        while index + 1 < len(codes) and codes[index + 1] == last + 1:
            index += 1
            last = codes[index]
        parts.append(f"\\U{first:08x}" if first == last else f"\\U{first:08x}-\\U{last:08x}")
        index += 1
    return "".join(parts)


@lru_cache(maxsize=4096)
def _normalise_unit(unit: str) -> str:
    return _fold_char(unit)


@dataclass(frozen=True)
class Normalised:
    """Normalised text with a piecewise map back to the original text's character offsets."""

    text: str
    original: str
    # Sorted boundaries of the units that changed: (norm_start, norm_end, orig_start, orig_end).
    _units: tuple[tuple[int, int, int, int], ...] = ()

    @property
    def identity(self) -> bool:
        """True when normalising changed nothing, so offsets map one to one."""
        return not self._units

    def span(self, start: int, end: int) -> tuple[int, int, int, int]:
        """Map a normalised span to ``(norm_start, norm_end, orig_start, orig_end)``.

        A span that starts or ends inside a unit whose normal form has several characters (ﬁ, ㍻)
        widens to the whole unit, so the returned normalised span always normalises back exactly.
        """
        if not self._units:
            return start, end, start, end
        n_start, o_start = self._boundary(start, left=True)
        n_end, o_end = self._boundary(end, left=False)
        return n_start, n_end, o_start, o_end

    def _boundary(self, position: int, *, left: bool) -> tuple[int, int]:
        """(normalised, original) offsets of a boundary, widened outwards to a unit's edge."""
        index = bisect.bisect_right(self._units, position, key=_unit_start) - 1
        if index < 0:
            return position, position
        n_start, n_end, o_start, o_end = self._units[index]
        if position == n_start:
            return n_start, o_start
        if position < n_end:
            return (n_start, o_start) if left else (n_end, o_end)
        return position, position - n_end + o_end


def _unit_start(unit: tuple[int, int, int, int]) -> int:
    return unit[0]


def normalise_with_offsets(text: str, *, t2s: bool = False) -> Normalised:
    """Normalise ``text`` and keep the map back to its offsets."""
    check_text(text)
    tables = _tables()
    units: list[tuple[int, int, int, int]] = []
    if tables.special.search(text) is None:
        normalised = text.translate(tables.one_to_one)
    else:
        pieces: list[str] = []
        n_pos = o_pos = 0
        for match in tables.units.finditer(text):
            o_start, o_end = match.span()
            if o_start > o_pos:
                pieces.append(text[o_pos:o_start].translate(tables.one_to_one))
                n_pos += o_start - o_pos
            folded = _normalise_unit(match.group())
            pieces.append(folded)
            if len(folded) != 1 or o_end - o_start != 1:  # only single characters map position by position
                units.append((n_pos, n_pos + len(folded), o_start, o_end))
            n_pos += len(folded)
            o_pos = o_end
        pieces.append(text[o_pos:].translate(tables.one_to_one))
        normalised = "".join(pieces)
    if t2s:
        normalised = normalised.translate(t2s_table())
    return Normalised(normalised, text, tuple(units))


def normalise(text: str, *, t2s: bool = False) -> str:
    """NFKC + case folding per unit, then optionally traditional-to-simplified per character."""
    return normalise_with_offsets(text, t2s=t2s).text


@lru_cache(maxsize=1)
def t2s_table() -> dict[int, str]:
    """OpenCC's traditional-to-simplified conversion of each Han character on its own.

    Character by character, never phrase by phrase, so the conversion of a slice never depends on its
    neighbours and token offsets stay exact. Built once per process from OpenCC's ``t2s`` config.
    """
    try:
        import opencc
    except ImportError as exc:  # pragma: no cover - opencc is a declared dependency
        from ..errors import UnavailableError

        raise UnavailableError("t2s needs OpenCC", hint="pip install opencc") from exc
    han = regex.findall(r"\p{Script=Han}", "".join(map(chr, range(0x2E80, 0x323B0))))
    converted = opencc.OpenCC("t2s").convert("\n".join(han)).split("\n")
    if len(converted) != len(han):  # pragma: no cover - guards an OpenCC behaviour change
        raise RuntimeError("OpenCC t2s changed the number of lines in a character list")
    table = {ord(src): dst for src, dst in zip(han, converted, strict=False) if src != dst and len(dst) == 1}
    return {code: _settled(table, dst) for code, dst in table.items()}


def _settled(table: dict[int, str], char: str) -> str:
    """Where ``char`` ends when the conversion is applied until nothing changes (OpenCC converts 薴 to 苧,
    which it converts to 苎): converting once more then changes nothing, so a text converted before it
    reaches rag-eval matches the same text converted here. A cycle stops at its smallest character."""
    seen = [char]
    while ord(seen[-1]) in table:
        step = table[ord(seen[-1])]
        if step in seen:
            return min(seen[seen.index(step) :])
        seen.append(step)
    return seen[-1]
