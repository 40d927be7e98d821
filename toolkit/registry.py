"""One registry per extension point, fed by entry points and loaded lazily, one plug-in at a time."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from .errors import RegistryError

T = TypeVar("T")
_Source = EntryPoint | type


class Registry(Mapping[str, type], Generic[T]):
    """Maps names to plug-in classes; names come from entry-point metadata, modules import on first use.

    ``sorted(registry)`` lists names without importing anything. ``registry[name]`` imports that one
    plug-in; a plug-in that fails to import raises RegistryError for its own name only.
    """

    def __init__(self, group: str, kind: str) -> None:
        self.group = group
        self.kind = kind
        self._sources: dict[str, _Source] | None = None
        self._loaded: dict[str, type] = {}
        self._conflicts: dict[str, str] = {}

    def _discover(self) -> dict[str, _Source]:
        if self._sources is None:
            sources: dict[str, _Source] = {}
            for ep in entry_points(group=self.group):
                previous = sources.get(ep.name)
                if isinstance(previous, EntryPoint) and previous.value != ep.value:
                    self._conflicts[ep.name] = f"{previous.value} and {ep.value}"
                    continue
                sources.setdefault(ep.name, ep)
            self._sources = sources
        return self._sources

    def register(self, cls: type) -> type:
        """Register a class under its ``name`` attribute; a name already taken raises RegistryError."""
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise RegistryError(f"cannot register {cls!r}: it has no 'name' attribute")
        sources = self._discover()
        if name in sources:
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
        return RegistryError(f"unknown {self.kind} {name!r}; choose from: {choices}")

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
        self._loaded[name] = cls
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._discover()))

    def __len__(self) -> int:
        return len(self._discover())

    def __contains__(self, name: object) -> bool:
        return name in self._discover()
