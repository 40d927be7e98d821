"""Assemble the handbook's queries and qrels from drafted queries and pooled judgements.

Usage: python tools/assemble_handbook.py POOL.jsonl JUDGED_DIR
Writes datasets/handbook/queries.jsonl, qrels/test.tsv (grades 1 and 2) and judgements.tsv (every
pooled judgement, 0 included), and prints per-kind statistics for the datasheet.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "datasets" / "handbook"


def main() -> None:
    pool = [json.loads(line) for line in Path(sys.argv[1]).read_text(encoding="utf-8").splitlines() if line.strip()]
    judged: dict[int, dict] = {}
    for path in sorted(Path(sys.argv[2]).glob("packet-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                judged[int(record["n"])] = record
    missing = [n for n in range(1, len(pool) + 1) if n not in judged]
    if missing:
        raise SystemExit(f"no judgements for queries {missing[:10]}…")
    queries, qrels, judgements = [], [], []
    for number, query in enumerate(pool, start=1):
        record = judged[number]
        if record["text"] != query["text"]:
            raise SystemExit(f"query {number}: judged text {record['text']!r} != pooled {query['text']!r}")
        candidates = {c["key"] for c in query["candidates"]}
        grades = {key: int(grade) for key, grade in record["judgements"].items()}
        if set(grades) != candidates:
            raise SystemExit(f"query {number}: judged {len(grades)} candidates, pooled {len(candidates)}")
        query_id = f"h{number:03d}"
        kind = query["kind"]
        if kind == "no-answer" and any(g == 2 for g in grades.values()):
            print(f"{query_id} {query['text']!r}: judged answerable; kept out of no-answer", file=sys.stderr)
            kind = "question"
        entry = {"_id": query_id, "text": query["text"], "kind": kind}
        if query.get("intended"):
            entry["intended"] = query["intended"]
        queries.append(entry)
        for key in sorted(grades, key=lambda k: (-grades[k], k)):
            judgements.append((query_id, key, grades[key]))
            if grades[key] > 0 and kind != "no-answer":
                qrels.append((query_id, key, grades[key]))
    (ROOT / "qrels").mkdir(parents=True, exist_ok=True)
    with open(ROOT / "queries.jsonl", "w", encoding="utf-8") as out:
        for entry in queries:
            out.write(json.dumps(entry, ensure_ascii=False) + "\n")
    for name, rows in (("qrels/test.tsv", qrels), ("judgements.tsv", judgements)):
        with open(ROOT / name, "w", encoding="utf-8") as out:
            out.write("query-id\tcorpus-id\tscore\n")
            out.writelines(f"{q}\t{d}\t{g}\n" for q, d, g in rows)
    kinds: dict[str, int] = {}
    for entry in queries:
        kinds[entry["kind"]] = kinds.get(entry["kind"], 0) + 1
    print(
        json.dumps(
            {"queries": len(queries), "qrels": len(qrels), "judgements": len(judgements), "kinds": kinds},
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
