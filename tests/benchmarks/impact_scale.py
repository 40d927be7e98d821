"""Query latency against collection size: FTS5's bm25 statement, the impact engine and bm25s on a BEIR corpus
replicated 1x, 3x and 10x (issue #14, scale). A script, not a test; reports/latency.md records its output:

    nice .venv/bin/python tests/benchmarks/impact_scale.py build CORPUS_DIR OUT_DIR [SPEC ...]
    nice .venv/bin/python tests/benchmarks/impact_scale.py measure CORPUS_DIR OUT_DIR [SPEC ...] > scale.json
    .venv/bin/python tests/benchmarks/impact_scale.py chart scale.json reports/latency/scale.svg
    .venv/bin/python tests/benchmarks/impact_scale.py tables scale.json > tables.md
    git show c68d204:toolkit/engines/impact/__init__.py > /tmp/impact_c68d204.py
    nice .venv/bin/python tests/benchmarks/impact_scale.py before /tmp/impact_c68d204.py CORPUS_DIR OUT_DIR [SPEC ...]

``before`` times an older ``rag_eval/impact.py`` (loaded as a module of the package) against the current one,
engines alone, on the same questions and indexes: what this commit's changes to full scoring are worth.

``build`` writes OUT_DIR/x{N}/corpus.jsonl (every passage N times; replica r > 0 gets the id ``ID~r``; OUT_DIR
belongs under /tmp, never the project) and one index per strategy and size with ``engine=impact``.

``measure`` takes every ``STRIDE``-th question (after ``WARMUP`` others) and, per size and strategy, runs
each ``RUNS`` times, rotating the systems' order, recording the first run and the best:

- end to end (tokenize + search, warm, 100 hits as ``compare`` runs them: mode ``or``, no snippets):
  ``search()`` with engine ``fts5``, with engine ``impact`` pruned and unpruned (chunk rows read for both),
  and bm25s (the strategy's query terms, ``retrieve``, then the hits' chunk rows read as ``search`` reads
  them);
- engines alone on compiled queries: FTS5's ranking statement cut to 100 (ids and scores), ``impact.ranked``
  pruned and unpruned, bm25s ``retrieve`` on token ids.

bm25s (k1 1.2, b 0.75, its default Lucene IDF, numpy backend, one thread) indexes the very tokens FTS5 holds
(``fts5vocab`` instances of title and body), so it ranks the same terms by its own bm25 variant. Every
measured query's pruned ranking is checked against FTS5's statement (ids, order, bit-identical scores) and
against the unpruned engine.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from impact_latency import percentiles  # this script's folder is on sys.path

from rag_eval.engines import impact
from rag_eval.engines.fts5 import ranking_sql
from rag_eval.engines.impact import rank as impact_rank
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.query import compile_query
from rag_eval.search.searching import search
from rag_eval.search.sql import CHUNK_FIELDS, KEY_FIELDS, ids_json

#: Replication factors; ``SCALE_SIZES=1`` (comma-separated) limits a run to some of them.
SIZES = tuple(int(n) for n in os.environ.get("SCALE_SIZES", "1,3,10").split(","))
STRATEGIES = ["unicode61", "trigram", "unigram", "bigram", "jieba", "pkuseg"]
DEPTH = 100
RUNS = 3
WARMUP = 30
#: Every 14th question (``SCALE_STRIDE``, 1 = all): 302 of cmrc2018_dev_trial_sent's 4,218 (all of them x 3
#: sizes x 6 strategies x 11 systems x 3 runs would take hours with FTS5 at 10x).
STRIDE = int(os.environ.get("SCALE_STRIDE", "14"))


def replicate(corpus: Path, out: Path, times: int) -> Path:
    """OUT/x{times}/corpus.jsonl: the corpus ``times`` times over, replicas with new ids (written once)."""
    folder = out / f"x{times}"
    target = folder / "corpus.jsonl"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    lines = [line for line in (corpus / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    partial = folder / "corpus.jsonl.part"
    with partial.open("w", encoding="utf-8") as handle:
        for replica in range(times):
            for line in lines:
                record = json.loads(line)
                if replica:
                    record["_id"] = f"{record['_id']}~{replica}"
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    partial.replace(target)
    return target


def index_path(out: Path, times: int, spec: str) -> Path:
    return out / f"x{times}" / f"{spec.replace(':', '_')}.sqlite"


def build_all(corpus: Path, out: Path, specs: list[str]) -> None:
    for times in SIZES:
        source = replicate(corpus, out, times)
        for spec in specs:
            path = index_path(out, times, spec)
            if not path.exists():
                build(source, path, builder="passages", tokenizer=spec, engine="impact")
                print(f"built {path}", file=sys.stderr, flush=True)


class Bm25s:
    """bm25s over the tokens FTS5 holds for each row (title and body), rows in chunk id order."""

    def __init__(self, index: Index) -> None:
        import bm25s

        started = time.perf_counter()
        vocab: dict[str, int] = {}
        documents: dict[int, list[int]] = {}
        db = index.db
        db.execute("DROP TABLE IF EXISTS temp.scale_instances")
        db.execute("CREATE VIRTUAL TABLE temp.scale_instances USING fts5vocab(main, 'search', 'instance')")
        for term, doc in db.execute("SELECT term, doc FROM temp.scale_instances"):
            documents.setdefault(doc, []).append(vocab.setdefault(term, len(vocab)))
        db.execute("DROP TABLE temp.scale_instances")
        self.rowids = np.array(sorted(documents))
        self.vocab = vocab
        self.retriever = bm25s.BM25(k1=1.2, b=0.75)
        corpus = bm25s.tokenization.Tokenized(ids=[documents[rowid] for rowid in self.rowids.tolist()], vocab=vocab)
        self.retriever.index(corpus, show_progress=False)
        self.build_seconds = time.perf_counter() - started

    def token_ids(self, terms: tuple[str, ...]) -> list[int]:
        return [self.vocab[term] for term in terms if term in self.vocab]

    def retrieve(self, ids: list[int]) -> list[int]:
        if not ids:
            return []
        found = self.retriever.retrieve([ids], k=DEPTH, show_progress=False, n_threads=0, sorted=True)
        return self.rowids[found.documents[0]].tolist()


def measure_one(index_file: Path, texts: list[str]) -> dict[str, Any]:
    """Every system on the questions, end to end and alone, best of ``RUNS`` and first run."""
    with Index.open(index_file) as index:
        bm25 = Bm25s(index)
        statement = ranking_sql(index, False, False, False) + " LIMIT ?"
        cursor = index.db.cursor()
        cursor.row_factory = None
        compiled = [compile_query(index.tokenizer, text, "or") for text in texts]
        token_ids = [bm25.token_ids(query.terms) for query in compiled]

        def end_to_end(engine: str, prune: bool | None = None, keys_only: bool = False) -> Callable[[int], float]:
            def run(number: int) -> float:
                impact_rank.PRUNE = bool(prune)
                result = search(
                    index,
                    texts[number],
                    mode="or",
                    limit=DEPTH,
                    deep=True,
                    snippets=False,
                    engine=engine,
                    keys_only=keys_only,
                )
                return result.tokenize_seconds + result.search_seconds

            return run

        def bm25s_end_to_end(fields: str) -> Callable[[int], float]:
            rows_sql = f"SELECT c.id, {fields} FROM json_each(?) AS j CROSS JOIN chunks c ON c.id = j.value"

            def run(number: int) -> float:
                started = time.perf_counter()
                query = compile_query(index.tokenizer, texts[number], "or")
                found = bm25.retrieve(bm25.token_ids(query.terms))
                cursor.execute(rows_sql, (ids_json(found),)).fetchall()  # the hits' rows, as search reads them
                return time.perf_counter() - started

            return run

        def timed(action: Callable[[int], Any]) -> Callable[[int], float]:
            def run(number: int) -> float:
                started = time.perf_counter()
                action(number)
                return time.perf_counter() - started

            return run

        systems: dict[str, Callable[[int], float]] = {
            "fts5": end_to_end("fts5"),
            "impact_pruned": end_to_end("impact", True),
            "impact_full": end_to_end("impact", False),
            "bm25s": bm25s_end_to_end(CHUNK_FIELDS),
            "fts5_keys": end_to_end("fts5", keys_only=True),
            "impact_keys": end_to_end("impact", False, keys_only=True),
            "bm25s_keys": bm25s_end_to_end(KEY_FIELDS),
            "fts5_statement": timed(lambda n: cursor.execute(statement, (compiled[n].expression, DEPTH)).fetchall()),
            "impact_pruned_ranking": timed(lambda n: impact.ranked(index, compiled[n], DEPTH, prune=True)),
            "impact_full_ranking": timed(lambda n: impact.ranked(index, compiled[n], DEPTH, prune=False)),
            "bm25s_retrieve": timed(lambda n: bm25.retrieve(token_ids[n])),
        }
        numbers = [n for n, query in enumerate(compiled) if query.expression is not None]
        best: dict[str, list[float]] = {name: [] for name in systems}
        first: dict[str, list[float]] = {name: [] for name in systems}
        same = identical = equal_to_full = 0
        load = [os.getloadavg()[0]]
        with index.reading():
            for number in numbers[:WARMUP]:
                for run in systems.values():
                    run(number)
            names = list(systems)
            for position, number in enumerate(numbers[WARMUP:]):
                times: dict[str, list[float]] = {name: [] for name in names}
                for _ in range(RUNS):
                    shift = position % len(names)
                    for name in names[shift:] + names[:shift]:
                        times[name].append(systems[name](number))
                for name in names:
                    first[name].append(times[name][0])
                    best[name].append(min(times[name]))
                expected = cursor.execute(statement, (compiled[number].expression, DEPTH)).fetchall()
                expected.sort(key=lambda row: (row[1], row[0]))
                pruned = impact.ranked(index, compiled[number], DEPTH, prune=True)
                same += [i for i, _ in pruned] == [row[0] for row in expected] and all(
                    abs(score - row[1]) <= 1e-9 * abs(row[1]) for (_, score), row in zip(pruned, expected, strict=True)
                )
                identical += pruned == [(row[0], row[1]) for row in expected]
                equal_to_full += pruned == impact.ranked(index, compiled[number], DEPTH, prune=False)
        load.append(os.getloadavg()[0])
        impact_rank.PRUNE = True
        return {
            "chunks": index.chunks,
            "queries": len(numbers) - WARMUP,
            "pruned_equal_within_1e-9": same,
            "pruned_bit_identical_to_fts5": identical,
            "pruned_equal_to_unpruned": equal_to_full,
            "bm25s_index_seconds": round(bm25.build_seconds, 1),
            "load_average": load,
            "best_of_3": {name: percentiles(values) for name, values in best.items()},
            "single_run": {name: percentiles(values) for name, values in first.items()},
        }


def measure_all(corpus: Path, out: Path, specs: list[str]) -> dict[str, Any]:
    lines = (corpus / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines if line.strip()]
    chosen = texts[:WARMUP] + texts[WARMUP::STRIDE]
    # The commit the run starts from (others may commit while it runs); uncommitted changes are not named.
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    results = []
    for times in SIZES:
        for spec in specs:
            started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            result = measure_one(index_path(out, times, spec), chosen)
            results.append({"size": times, "strategy": spec, "started": started, **result})
            print(f"measured x{times} {spec}", file=sys.stderr, flush=True)
    import bm25s

    return {
        "machine": {
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "numpy": np.__version__,
            "bm25s": bm25s.__version__,
            "cpus": os.cpu_count(),
        },
        "commit": commit.stdout.strip(),
        "questions": len(chosen) - WARMUP,
        "stride": STRIDE,
        "results": results,
    }


def before(old_module: Path, corpus: Path, out: Path, specs: list[str]) -> dict[str, Any]:
    """An older impact module's ``ranked`` (unpruned) against the current one's, best of ``RUNS`` per query."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rag_eval._impact_before", old_module)
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    lines = (corpus / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines if line.strip()]
    chosen = texts[:WARMUP] + texts[WARMUP::STRIDE]
    results = []
    for times in SIZES:
        for strategy in specs:
            with Index.open(index_path(out, times, strategy)) as index, index.reading():
                compiled = [compile_query(index.tokenizer, text, "or") for text in chosen]
                compiled = [query for query in compiled if query.expression is not None]
                systems = {
                    "before": lambda query: old.ranked(index, query, DEPTH),
                    "now": lambda query: impact.ranked(index, query, DEPTH, prune=False),
                }
                best: dict[str, list[float]] = {name: [] for name in systems}
                same = 0
                for position, query in enumerate(compiled):
                    timings: dict[str, float] = {}
                    for _ in range(RUNS):
                        for name in sorted(systems, reverse=position % 2 == 1):
                            started = time.perf_counter()
                            systems[name](query)
                            elapsed = time.perf_counter() - started
                            timings[name] = min(timings.get(name, elapsed), elapsed)
                    if position >= WARMUP:
                        for name in systems:
                            best[name].append(timings[name])
                        same += systems["before"](query) == systems["now"](query)
                results.append(
                    {
                        "size": times,
                        "strategy": strategy,
                        "chunks": index.chunks,
                        "same_ranking": same,
                        **{name: percentiles(values) for name, values in best.items()},
                    }
                )
                print(f"before/now x{times} {strategy}", file=sys.stderr, flush=True)
    return {"old_module": str(old_module), "results": results}


def main(argv: list[str]) -> None:
    command = argv[0]
    if command in ("chart", "tables"):
        data = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        if command == "chart":
            chart(data, Path(argv[2]))
        else:
            print(tables(data))
        return
    if command == "before":
        json.dump(before(Path(argv[1]), Path(argv[2]), Path(argv[3]), argv[4:] or STRATEGIES), sys.stdout, indent=1)
        print()
        return
    corpus, out = Path(argv[1]), Path(argv[2])
    specs = argv[3:] or STRATEGIES
    if command == "build":
        build_all(corpus, out, specs)
    elif command == "measure":
        json.dump(measure_all(corpus, out, specs), sys.stdout, indent=1)
        print()
    else:
        raise SystemExit(f"unknown command {command!r}")


def chart(data: dict[str, Any], target: Path) -> None:
    """p95 end to end (best of 3) against rows, one panel per strategy, log latency axis."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    specs = list(dict.fromkeys(result["strategy"] for result in data["results"]))
    systems = {"fts5": "FTS5 bm25", "impact_pruned": "impact, pruned", "impact_full": "impact", "bm25s": "bm25s"}
    figure, axes = plt.subplots(2, 3, figsize=(11, 6.5), sharex=True, sharey=True)
    for axis, spec in zip(axes.flat, specs, strict=False):
        rows = [result for result in data["results"] if result["strategy"] == spec]
        for key, label in systems.items():
            axis.plot(
                [row["chunks"] for row in rows],
                [row["best_of_3"][key]["p95_ms"] for row in rows],
                marker="o",
                label=label,
            )
        axis.axhline(3.0, color="grey", linestyle=":", linewidth=1)
        axis.set_title(spec)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xticks(
            [row["chunks"] for row in rows], [f"{row['chunks'] / 1000:.1f}k ({row['size']}x)" for row in rows]
        )
        axis.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        axis.grid(True, which="both", alpha=0.3)
    for axis in axes[-1]:
        axis.set_xlabel("rows")
    for axis in axes[:, 0]:
        axis.set_ylabel("p95 end to end, ms")
    axes.flat[0].legend(fontsize=8, loc="upper left")
    figure.suptitle("Query latency against collection size (best of 3; dotted: 3 ms target)")
    figure.tight_layout()
    figure.savefig(target, format="svg")


END_TO_END = {"fts5": "FTS5", "impact_full": "impact", "impact_pruned": "impact pruned", "bm25s": "bm25s"}
#: As ``compare`` and batch search run them since keys-only searches: each hit's key, not its whole row.
KEYS_ONLY = {"fts5_keys": "FTS5", "impact_keys": "impact", "bm25s_keys": "bm25s"}
ENGINES_ALONE = {
    "fts5_statement": "FTS5 statement",
    "impact_full_ranking": "impact",
    "impact_pruned_ranking": "impact pruned",
    "bm25s_retrieve": "bm25s",
}


def tables(data: dict[str, Any]) -> str:
    """The report's Markdown tables from ``measure``'s JSON."""
    out = []
    out.append(
        "| size | strategy | rows | queries | pruned = FTS5 (1e-9) | pruned = FTS5 bit for bit | pruned = unpruned "
        "| load |"
    )
    out.append("|---|---|---:|---:|---:|---:|---:|---|")
    for row in data["results"]:
        load = "-".join(f"{value:.1f}" for value in row["load_average"])
        out.append(
            f"| {row['size']}x | {row['strategy']} | {row['chunks']} | {row['queries']} | "
            f"{row['pruned_equal_within_1e-9']} | {row['pruned_bit_identical_to_fts5']} | "
            f"{row['pruned_equal_to_unpruned']} | {load} |"
        )
    for title, kind, systems in (
        ("End to end, best of 3", "best_of_3", END_TO_END),
        ("End to end, single run", "single_run", END_TO_END),
        ("End to end reading keys only, best of 3", "best_of_3", KEYS_ONLY),
        ("End to end reading keys only, single run", "single_run", KEYS_ONLY),
        ("Engines alone, best of 3", "best_of_3", ENGINES_ALONE),
    ):
        if any(key not in row[kind] for row in data["results"] for key in systems):
            continue  # a run from before these systems were measured
        out.append("")
        out.append(f"{title}: p50 / p95 ms, and QPS (1 / mean, one query at a time)")
        out.append("")
        out.append("| size | strategy | " + " | ".join(f"{label} p50 / p95 | QPS" for label in systems.values()) + " |")
        out.append("|---|---|" + "---:|---:|" * len(systems))
        for row in data["results"]:
            cells = []
            for key in systems:
                figures = row[kind][key]
                cells.append(f"{figures['p50_ms']:.2f} / {figures['p95_ms']:.2f} | {figures['qps']:.0f}")
            out.append(f"| {row['size']}x | {row['strategy']} | " + " | ".join(cells) + " |")
    largest = max(row["size"] for row in data["results"])
    out.append("")
    out.append(f"Targets at {largest}x: the default (unpruned) impact engine, p95 end to end <= 3 ms, QPS >= bm25s's")
    out.append("")
    out.append(
        "| strategy | p95 end to end, best of 3 | <= 3 ms | single run p95 | QPS impact / bm25s, end to end "
        "| engines alone |"
    )
    out.append("|---|---:|:---:|---:|---:|---:|")
    for row in data["results"]:
        if row["size"] != largest:
            continue
        best, single = row["best_of_3"], row["single_run"]
        p95 = best["impact_full"]["p95_ms"]
        mine, theirs = best["impact_full"]["qps"], best["bm25s"]["qps"]
        alone, peer = best["impact_full_ranking"]["qps"], best["bm25s_retrieve"]["qps"]
        out.append(
            f"| {row['strategy']} | {p95:.2f} ms | {'yes' if p95 <= 3.0 else 'no'} | "
            f"{single['impact_full']['p95_ms']:.2f} ms | {mine:.0f} / {theirs:.0f} ({mine / theirs:.1f}x) | "
            f"{alone:.0f} / {peer:.0f} ({alone / peer:.1f}x) |"
        )
    if any(row["size"] == 1 and "impact_keys" in row["best_of_3"] for row in data["results"]):
        out.append("")
        out.append(
            "Targets at 1x: the default impact engine as `compare` and batch search run it (keys only), "
            "p95 end to end <= 1.5 ms, QPS >= bm25s's on the same tokens, same run"
        )
        out.append("")
        out.append(
            "| strategy | p95, best of 3 | <= 1.5 ms | single run p95 | <= 1.5 ms | QPS impact / bm25s, best of 3 "
            "| single run |"
        )
        out.append("|---|---:|:---:|---:|:---:|---:|---:|")
        for row in data["results"]:
            if row["size"] != 1:
                continue
            best, single = row["best_of_3"]["impact_keys"], row["single_run"]["impact_keys"]
            peer, peer_single = row["best_of_3"]["bm25s_keys"], row["single_run"]["bm25s_keys"]
            out.append(
                f"| {row['strategy']} | {best['p95_ms']:.2f} ms | {'yes' if best['p95_ms'] <= 1.5 else 'no'} | "
                f"{single['p95_ms']:.2f} ms | {'yes' if single['p95_ms'] <= 1.5 else 'no'} | "
                f"{best['qps']:.0f} / {peer['qps']:.0f} ({best['qps'] / peer['qps']:.2f}x) | "
                f"{single['qps']:.0f} / {peer_single['qps']:.0f} ({single['qps'] / peer_single['qps']:.2f}x) |"
            )
    return "\n".join(out)


if __name__ == "__main__":
    main(sys.argv[1:])
