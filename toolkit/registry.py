"""One registry per extension point, fed by entry points and loaded lazily, one plug-in at a time."""

from __future__ import annotations

import re
import reprlib
import types
import typing
from collections.abc import Iterator, Mapping
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from .errors import RagEvalError, RegistryError
from .files.textio import shown

T = TypeVar("T")
_Source = EntryPoint | type

#: What a spec can name (``NAME[:key=value,...]``): a plug-in or option with another name could be registered
#: but never named, and an index recording it could never be opened again.
_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")
_KEY = re.compile(r"[a-z][a-z0-9_]*\Z")


class PluginError(RagEvalError):
    """A plug-in's own code failed or broke its contract (raised, returned the wrong thing): one line naming
    the plug-in, never a traceback, and never an index built from what it returned."""


def plugin_failure(kind: str, name: str, doing: str, exc: BaseException) -> PluginError:
    """The error for a plug-in whose code raised ``exc`` while ``doing`` something."""
    return PluginError(f"{kind} {name!r} failed {doing}: {type(exc).__name__}: {exc}")


def declaration_problem(cls: type, kind: str, base: type | None) -> str | None:
    """Why ``cls`` cannot be a plug-in of this registry (None when it can): not a subclass of ``base``, a name
    or an option key a spec cannot hold, an option default its own parser refuses."""
    if base is not None and not (isinstance(cls, type) and issubclass(cls, base)):
        return f"is {cls!r}, not a subclass of {base.__module__}.{base.__qualname__}"
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not _NAME.match(name):
        return f"has the name {name!r}; a name is lowercase letters, digits, '-' and '_', starting with a letter"
    for attribute, declared in _declared(base).items():
        value = getattr(cls, attribute, None)
        if not _fits(value, declared):
            return f"declares {attribute} = {reprlib.repr(value)}, which is not of type {_type_name(declared)}"
    option_set = getattr(cls, "option_set", None)
    from .spec import Option, format_value

    options = getattr(option_set, "options", ())
    if not isinstance(options, tuple):
        return f"declares its options as {reprlib.repr(options)}, not a tuple of rag_eval.spec.Option"
    seen: set[str] = set()
    for option in options:
        if not isinstance(option, Option):
            return f"declares the option {reprlib.repr(option)}, which is not a rag_eval.spec.Option"
        if not isinstance(option.name, str) or not _KEY.match(option.name):
            return f"declares the option {option.name!r}; a key is lowercase letters, digits and '_'"
        if option.name in seen:
            return f"declares the option {option.name!r} twice"
        seen.add(option.name)
        written = format_value(option.default)
        if not written:
            continue  # no value: the spec leaves the option out
        try:
            again = format_value(option.convert(written))
        except Exception as exc:  # the plug-in's parser: any failure is its own
            return f"declares option {option.name!r} with default {written!r}, which it refuses: {exc}"
        if again != written:
            return f"declares option {option.name!r} with default {written!r}, which its parser reads as {again!r}"
    return None


@cache
def _declared(base: type | None) -> dict[str, Any]:
    """The class attributes ``base`` declares (its ``ClassVar`` annotations) and their types."""
    if base is None:
        return {}
    try:
        hints = typing.get_type_hints(base)
    except Exception:  # an annotation that cannot be evaluated: nothing to check against
        return {}
    return {
        attribute: typing.get_args(hint)[0]
        for attribute, hint in hints.items()
        if typing.get_origin(hint) is typing.ClassVar and typing.get_args(hint) and hasattr(base, attribute)
    }


def _fits(value: object, declared: Any) -> bool:
    """Whether ``value`` is of the declared type (plain classes, unions, ``tuple[X, ...]``, sets, lists)."""
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if declared is Any:
        return True
    if origin is None:
        if declared is float:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        return isinstance(value, declared) if isinstance(declared, type) else True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if not isinstance(origin, type):
        return True  # Literal, Callable, ...: not checked here
    if not isinstance(value, origin):
        return False
    items: tuple[Any, ...] = tuple(value) if isinstance(value, (tuple, frozenset, set, list)) else ()
    if origin is tuple and args:
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(item, args[0]) for item in items)
        return len(items) == len(args) and all(_fits(item, arg) for item, arg in zip(items, args, strict=True))
    if origin in (frozenset, set, list) and args:
        return all(_fits(item, args[0]) for item in items)
    return True


def _type_name(declared: Any) -> str:
    return declared.__name__ if isinstance(declared, type) else str(declared)


#: The distribution whose entry points declare the built-in plug-ins.
OWN_DISTRIBUTION = "rag-eval"


def _distribution(ep: EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", None) if dist is not None else None
    return name if isinstance(name, str) else None


def _ours(ep: EntryPoint) -> bool:
    name = _distribution(ep)
    return name is not None and re.sub(r"[-_.]+", "-", name).lower() == OWN_DISTRIBUTION


def _declared_by(ep: EntryPoint) -> str:
    dist = _distribution(ep)
    return f"{ep.value} (package {dist})" if dist else ep.value


class Registry(Mapping[str, type], Generic[T]):
    """Maps names to plug-in classes; names come from entry-point metadata, modules import on first use.

    ``sorted(registry)`` lists names without importing anything. ``registry[name]`` imports that one
    plug-in; a plug-in that fails to import raises RegistryError for its own name only.
    """

    def __init__(self, group: str, kind: str, base: type | None = None) -> None:
        self.group = group
        self.kind = kind
        #: The class every plug-in must subclass (its entry point loading anything else is an error).
        self.base = base
        self._sources: dict[str, _Source] | None = None
        self._loaded: dict[str, type] = {}
        self._conflicts: dict[str, str] = {}
        self._shadowed: dict[str, str] = {}

    def _discover(self) -> dict[str, _Source]:
        if self._sources is None:
            declared: dict[str, dict[str, EntryPoint]] = {}
            for ep in entry_points(group=self.group):
                declared.setdefault(ep.name, {}).setdefault(ep.value, ep)
            sources: dict[str, _Source] = {}
            for name, found in declared.items():
                own = [ep for ep in found.values() if _ours(ep)]
                if len(found) > 1 and len(own) == 1:
                    # A plug-in reusing a built-in's name: the built-in keeps it (indexes record it; a package
                    # installed later must not change what they open with), and the listing names the other.
                    others = [ep for ep in found.values() if ep is not own[0]]
                    self._shadowed[name] = " and ".join(_declared_by(ep) for ep in others)
                    found = {own[0].value: own[0]}
                if len(found) > 1:
                    self._conflicts[name] = " and ".join(found)
                    continue
                sources[name] = next(iter(found.values()))
            self._sources = sources
        return self._sources

    def shadowed(self, name: str) -> str | None:
        """The installed plug-ins that also declare the built-in ``name`` and are ignored, or None."""
        self._discover()
        return self._shadowed.get(name)

    def register(self, cls: type) -> type:
        """Register a class under its ``name`` attribute; a name already taken raises RegistryError."""
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise RegistryError(f"cannot register {cls!r}: it has no 'name' attribute")
        problem = declaration_problem(cls, self.kind, self.base)
        if problem is not None:
            raise RegistryError(f"cannot register {cls!r}: it {problem}")
        sources = self._discover()
        if name in self._names():
            raise RegistryError(f"duplicate {self.kind} name {name!r}: already registered")
        sources[name] = cls
        self._loaded[name] = cls
        return cls

    def unregister(self, name: str) -> None:
        """Forget a name registered at run time (tests and interactive use)."""
        self._discover().pop(name, None)
        self._loaded.pop(name, None)

    def unknown(self, name: str) -> RegistryError:
        """The error for a name that is not registered, listing the names that are."""
        choices = ", ".join(sorted(self)) or "(none installed)"
        return RegistryError(f"unknown {self.kind} {shown(name)}; choose from: {choices}")

    def __getitem__(self, name: str) -> type:
        if name in self._loaded:
            return self._loaded[name]
        sources = self._discover()
        if name in self._conflicts:
            raise RegistryError(
                f"{self.kind} {name!r} is declared twice by installed packages: {self._conflicts[name]}"
            )
        source = sources.get(name)
        if source is None:
            raise self.unknown(name)
        if isinstance(source, type):
            cls = source
        else:
            try:
                cls = source.load()
            except Exception as exc:  # a broken plug-in breaks only itself
                raise RegistryError(
                    f"{self.kind} {name!r} failed to load from {source.value}: {type(exc).__name__}: {exc}"
                ) from exc
        if getattr(cls, "name", None) != name:
            raise RegistryError(f"{self.kind} entry point {name!r} loads a class named {getattr(cls, 'name', None)!r}")
        problem = declaration_problem(cls, self.kind, self.base)
        if problem is not None:
            where = f" (from {source.value})" if isinstance(source, EntryPoint) else ""
            raise RegistryError(f"{self.kind} {name!r}{where} {problem}")
        self._loaded[name] = cls
        return cls

    def _names(self) -> set[str]:
        """Every declared name: a name two packages declare is listed, and looking it up says so."""
        return {*self._discover(), *self._conflicts}

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names()))

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()
