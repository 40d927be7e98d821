"""Character classes shared by the character-based strategies (bigram, unigram)."""

from __future__ import annotations

import regex

#: A run of Han characters (Script=Han: CJK ideographs in every extension plane, 〇, 々 ...), or a
#: word: a letter or digit of any other script, then letters, digits and combining marks, joined by one
#: inner ``.``, ``-`` or ``_`` (``3.11``, ``wi-fi``, ``snake_case``), with a trailing ``+`` or ``#`` run
#: kept (``c++``, ``c#``).
HAN_OR_WORD = regex.compile(
    r"(?P<han>\p{Script=Han}+)"
    r"|(?P<word>(?!\p{Script=Han})[\p{L}\p{N}](?:(?!\p{Script=Han})[\p{L}\p{N}\p{M}])*"
    r"(?:[._-](?:(?!\p{Script=Han})[\p{L}\p{N}\p{M}])+)*"
    r"(?:(?<=\p{L})[+#]+(?![\p{L}\p{N}]))?)"
)
