"""Corpora of every builder with a file outside what the index holds, for the closed-read tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

SECRET = "API_KEY=sk-do-not-serve"


def _sections(root: Path) -> dict[str, str]:
    (root / "guide").mkdir(parents=True)
    (root / "guide" / "export.md").write_text("# 导出\n\n导出文件保留三十天。\n", encoding="utf-8")
    (root / "guide" / "swapped.md").write_text("# 换\n\n换掉的文件。\n", encoding="utf-8")
    (root / "my notes.md").write_text("# 笔记\n\n带空格的文件名。\n", encoding="utf-8")
    (root / "c#").mkdir()
    (root / "c#" / "notes#1.md").write_text("# 井号\n\n名字里有井号。\n", encoding="utf-8")
    (root / ".hidden").mkdir()  # a dot-folder the sections builder indexes: held, still never served whole
    (root / ".hidden" / "secret.md").write_text(f"# 秘密\n\n{SECRET}\n", encoding="utf-8")
    return {
        "guide/export.md": "导出文件保留三十天",
        "guide/export.md#导出": "导出文件保留三十天",
        "my notes.md": "带空格的文件名",
        "my%20notes.md": "带空格的文件名",
        "my%20notes.md#笔记": "带空格的文件名",
        "c#/notes#1.md#": "名字里有井号",
        "c#/notes#1.md#井号": "名字里有井号",
    }


def _lines(root: Path) -> dict[str, str]:
    root.mkdir(parents=True)
    (root / "a.txt").write_text("退款 三个 工作日\n第二 行\n", encoding="utf-8")
    (root / "guide").mkdir()
    (root / "guide" / "swapped.txt").write_text("换掉 的 文件\n", encoding="utf-8")
    manifest = [
        {"doc_id": "a", "revision": "r1", "status": "current", "path": "a.txt"},
        {"doc_id": "s", "revision": "r1", "status": "current", "path": "guide/swapped.txt"},
    ]
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return {"a.txt": "退款 三个 工作日", "a.txt:2": "第二 行", "a.txt#": "第二 行"}


def _passages(root: Path) -> dict[str, str]:
    root.mkdir(parents=True)
    (root / "guide").mkdir()
    (root / "corpus.jsonl").write_text('{"_id": "d1", "title": "退款", "text": "三个工作日到账"}\n', encoding="utf-8")
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "退款"}\n', encoding="utf-8")
    return {"d1": "三个工作日到账", "corpus.jsonl": "三个工作日到账"}


#: Per builder: a corpus maker (returns the reads that must keep working, key -> text they hold) and the held
#: file swapped for a link after the build (passages hold one file, read whole here). A new builder needs its
#: entry here.
CORPORA: dict[str, tuple[Callable[[Path], dict[str, str]], str | None]] = {
    "sections": (_sections, "guide/swapped.md"),
    "lines": (_lines, "guide/swapped.txt"),
    "passages": (_passages, None),
}
