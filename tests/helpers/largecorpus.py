"""Generate a large Markdown corpus from the shipped benchmark text, for memory and speed checks."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from helpers.benchtext import bench_text


def generate(folder: Path, megabytes: float, *, file_kb: int = 100, seed: int = 7) -> int:
    """Write about ``megabytes`` MB of Markdown (a heading every few paragraphs); returns bytes written."""
    rng = random.Random(seed)
    paragraphs = bench_text()
    folder.mkdir(parents=True, exist_ok=True)
    target = int(megabytes * 1_000_000)
    written = number = 0
    while written < target:
        parts = []
        size = 0
        section = 0
        while size < file_kb * 1000:
            if size == 0 or rng.random() < 0.25:
                section += 1
                parts.append(f"## 第 {section} 节 {rng.choice(paragraphs)[:12]}")
            paragraph = rng.choice(paragraphs)
            parts.append(paragraph)
            size += len(paragraph.encode("utf-8")) + 2
        data = ("\n\n".join(parts) + "\n").encode("utf-8")
        (folder / f"category-{number % 10}").mkdir(exist_ok=True)
        (folder / f"category-{number % 10}" / f"doc-{number:05d}.md").write_bytes(data)
        written += len(data)
        number += 1
    return written


def generate_lines(folder: Path, megabytes: float, *, file_kb: int = 100, seed: int = 7) -> int:
    """Write about ``megabytes`` MB of ``lines`` sources (.txt files of one paragraph a line) and their
    manifest.json; returns bytes written."""
    rng = random.Random(seed)
    paragraphs = bench_text()
    folder.mkdir(parents=True, exist_ok=True)
    target = int(megabytes * 1_000_000)
    written = number = 0
    entries = []
    while written < target:
        lines = []
        size = 0
        while size < file_kb * 1000:
            lines.append(rng.choice(paragraphs))
            size += len(lines[-1].encode("utf-8")) + 1
        data = ("\n".join(lines) + "\n").encode("utf-8")
        (folder / f"doc-{number:05d}.txt").write_bytes(data)
        entries.append(
            {
                "doc_id": f"doc-{number}",
                "revision": "r1",
                "status": "current",
                "expires": None,
                "path": f"doc-{number:05d}.txt",
            }
        )
        written += len(data)
        number += 1
    (folder / "manifest.json").write_text(json.dumps(entries), encoding="utf-8")
    return written


def generate_passages(path: Path, megabytes: float, *, chars: int = 285, seed: int = 7) -> int:
    """Write about ``megabytes`` MB of BEIR corpus.jsonl, passages of about ``chars`` characters (DuReader's
    size: 1,400 passages make 400k characters); returns the number of passages."""
    rng = random.Random(seed)
    paragraphs = bench_text()
    path.parent.mkdir(parents=True, exist_ok=True)
    target = int(megabytes * 1_000_000)
    written = number = 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            text = ""
            while len(text) < chars:
                text += rng.choice(paragraphs)
            record = {"_id": f"p{number}", "title": rng.choice(paragraphs)[:12], "text": text[:chars]}
            line = json.dumps(record, ensure_ascii=False) + "\n"
            out.write(line)
            written += len(line.encode("utf-8"))
            number += 1
    return number


if __name__ == "__main__":
    print(generate(Path(sys.argv[1]), float(sys.argv[2])))
