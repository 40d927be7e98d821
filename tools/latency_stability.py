"""Is ``rag-eval compare``'s latency the strategy's or the machine's? Run a compare twice on a busy machine and
check that the two runs tell the same story.

    RAG_EVAL_CACHE=/tmp/lat/cache nice .venv/bin/python tools/latency_stability.py --out /tmp/lat/after \\
        > /tmp/lat/after.json

Two CPU-bound busy loops (``--busy``) run in processes of this script's own for the whole measurement (on a 2-core
machine: every core is contended). ``rag-eval compare DATASET`` runs ``--runs`` times, one after another, with
``--rag-eval`` as the command (another checkout's, to measure the code before a change). Each run's search p50
and p95 per system are read from its report.json, and two criteria are checked (issue 34):

1. **Order.** Every pair of systems whose p50s differ by ``RATIO`` (1.5x) or more in at least one run has the
   same p50 order in every run.
2. **p95 follows p50.** In each run, every pair whose p50s differ by ``RATIO`` or more has its p95s in the
   same order (a p95 drawn from the machine's pauses is about the same for every system, whatever its p50).

Prints a JSON record (figures, load averages, the pairs that break a criterion) and exits 1 when a criterion
fails. The busy loops are ended by their process ids when the script ends, however it ends.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RATIO = 1.5
#: Seconds the busy loops run before the first compare, so the machine is busy from its start.
RAMP_SECONDS = 5.0


def busy_loops(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` processes that spin on one core each until ended."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def latencies(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Search p50 and p95 (ms) per timed system of a compare report."""
    out = {}
    for row in report["systems"]:
        search = (row.get("latency_ms") or {}).get("search") or {}
        if search.get("median") is not None and search.get("p95") is not None:
            out[row["name"]] = {"p50": float(search["median"]), "p95": float(search["p95"])}
    return out


def ratio(a: float, b: float) -> float:
    """How many times the larger of two latencies is the smaller (infinite when one is 0 and the other not)."""
    low, high = sorted((a, b))
    if high == 0:
        return 1.0
    return high / low if low > 0 else float("inf")


def order(a: float, b: float) -> int:
    return (a > b) - (a < b)


def check(runs: list[dict[str, dict[str, float]]], threshold: float = RATIO) -> dict[str, Any]:
    """The two criteria over runs of the same systems: pairs whose p50 order differs between runs although their
    p50s differ by ``threshold`` or more in some run, and per run the pairs so far apart whose p95 order is not
    their p50 order."""
    names = sorted(set.intersection(*(set(run) for run in runs))) if runs else []
    order_breaks, p95_breaks, considered = [], [], 0
    for a, b in itertools.combinations(names, 2):
        apart = [ratio(run[a]["p50"], run[b]["p50"]) >= threshold for run in runs]
        if any(apart):
            considered += 1
            orders = {order(run[a]["p50"], run[b]["p50"]) for run in runs}
            if len(orders) > 1:
                order_breaks.append({"a": a, "b": b, "p50": [[run[a]["p50"], run[b]["p50"]] for run in runs]})
        for number, (run, far) in enumerate(zip(runs, apart, strict=True), start=1):
            if far and order(run[a]["p95"], run[b]["p95"]) != order(run[a]["p50"], run[b]["p50"]):
                p95_breaks.append(
                    {
                        "run": number,
                        "a": a,
                        "b": b,
                        "p50": [run[a]["p50"], run[b]["p50"]],
                        "p95": [run[a]["p95"], run[b]["p95"]],
                    }
                )
    pairs_far = sum(
        1
        for run in runs
        for a, b in itertools.combinations(names, 2)
        if ratio(run[a]["p50"], run[b]["p50"]) >= threshold
    )
    return {
        "threshold": threshold,
        "systems": names,
        "pairs": len(names) * (len(names) - 1) // 2,
        "pairs_apart_in_some_run": considered,
        "order_breaks": order_breaks,
        "pairs_apart_per_run_total": pairs_far,
        "p95_breaks": p95_breaks,
        "order_holds": not order_breaks,
        "p95_follows_p50": not p95_breaks,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rag-eval", default=str(Path(sys.executable).with_name("rag-eval")), help="the command")
    parser.add_argument("--dataset", default="handbook")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--busy", type=int, default=2, help="CPU-bound busy loops running meanwhile")
    parser.add_argument("--out", type=Path, required=True, help="folder for the runs' report folders")
    parser.add_argument("compare_args", nargs="*", help="more compare options, after --")
    args = parser.parse_args()
    if args.runs < 2 or args.busy < 0:
        parser.error("--runs must be at least 2 and --busy at least 0")
    command = shlex.split(args.rag_eval)
    record: dict[str, Any] = {
        "command": [*command, "compare", args.dataset, "-o", str(args.out / "run-N"), *args.compare_args],
        "busy_loops": args.busy,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": [],
    }
    loops = busy_loops(args.busy)
    try:
        time.sleep(RAMP_SECONDS if loops else 0)
        for number in range(1, args.runs + 1):
            folder = args.out / f"run-{number}"
            before = load_average()
            clock = time.monotonic()
            subprocess.run(
                [*command, "compare", args.dataset, "-o", str(folder), *args.compare_args],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
            record["runs"].append(
                {
                    "load_average_start": before,
                    "load_average_end": load_average(),
                    "seconds": round(time.monotonic() - clock, 1),
                    "commit": report.get("environment", {}).get("commit"),
                    "repeat": (report.get("latency") or {}).get("repeat", 1),
                    "systems": latencies(report),
                }
            )
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    record["check"] = check([run["systems"] for run in record["runs"]])
    print(json.dumps(record, indent=2, ensure_ascii=False))
    return 0 if record["check"]["order_holds"] and record["check"]["p95_follows_p50"] else 1


if __name__ == "__main__":
    sys.exit(main())
