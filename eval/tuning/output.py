"""The folder ``rag-eval tune`` writes (tune.json, report.md, recommendation.toml, pareto.svg) and how a later run
knows it may replace it: only a folder tune wrote, by its tune.json's schema."""

from __future__ import annotations

import json
from pathlib import Path

from ...files.outputs import only_names

#: tune.json of a tune of one dataset (:mod:`.tune`).
SCHEMA = "rag-eval/tune/1"
#: tune.json of a tune over several collections (:mod:`.collections`).
COLLECTIONS_SCHEMA = "rag-eval/tune-collections/1"
#: What tune writes into its folder.
WRITTEN = frozenset({"tune.json", "recommendation.toml", "report.md", "pareto.svg"})


def tune_owned(path: Path) -> str | None:
    """None when ``path`` is a folder ``tune`` wrote (its tune.json has the tune schema), else why not."""
    found = only_names(path, lambda name: str(name) in WRITTEN, what="tune output folder")
    if found is not None:
        return found
    try:
        data = json.loads((path / "tune.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "it has no tune.json that rag-eval wrote" if any(path.iterdir()) else None
    if not isinstance(data, dict) or data.get("schema") not in (SCHEMA, COLLECTIONS_SCHEMA):
        return "its tune.json does not have rag-eval's tune schema"
    return None
