#!/usr/bin/env bash
# reports/builds.md sections 11 and 12: builds with the impact postings counted from the terms (the default) and
# from FTS5's instance pass, and the same chunks tokenized alone, each in a fresh process, ROUNDS times in
# an order that rotates between rounds:
#   RAG_EVAL_WORKERS=2 bash tools/counted_ab.sh OUT.jsonl ROUNDS CORPUS BUILDER STRATEGY
set -euo pipefail
out=$1 rounds=$2 corpus=$3 builder=$4 strategy=$5
orders=("counted instances alone" "instances alone counted" "alone counted instances")
: > "$out"
for round in $(seq 0 $((rounds - 1))); do
    for mode in ${orders[$((round % 3))]}; do
        line=$(.venv/bin/python tools/counted_ab.py "$mode" "$corpus" "$builder" "$strategy" 2>/dev/null)
        printf '{"round": %s, %s\n' "$round" "${line#\{}" >> "$out"
    done
done
