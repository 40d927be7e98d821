"""Index builders: registry (entry-point group ``rag_eval.builders``) and the builder contract."""

from __future__ import annotations

from pathlib import Path

from ..errors import CorpusError, RagEvalError, RegistryError
from ..registry import Registry
from ..spec import SystemSpec
from .base import Builder, QueryDefaults, SourceFile

#: Every builder, built-in or plug-in, keyed by name.
BUILDERS: Registry[Builder] = Registry("rag_eval.builders", "builder")


def get_builder(spec: str | SystemSpec) -> Builder:
    """A builder from a spec such as ``sections`` or ``sections:max_chars=1500``."""
    parsed = spec if isinstance(spec, SystemSpec) else SystemSpec.parse(spec)
    cls = BUILDERS[parsed.name]
    if not (isinstance(cls, type) and issubclass(cls, Builder)):
        raise RegistryError(f"builder {parsed.name!r} is {cls!r}, not a rag_eval Builder subclass")
    return cls.from_spec(parsed)


def infer_builder(source: Path) -> str:
    """The builder whose layout ``source`` has; builders declare what they recognise and in which order."""
    if not source.exists():
        raise CorpusError(f"{source}: no such file or directory")
    found = []
    for name in BUILDERS:
        try:
            cls = BUILDERS[name]
        except RagEvalError:
            continue
        if isinstance(cls, type) and issubclass(cls, Builder) and cls.recognises(source):
            found.append((cls.recognise_order, name))
    if not found:
        raise CorpusError(
            f"{source}: no builder recognises this source (a lines manifest.json, a corpus.jsonl or Markdown files)",
            hint=f"name one with -b SPEC ({', '.join(sorted(BUILDERS))})",
        )
    return min(found)[1]


__all__ = ["BUILDERS", "Builder", "QueryDefaults", "SourceFile", "get_builder", "infer_builder"]
