"""rag-eval's default recommendation, for users who cannot judge: the system ``rag-eval tune`` chose across the
collections rag-eval was measured on, shipped as a systems file with its evidence.

``eval/recommendations/default.toml`` is the recommendation.toml of that tune (its tuned-on blocks included), and
``default.json`` the evidence read from the same run's tune.json by ``tools/default_recommendation.py``: the
collections, and the leave-one-collection-out table, which says how the choice did on each collection when it was
chosen without it, the closest thing to a collection it never saw. ``--systems default`` (compare) and
``--from default`` (index build) name the file; the labels-free part of a report without judgments names the system
with that evidence and its caveat (:func:`default_choice`).
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

#: What ``--systems`` and ``--from`` take for the shipped default recommendation.
DEFAULT_NAME = "default"


def _folder() -> Any:
    return files("rag_eval.eval") / "recommendations"


def shipped_systems_file(path: Path) -> Path:
    """``path`` itself, unless it names a shipped recommendation (a bare name such as ``default``, with no file of
    that name here): then the shipped systems file."""
    text = str(path)
    if path.exists() or "/" in text or "\\" in text or text.endswith(".toml"):
        return path
    shipped = _folder() / f"{text}.toml"
    return Path(str(shipped)) if shipped.is_file() else path


@cache
def _evidence() -> dict[str, Any] | None:
    found = _folder() / f"{DEFAULT_NAME}.json"
    if not found.is_file():
        return None
    data: dict[str, Any] = json.loads(found.read_text(encoding="utf-8"))
    return data


def default_choice() -> dict[str, Any] | None:
    """The default recommendation as a report shows it: the system, the name to build it with, the evidence in a
    sentence and the caveat; None when rag-eval ships none."""
    data = _evidence()
    if data is None:
        return None
    folds = data["leave_one_out"]
    as_good = sum(1 for fold in folds if fold["as_good"])
    better = sum(1 for fold in folds if fold["significantly_better"])
    gains = ", ".join(f"{fold['collection']} {fold['delta']:+.4f}" for fold in folds)
    evidence = (
        f"chosen by rag-eval tune across {len(data['collections'])} judged collections "
        f"({', '.join(data['collections'])}; {data['run']}); chosen without each of them in turn, the pick was at "
        f"least as good as that collection's best single tokenizer on {as_good} of {len(folds)} and significantly "
        f"better on {better} of {len(folds)} ({data['metric']} on its held-back queries: {gains})"
    )
    caveat = (
        "these collections are Chinese question answering over Wikipedia and a product handbook; a collection "
        "unlike them may differ, and a few judged questions of your own (rag-eval judge, then rag-eval tune) "
        "settle it"
    )
    return {"system": data["system"], "systems_file": DEFAULT_NAME, "evidence": evidence, "caveat": caveat}
