"""The modules of each harness package import one another without a cycle, counting imports made only for type
checking: a reader (or mypy) following ``session -> judge -> session`` meets the same knot as the interpreter."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGES = ["rag_eval.eval.judging", "rag_eval.eval.datasets", "rag_eval.eval.metrics", "rag_eval.eval.synth"]


def sibling_imports(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of the same package it imports (``from .x import``,
    ``from . import x``, absolute imports of the package), wherever the import stands."""
    folder = Path(importlib.import_module(package).__file__ or "").parent
    modules = {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name in modules:
        found: set[str] = set()
        for node in ast.walk(ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    targets = [node.module] if node.module else [alias.name for alias in node.names]
                elif node.level == 0 and (node.module or "").startswith(package + "."):
                    targets = [(node.module or "")[len(package) + 1 :]]
                else:
                    continue
                found |= {target.split(".")[0] for target in targets} & modules
        graph[name] = found - {name}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_has_no_import_cycle(package: str) -> None:
    graph = sibling_imports(package)
    assert graph, f"{package}: no module found"
    found = cycle(graph)
    assert found is None, f"{package}: " + " -> ".join(found or [])


def test_the_cycle_finder_finds_a_cycle_through_a_type_checking_import() -> None:
    assert cycle({"judge": {"session"}, "session": {"judge", "selection"}, "selection": set()}) == [
        "judge",
        "session",
        "judge",
    ]
    assert cycle({"judge": {"pool", "session"}, "session": {"pool"}, "pool": set()}) is None
