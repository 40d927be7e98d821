"""System names on several lines, never cut: what the charts and their keys put beside an axis or a marker."""

from __future__ import annotations

import re
import unicodedata

#: Characters on one line of a system's name beside an axis; longer names go on to further lines, never cut.
LABEL_CHARS = 40


def wrap_name(label: str, width: int = LABEL_CHARS) -> str:
    """A name on lines of at most ``width`` characters, broken after its separators (' | ', '+', ',', ' ') where it
    can be and inside a part only when the part alone is longer: every character kept, so two names stay two."""
    parts = [part for part in re.split(r"(?<=[|+,])(?=[^ ])|(?<= )(?=[^ |])", label) if part]
    lines: list[str] = []
    for part in parts:
        while columns(part) > width:  # one part longer than a line: cut it into lines, keeping every character
            if not lines or columns(lines[-1]) >= width:
                lines.append("")
            cut = 1
            while cut < len(part) and columns(lines[-1] + part[: cut + 1]) <= width:
                cut += 1
            lines[-1], part = lines[-1] + part[:cut], part[cut:]
        if lines and columns(lines[-1] + part.rstrip()) <= width:
            lines[-1] += part
        elif part:
            lines.append(part)
    return "\n".join(line.rstrip() for line in lines) or label


def columns(text: str) -> int:
    """Width of ``text`` in Latin characters: a Han character is two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)
