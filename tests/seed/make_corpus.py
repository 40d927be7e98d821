"""Create ONLY a new synthetic corpus directory; never overwrite one."""

import json
from pathlib import Path

DOCUMENTS = [
    ("handbook-v1", "r1", "archived", None, "旧版 导出 说明\n导出 文件 保留 7 天 。\n"),
    (
        "handbook",
        "r2",
        "current",
        None,
        "星屿 项目 导出 手册\n导出 文件 保留 30 天 ， 到期 后 清理 。\n下载 入口 位于 设置 页面 。\n",
    ),
    ("meeting", "r1", "current", None, "星屿 会议 纪要\n导出 文件 保留 14 天 ， 待 负责人 确认 。\n"),
    ("notice", "r1", "current", "2026-10-07", "临时 导出 通知\n导出 文件 保留 60 天 ， 仅限 本次 演练 。\n"),
    ("garden", "r1", "current", None, "窗台 养护 笔记\n薄荷 每周 检查 土壤 湿度 。\n"),
    ("compact", "r1", "current", None, "导出文件保留三十天\n"),
]


def make(folder):
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=False)
    manifest = []
    for doc, revision, status, expires, text in DOCUMENTS:
        filename = doc + ".txt"
        (root / filename).write_text(text, encoding="utf-8")
        manifest.append(dict(doc_id=doc, revision=revision, status=status, expires=expires, path=filename))
    (root / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    make("corpus")
    print("created corpus: 6 synthetic files")
