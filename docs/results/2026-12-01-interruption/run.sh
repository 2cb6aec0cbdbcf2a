#!/usr/bin/env bash
# Interruption evidence (issue 10): a tiny cohort with the halide and
# torch-eager routes, sandboxed, on this 2-core machine. Kills replay at
# every kill point (TILEPIPE_CRASH_AT), resumes, audits; interrupts replay
# and capture with SIGINT and SIGTERM; starts a second writer.
# Usage: docs/results/2026-12-01-interruption/run.sh WORKDIR (from the repo root, after make build)
set -u
TP=$(pwd)/bin/tilepipe
W=${1:?work directory}
mkdir -p "$W" && cd "$W" || exit 1
cat > tiny.json <<'JSON'
{"schema": 1, "name": "tiny", "cases": [
 {"op": "add", "dims": {"M": 64, "N": 256}, "seed": 3},
 {"op": "gemm", "dims": {"M": 32, "N": 32, "K": 32}, "seed": 4}]}
JSON
export TILEPIPE_ROUTES=${TILEPIPE_ROUTES:-$(dirname "$TP")/routes}
$TP capture --cohort tiny.json --routes halide,torch-eager --output cap 2>/dev/null | tail -n 1
$TP prepare --capture cap --output prep 2>/dev/null | tail -n 1
R="--prepared prep --rounds 2 --samples 3 --singles 2"
echo
echo "## kill -9 at every point, then --resume, then audit"
echo "| kill point | killed (exit) | resume (exit) | audit (exit) | journal lines |"
echo "|---|---|---|---|---|"
for cp in plan:1 $(seq -f journal:%g 1 13) finish:1 commit:1; do
  rm -rf k
  (TILEPIPE_CRASH_AT=$cp exec $TP replay $R --output k >/dev/null 2>&1); a=$?
  $TP replay $R --output k --resume >/dev/null 2>k.err; b=$?
  $TP audit --capture cap --prepared prep --replay k >/dev/null 2>&1; c=$?
  note=""; [ $b != 0 ] && note=" ($(tail -n 1 k.err | sed 's/.*: stage [^ ]* //'))"
  echo "| $cp | $a | $b$note | $c | $(wc -l < k/journal.jsonl) |"
done
echo
for sig in INT TERM; do
  echo "## SIG$sig during replay"
  rm -rf s
  $TP replay $R --output s >/dev/null 2>s.err & p=$!
  while n=$(grep -c '"visit":' s/journal.jsonl 2>/dev/null); [ "${n:-0}" -lt 3 ]; do sleep 0.05; done
  kill -$sig $p; wait $p; echo "exit $?"; tail -n 1 s.err
  echo "journaled visits: $(grep -c '"visit":' s/journal.jsonl), failed among them: $(grep '"visit":' s/journal.jsonl | grep -vc '"status":"passed"')"
  $TP replay $R --output s --resume >/dev/null 2>&1; echo "resume exit $?"
  $TP audit --capture cap --prepared prep --replay s 2>&1 | tail -n 1
  echo
done
echo "## a second writer"
rm -rf w
$TP replay $R --output w >/dev/null 2>&1 & p=$!
while n=$(grep -c '"visit":' w/journal.jsonl 2>/dev/null); [ "${n:-0}" -lt 1 ]; do sleep 0.05; done
$TP replay $R --output w --resume 2>&1 | tail -n 1 | sed 's/(.*), since/(...), since/'
kill -9 $p; wait $p 2>/dev/null
$TP replay $R --output w --resume >/dev/null 2>w.err; echo "resume after kill -9: exit $?"; grep -h "stopped the timer\|removed" w.err
$TP audit --capture cap --prepared prep --replay w 2>&1 | tail -n 1
echo
echo "## SIGTERM during capture"
rm -rf c2
$TP capture --cohort tiny.json --routes halide,torch-eager --output c2 >/dev/null 2>c2.err & p=$!
sleep 3; kill -TERM $p; wait $p; echo "exit $?"; tail -n 1 c2.err; ls -d c2 2>&1 | sed 's/^/ls: /'
