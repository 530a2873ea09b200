#!/usr/bin/env bash
# Runs the README demo (scripts/demo.sh, the same gate) N times (default 10) on fresh data
# directories, so no run has history, and prints, per run, the primary verdict, the runs it
# took and its wall time, then the tally. Expected verdict: accept (the candidate turns
# activation checkpointing off: a real speed-up). Issue 14's goal: a decisive verdict matching
# the true effect in >= 9 of 10 runs, <= 90 s each after set-up.
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
bash scripts/setup.sh >/dev/null
ok=0
for i in $(seq 1 "$n"); do
  dir=$(mktemp -d /tmp/axbgate-demo.XXXXXX)
  start=$(date +%s.%N)
  out=$(AXBGATE_DEMO_SKIP_SETUP=1 AXBGATE_DATA_DIR="$dir" bash scripts/demo.sh --json 2>/dev/null)
  end=$(date +%s.%N)
  verdict=$(printf '%s' "$out" | .venv/bin/python -c 'import json,sys
g=json.load(sys.stdin); v=[x for x in g.get("verdicts",[]) if x["is_primary"]]
print((v[0]["verdict"] if v else g.get("status")) + " runs=" + str(len(g.get("runs",[]))))' 2>/dev/null || echo "error")
  secs=$(.venv/bin/python -c "print(round($end-$start,1))")
  case "$verdict" in accept*) ok=$((ok+1));; esac
  echo "run $i: $verdict wall ${secs}s"
  rm -rf "$dir"
done
echo "tally: $ok of $n decided accept (expected accept)"
