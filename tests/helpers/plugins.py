"""Tokenizer plug-ins that misbehave (raise, declare nonsense), loaded through entry points by the plug-in tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import regex

from rag_eval.tokenizers import PythonTokenizer


class _Words(PythonTokenizer):
    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        for match in regex.finditer(r"\S+", text):
            yield match.span()


class RaisesOnConstruction(_Words):
    name = "audit-raises-init"

    def __init__(self, **options: Any) -> None:
        raise ValueError("boom in __init__")


class RaisesOnAvailability(_Words):
    name = "audit-raises-availability"

    @classmethod
    def availability(cls) -> str | None:
        raise RuntimeError("boom in availability")


class RaisesOnFingerprint(_Words):
    name = "audit-raises-fingerprint"

    def fingerprint(self) -> dict[str, str]:
        raise KeyError("boom in fingerprint")


class DeclaresNoLibraries(_Words):
    name = "audit-libraries-none"
    libraries = None  # type: ignore[assignment]


class DeclaresStringOptions(_Words):
    name = "audit-options-string"
    option_set = "model=path"  # type: ignore[assignment]


class Fine(_Words):
    name = "audit-fine"


ENTRY_POINT_PLUGINS = [
    RaisesOnConstruction,
    RaisesOnAvailability,
    RaisesOnFingerprint,
    DeclaresNoLibraries,
    DeclaresStringOptions,
    Fine,
]
