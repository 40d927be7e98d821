"""The core (everything in rag_eval but rag_eval.eval and the CLI) imports neither the harness nor the CLI, and the
search and build reach engines through the registry, never by import. Bug: batch search imported the harness's
runner, datasets and metrics, and the bm25s engine the runner's latency helpers, which imported the engines back."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import importlib, pkgutil, sys
import rag_eval
OUTSIDE = ("rag_eval.eval", "rag_eval.cli", "rag_eval.console", "rag_eval.__main__")
core, packages = [], [rag_eval]
while packages:  # walked by hand: pkgutil.walk_packages imports every package, the CLI's too
    package = packages.pop()
    for found in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if not found.name.startswith(OUTSIDE):
            module = importlib.import_module(found.name)
            core.append(found.name)
            if found.ispkg:
                packages.append(module)
print(len(core), sorted(m for m in sys.modules if m.startswith(OUTSIDE)))
"""


def _imported(script: str) -> str:
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    return result.stdout.strip()


def test_importing_the_whole_core_imports_no_harness_and_no_cli() -> None:
    count, imported = _imported(SCRIPT).split(" ", 1)
    assert int(count) > 40 and imported == "[]"


def test_search_and_build_import_no_engine_implementation() -> None:
    script = (
        "import sys\nimport rag_eval.search.searching, rag_eval.index.writer, rag_eval.index.integrity\n"
        "print(sorted(m for m in sys.modules if m.startswith('rag_eval.engines.')))"
    )
    assert _imported(script) == "['rag_eval.engines.base']"
