#!/usr/bin/env bash
# Runs the 1xH200 benchmarks of issues 23, 26 and 27 back to back, detached from the device
# call that starts it (a device call is limited to 600 s; the batch takes ~25 min), so later
# calls only poll and collect. Each part writes to $BASE/<part>/ and its console to
# $BASE/<part>.log; $BASE/DONE appears at the end.
#   start:   setsid nohup bash benchmarks/gpu_batch_h200.sh > /tmp/gpu/batch.log 2>&1 < /dev/null &
#   collect: cp -r /tmp/gpu/. "$OUT"/
#   parts:   PARTS="decision_cost" (default: all three below)
# The batch first copies the working tree to $BASE/tree and runs from there: the device tool
# re-syncs the working tree at every call, which once replaced a script mid-batch.
set -uo pipefail
BASE=${BASE:-/tmp/gpu}
PARTS=" ${PARTS:-decision_cost integration checkpoint} "
mkdir -p "$BASE"
rm -rf "$BASE/tree" && cp -r . "$BASE/tree" && cd "$BASE/tree" || exit 1
step() {  # NAME SCRIPT ARGS...
  local name=$1; shift
  local t0=$(date +%s)
  echo "== $name start $(date -u +%FT%TZ)" | tee -a "$BASE/batch_progress.txt"
  OUT="$BASE/$name" bash "$@" > "$BASE/$name.log" 2>&1
  echo "== $name rc=$? wall=$(( $(date +%s) - t0 ))s" | tee -a "$BASE/batch_progress.txt"
}
case "$PARTS" in *" decision_cost "*)
  step decision_cost benchmarks/decision_cost_h200.sh ${DC_PARTS:-profile aa adamw slow1pct} ;; esac
case "$PARTS" in *" integration "*) step integration benchmarks/integration_h200.sh ckpt aa ;; esac
case "$PARTS" in *" checkpoint "*) step checkpoint benchmarks/checkpoint_h200.sh write smoke gate ;; esac
touch "$BASE/DONE"
