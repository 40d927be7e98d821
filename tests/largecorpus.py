"""Generate a large Markdown corpus from the shipped benchmark text, for memory and speed checks."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from benchtext import bench_text


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


if __name__ == "__main__":
    print(generate(Path(sys.argv[1]), float(sys.argv[2])))
