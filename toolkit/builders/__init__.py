"""Index builders: registry (entry-point group ``rag_eval.builders``) and the builder contract."""

from __future__ import annotations

from ..errors import RegistryError
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


__all__ = ["BUILDERS", "Builder", "QueryDefaults", "SourceFile", "get_builder"]
