#!/usr/bin/env bash
# On the GPU machine (issue 27, docs/gpu-clock.md), the stager's open
# questions: does a probe see work queued behind a device-side wait; what
# does a probe pay just after another context ran; what does a fresh
# mapping of exported memory cost; can torch use such memory? Usage from
# the repository root with bin/gpu/bwrap:
#   bash docs/results/2026-12-04-gpu-clock-probe/run2.sh OUT
set -u
W=${1:?output directory}; mkdir -p "$W"
D=docs/results/2026-12-04-gpu-clock-probe
PY=$(command -v python3); [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
gcc -O2 -I/usr/local/cuda/include $D/probe.c -L/usr/local/cuda/lib64/stubs -lcuda -o /tmp/probe > "$W/build2.txt" 2>&1 || { cat "$W/build2.txt"; exit 1; }
P=/tmp/probe
{
echo "== idle GPU"; $P idle 1000
for spec in "2000 0" "2000 1" "2000 1000"; do
  set -- $spec
  echo "== while another process's stream waits on a device flag for $1 ms, $2 kernels queued behind the wait"
  $P wait $1 $2 & sp=$!
  sleep 0.8
  $P idle 300
  wait $sp
done
for gap in 100 1000 10000; do
  echo "== while another process runs kernels of 10 us, each synchronised, $gap us apart"
  $P switch $((2000000 / (gap + 30))) $gap & sp=$!
  sleep 0.8
  $P idle 300
  wait $sp
done
} > "$W/queue-probe.txt" 2>&1
{
for mb in 2 64 256; do $P map $mb 50; done
} > "$W/map.txt" 2>&1
{
echo "== torch uses memory a clean process exported (same namespaces)"; $P share -- $PY $D/torch_import.py
echo "== the same in a bwrap sandbox (new pid, ipc, net, uts namespaces)"
$P share -- bin/gpu/bwrap --unshare-pid --unshare-ipc --unshare-net --unshare-uts --die-with-parent --ro-bind / / --dev-bind /dev /dev --proc /proc --tmpfs /tmp --ro-bind /tmp/probe /tmp/probe $PY $D/torch_import.py
} > "$W/torch-share.txt" 2>&1
