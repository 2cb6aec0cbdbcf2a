#!/bin/bash
# The A/A cohort of docs/results/2026-12-03-aa (11 cpu-default cases,
# halide and torch-eager) captured, prepared and replayed twice by this
# tilepipe (the v1 freezer's keeper cgroup), each replay's novel samples
# dumped, and compared with the two protocol-4 replays of that A/A made
# before the keeper. Usage, after make build: run.sh OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:?usage: run.sh OUT_DIR}
mkdir "$out"
export TILEPIPE_ROUTES=$root/bin/routes
aa=$root/docs/results/2026-12-03-aa
"$root/bin/tilepipe" capture --cohort "$aa/cohort.json" --routes halide,torch-eager --output "$out/capture" 2>/dev/null
"$root/bin/tilepipe" prepare --capture "$out/capture" --output "$out/prepared" 2>/dev/null
for i in 1 2; do
  t0=$(date +%s.%N)
  "$root/bin/tilepipe" replay --prepared "$out/prepared" --output "$out/replay-$i" --rounds 2 --target 0 --samples 10 > "$out/replay-$i.md" 2>/dev/null || true
  echo "replay $i: $(echo "$(date +%s.%N) - $t0" | bc) s"
  (cd "$root" && go run ./docs/results/2026-12-03-novel/dump "$out/replay-$i") > "$out/replay-$i-novel.txt"
done
/usr/bin/python3 "$here/compare.py" "$aa/replay-02-p4-novel.txt" "$aa/replay-07-p4-novel.txt" "$out/replay-1-novel.txt" "$out/replay-2-novel.txt"
