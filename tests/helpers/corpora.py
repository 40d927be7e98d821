"""Small corpora the tests build indexes from: a Markdown knowledge base exercising every sections rule, and one-file
corpora of each builder."""

from __future__ import annotations

import json
from pathlib import Path

LONG_PARAGRAPH = "备份策略说明。" * 50  # 350 characters
DOCS = {
    "guide/export.md": (
        "本手册介绍数据导出。\n\n"
        "# 导出指南\n\n导出文件保留三十天，到期后自动清理。\n\n"
        "## 导出文件\n\n在设置页面点击导出按钮，选择 CSV 或 Excel 格式。\n\n"
        "```bash\n# 这不是标题\nexport --all\n```\n\n"
        "## A\n\n第一个 A。\n\n## A\n\n第二个 A。\n\n## A-2\n\n名为 A-2 的标题。\n\n"
        "### 深层 标题\n\n#### 第四层\n\n四级标题下的内容。\n"
    ),
    "guide/long.md": "# 备份\n\n" + "\n\n".join([LONG_PARAGRAPH] * 8) + "\n\n" + "超长段落" * 600 + "\n",
    "faq/fullwidth.md": (
        "# ＦＡＱ\n\nＷｉ－Ｆｉ 密碼在設定頁面，版本 Ｖ２．３。\n\n# 資料庫備份\n\n資料庫備份會保留三十天。\n"
    ),
    "notes.md": "没有标题的笔记：导出前请确认权限。\n",
}


def make_docs(root: Path) -> Path:
    """A small Markdown knowledge base exercising every sections-builder rule."""
    for name, text in DOCS.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


#: A lines manifest of one document (``%s``: its path).
MANIFEST = '[{"doc_id": "a", "revision": "r1", "status": "current", "expires": null, "path": "%s"}]'


def lines_corpus(folder: Path, text: str, name: str = "a.txt") -> Path:
    """A lines corpus of one file ``name`` holding ``text``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    (folder / "manifest.json").write_text(MANIFEST % name, encoding="utf-8")
    return folder


def sections_corpus(folder: Path, text: str) -> Path:
    """A Markdown corpus of one file, a.md, holding ``text``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.md").write_text(text, encoding="utf-8")
    return folder


def passages_corpus(folder: Path, text: str, title: str = "") -> Path:
    """A corpus.jsonl of two passages, the second holding ``text`` under ``title``; the file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"_id": "d1", "title": "", "text": "导出文件保留三十天"}, {"_id": "d2", "title": title, "text": text}]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return folder / "corpus.jsonl"
