"""No code outside a plug-in's own module compares the plug-in's name: what rag-eval does with an engine, builder,
tokenizer, dataset format or snippet style comes from what it declares. Bug: search chose the impact engine's
path by ``engine == "impact"``, the build kept token offsets by ``snippet == "fts5"``, and so on in 11 places."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

from helpers import REPO

from rag_eval.builders import BUILDERS
from rag_eval.builders.base import SNIPPET_STYLES
from rag_eval.engines.base import ENGINES
from rag_eval.eval.datasets.formats import DATASET_FORMATS
from rag_eval.registry import Registry
from rag_eval.tokenizers import TOKENIZERS

ROOT = REPO
REGISTRIES: dict[str, Registry] = {
    "engine": ENGINES,
    "builder": BUILDERS,
    "tokenizer": TOKENIZERS,
    "dataset format": DATASET_FORMATS,
}


def _plugin_names() -> dict[str, tuple[str, Path]]:
    """Every plug-in's name, with its kind and the file that defines it (where comparing the name is its own)."""
    found: dict[str, tuple[str, Path]] = {}
    for kind, registry in REGISTRIES.items():
        for name in registry:
            found[name] = (kind, Path(inspect.getsourcefile(registry[name]) or "").resolve())
    styles = Path(inspect.getsourcefile(importlib.import_module("rag_eval.builders.base")) or "").resolve()
    for name in SNIPPET_STYLES:
        found.setdefault(name, ("snippet style", styles))
    return found


def _compared_strings(node: ast.Compare) -> list[str]:
    strings = []
    for side in (node.left, *node.comparators):
        items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
        strings += [item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]
    return strings


def name_comparisons(files: list[Path], names: dict[str, tuple[str, Path]], root: Path = ROOT) -> list[str]:
    """``path:line: kind 'name'`` for each comparison with a plug-in's name outside the plug-in's own file."""
    problems = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                for text in _compared_strings(node):
                    if text in names and names[text][1] != path.resolve():
                        problems.append(f"{path.relative_to(root)}:{node.lineno}: {names[text][0]} {text!r}")
    return problems


def test_no_module_compares_another_plugins_name() -> None:
    files = [path for folder in ("toolkit", "eval", "tokenizers") for path in sorted((ROOT / folder).rglob("*.py"))]
    assert not name_comparisons(files, _plugin_names())


def test_the_check_finds_a_comparison(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text('def f(e, b):\n    return e == "impact" or b in ("a", "sections")\n', encoding="utf-8")
    assert name_comparisons([source], _plugin_names(), tmp_path) == [
        "x.py:2: engine 'impact'",
        "x.py:2: builder 'sections'",
    ]
