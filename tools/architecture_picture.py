"""Draw docs/architecture.svg: the data's way through rag-eval's packages, and the layers they sit in.

Run from the repository's root: ``.venv/bin/python tools/architecture_picture.py`` (matplotlib, as the reports use).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

OUT = Path("docs/architecture.svg")

#: (x, y, label, package, layer colour): the data's way left to right, the harness above, the core below.
BOXES = {
    "source": (0.5, 1.0, "source files\nMarkdown, manifest,\ncorpus.jsonl", "your folder", "#ffffff"),
    "builder": (2.3, 1.0, "chunks", "rag_eval.builders", "#e8f0fb"),
    "tokenizer": (2.3, -0.35, "tokens", "rag_eval.tokenizers", "#eef7ea"),
    "index": (4.1, 1.0, "index file\nchunks, FTS5, meta,\nengine postings", "rag_eval.index", "#e8f0fb"),
    "engine": (5.9, 1.0, "ranked hits", "rag_eval.engines", "#e8f0fb"),
    "search": (7.7, 1.0, "search, snippets,\nreads, evidence", "rag_eval.search", "#e8f0fb"),
    "serve": (9.5, 1.0, "MCP tools", "rag_eval.serve", "#e8f0fb"),
    "dataset": (0.5, 3.2, "dataset\ncorpus, queries, qrels", "eval.datasets", "#fbf1e6"),
    "run": (4.1, 3.2, "TREC runs, latency\n(CompareRequest)", "eval.compare", "#fbf1e6"),
    "metrics": (5.9, 3.2, "metrics,\nsignificance", "eval.metrics", "#fbf1e6"),
    "report": (7.7, 3.2, "Comparison model:\nreport.json/md/html", "eval.reporting", "#fbf1e6"),
    "choose": (9.5, 3.2, "tune, judge,\nqueries synth", "eval.tuning/judging/synth", "#fbf1e6"),
}
ARROWS = [
    ("source", "builder"),
    ("builder", "index"),
    ("tokenizer", "index"),
    ("index", "engine"),
    ("engine", "search"),
    ("search", "serve"),
    ("dataset", "run"),
    ("run", "metrics"),
    ("metrics", "report"),
    ("report", "choose"),
    ("dataset", "builder"),
    ("run", "index"),
    ("search", "run"),
]
WIDTH, HEIGHT = 1.55, 0.95


def edge(name: str, toward: tuple[float, float]) -> tuple[float, float]:
    """The point on box ``name``'s border on the way to ``toward``."""
    x, y = BOXES[name][:2]
    dx, dy = toward[0] - x, toward[1] - y
    scale = min(WIDTH / 2 / abs(dx) if dx else 1e9, HEIGHT / 2 / abs(dy) if dy else 1e9)
    return x + dx * scale, y + dy * scale


def main() -> None:
    fig, ax = plt.subplots(figsize=(11.5, 5.4))
    ax.set_xlim(-0.5, 10.5)
    ax.set_ylim(-1.1, 4.3)
    ax.axis("off")
    ax.text(-0.4, 4.15, "harness: rag_eval.eval (compare, tune, judge; reads the core, never the reverse)", fontsize=9)
    ax.text(-0.4, 1.95, "core: rag_eval (the library the CLI, the harness, agents and your code call)", fontsize=9)
    ax.axhline(2.1, color="#bbbbbb", linewidth=0.8, linestyle="--")
    for x, y, label, package, colour in BOXES.values():
        box = FancyBboxPatch(
            (x - WIDTH / 2, y - HEIGHT / 2),
            WIDTH,
            HEIGHT,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=colour,
            edgecolor="#444444",
            linewidth=0.9,
        )
        ax.add_patch(box)
        ax.text(x, y + 0.08, label, ha="center", va="center", fontsize=8)
        ax.text(x, y - HEIGHT / 2 + 0.1, package, ha="center", va="center", fontsize=7, color="#555555")
    for start, end in ARROWS:
        a, b = BOXES[start][:2], BOXES[end][:2]
        arrow = FancyArrowPatch(
            edge(start, b), edge(end, a), arrowstyle="-|>", mutation_scale=11, color="#333333", linewidth=0.9
        )
        ax.add_patch(arrow)
    ax.text(
        -0.4,
        -1.0,
        "cli (rag_eval.cli) parses, calls one library function and prints; files, errors, specs and registries "
        "are the layer under everything.",
        fontsize=8,
        color="#444444",
    )
    fig.tight_layout()
    fig.savefig(OUT, format="svg", metadata={"Date": None})
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
