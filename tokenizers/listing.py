"""Descriptions of registered tokenizers for ``rag-eval tokenizers``."""

from __future__ import annotations

from typing import NamedTuple

from ..errors import RagEvalError
from ..registry import Registry, plugin_failure
from .base import Tokenizer


class TokenizerInfo(NamedTuple):
    """One row of the tokenizer listing."""

    name: str
    kind: str
    available: bool
    reason: str
    hint: str
    options: list[str]
    spec: str
    summary: str
    #: Installed plug-ins that also declare this built-in's name and are ignored ("" when none).
    ignored: str = ""


def describe_all(registry: Registry[Tokenizer]) -> list[TokenizerInfo]:
    """Describe every registered tokenizer without failing on a broken or unavailable one."""
    rows = []
    for name in registry:
        ignored = registry.shadowed(name) or ""
        try:
            cls: type[Tokenizer] = registry[name]
        except RagEvalError as exc:
            rows.append(TokenizerInfo(name, "plug-in", False, str(exc), "", [], "", "", ignored))
            continue
        options = [f"{o.describe()}  {o.help}" for o in cls.option_set.options]
        spec = ""
        try:
            reason = cls.availability()
            if reason is None:
                spec = cls().spec
        except RagEvalError as exc:
            reason = str(exc)
        except Exception as exc:  # a plug-in's own code: listed as unavailable, named, the others still listed
            reason = str(plugin_failure("tokenizer", name, "to describe itself", exc))
        hint = cls.install_hint if reason else _usage_hint(name)
        kind = "native FTS5" if cls.native else "Python"
        rows.append(TokenizerInfo(name, kind, reason is None, reason or "", hint, options, spec, cls.summary, ignored))
    return rows


def _usage_hint(name: str) -> str:
    return f"rag-eval tokenize -t {name} TEXT"
