"""Index builders: registry (entry-point group ``rag_eval.builders``) and the builder contract."""

from __future__ import annotations

from pathlib import Path

from ..errors import CorpusError, RagEvalError, RegistryError
from ..registry import Registry, plugin_failure
from ..spec import SystemSpec
from .base import Builder, QueryDefaults, SourceFile

#: Every builder, built-in or plug-in, keyed by name.
BUILDERS: Registry[Builder] = Registry("rag_eval.builders", "builder", Builder)


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
    layouts = []  # what the recognising builders accept, in their order, for the error
    for name in BUILDERS:
        try:
            cls = BUILDERS[name]
        except RagEvalError:
            continue
        if not (isinstance(cls, type) and issubclass(cls, Builder)):
            continue
        if cls.recognised_layout:
            layouts.append((cls.recognise_order, cls.recognised_layout))
        try:
            recognised = cls.recognises(source)
        except RagEvalError:
            raise
        except Exception as exc:  # a plug-in's own check: one line naming it
            raise plugin_failure("builder", name, f"recognising {source}", exc) from exc
        if recognised:
            found.append((cls.recognise_order, name))
    if not found:
        accepted = [layout for _order, layout in sorted(layouts)]
        listed = ", ".join(accepted[:-1]) + (" or " if len(accepted) > 1 else "") + (accepted[-1] if accepted else "")
        raise CorpusError(
            f"{source}: no builder recognises this source" + (f" ({listed})" if listed else ""),
            hint=f"name one with -b SPEC ({', '.join(sorted(BUILDERS))})",
        )
    return min(found)[1]


__all__ = ["BUILDERS", "Builder", "QueryDefaults", "SourceFile", "get_builder", "infer_builder"]
