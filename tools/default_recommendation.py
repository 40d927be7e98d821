"""Ship the recommendation of a tune across collections as rag-eval's default (eval/recommendations/).

    python tools/default_recommendation.py TUNE_FOLDER

TUNE_FOLDER is the output of ``rag-eval tune A B C ...`` (a tune.json with the tune-collections schema). Writes
``eval/recommendations/default.toml`` (its recommendation.toml, unchanged) and ``default.json`` (the system, the
collections and the leave-one-collection-out table, numbers and ids only, read from its tune.json), each
atomically. Nothing is computed here: every figure is the run's own.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "eval" / "recommendations"
KEEP = (
    "collection",
    "candidate",
    "judged_queries",
    "best_single",
    "delta",
    "p_holm",
    "as_good",
    "significantly_better",
)


def _write(path: Path, text: str) -> None:
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(name, path)


def main(folder: Path) -> None:
    report = json.loads((folder / "tune.json").read_text(encoding="utf-8"))
    if report.get("schema") != "rag-eval/tune-collections/1" or not report.get("leave_one_out"):
        sys.exit(f"error: {folder}: not a tune across collections with its leave-one-out table")
    started, commit = report["environment"]["created_utc"], report["environment"]["commit"] or "unknown"
    evidence = {
        "system": report["recommendation"],
        "metric": report["metric"],
        "objective": report["objective"],
        "collections": [c["id"] for c in report["collections"]],
        "run": f"rag-eval tune, {str(started)[:10]}, commit {str(commit)[:7]}, reports/choosing.md",
        "leave_one_out": [{key: fold[key] for key in KEEP} for fold in report["leave_one_out"]],
        "held_back": [{key: item[key] for key in KEEP} for item in report["held_back"]],
    }
    TARGET.mkdir(exist_ok=True)
    _write(TARGET / "default.toml", (folder / "recommendation.toml").read_text(encoding="utf-8"))
    _write(TARGET / "default.json", json.dumps(evidence, ensure_ascii=False, indent=2) + "\n")
    print(f"wrote {TARGET / 'default.toml'} and default.json: {evidence['system']}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
