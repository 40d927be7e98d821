#!/usr/bin/env bash
# Build time against tokenization time, one process against the pool (reports/builds.md):
#   bash tools/build_speed.sh OUT.jsonl ROUNDS CORPUS...
# Every corpus x {jieba, pkuseg} x {RAG_EVAL_WORKERS=1, 2, unset (the plan)}, ROUNDS times, each a fresh
# `index build -b passages --json` with the default engine (impact postings); one JSON line per build with the
# load average before it. Indexes go to a temporary folder that is removed at the end.
set -euo pipefail
out=$1 rounds=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$out"
for round in $(seq "$rounds"); do
    for corpus in "$@"; do
        for spec in jieba pkuseg; do
            for workers in 1 2 auto; do
                rm -f "$work"/speed.sqlite*
                load=$(cut -d' ' -f1 /proc/loadavg)
                if [ "$workers" = auto ]; then run=(env -u RAG_EVAL_WORKERS); else run=(env "RAG_EVAL_WORKERS=$workers"); fi
                report=$("${run[@]}" .venv/bin/rag-eval index build "$corpus" -b passages -t "$spec" \
                    -o "$work/speed.sqlite" --json 2>/dev/null)
                printf '{"round": %s, "corpus": "%s", "spec": "%s", "workers": "%s", "load": %s, "report": %s}\n' \
                    "$round" "$(basename "$corpus")" "$spec" "$workers" "$load" "$report" >> "$out"
            done
        done
    done
done
