"""Refresh the sha256 of every file listed for a shipped dataset in datasets/manifest.json.

Run after editing a shipped dataset: python tools/update_manifest.py
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "datasets"
SKIP = {"README.md"}


def main() -> None:
    manifest_path = ROOT / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for dataset_id, entry in manifest.items():
        folder = ROOT / dataset_id
        names = sorted(
            p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name not in SKIP
        )
        entry["files"] = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in names}
    manifest_path.write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"updated {manifest_path}: " + ", ".join(f"{k} ({len(v['files'])} files)" for k, v in manifest.items()))


if __name__ == "__main__":
    main()
