#!/usr/bin/env bash
# On the GPU machine (issue 27, docs/gpu-clock.md): does a clean process
# see another process's kernel still running (the idle probe), and can a
# clean process share device memory with a sandboxed one (cuMemCreate,
# a POSIX fd)? Usage from the repository root with bin/gpu/bwrap:
#   bash docs/results/2026-12-04-gpu-clock-probe/run.sh OUT
set -u
W=${1:?output directory}; mkdir -p "$W"
D=docs/results/2026-12-04-gpu-clock-probe
gcc -O2 -I/usr/local/cuda/include $D/probe.c -L/usr/local/cuda/lib64/stubs -lcuda -o /tmp/probe > "$W/build.txt" 2>&1 || { cat "$W/build.txt"; exit 1; }
P=/tmp/probe
{
echo "== idle GPU"; $P idle 2000
# Each busy process spins about 2 s; the probe starts 0.8 s after it (a
# process's context takes a few hundred ms) and its wall times are printed
# beside the spinner's, to show they overlap.
for spec in "20000 100000 1" "200000 10000 1" "2000000 1000 1" "2000000 1000 132" "50000000 40 1" "50000000 40 132"; do
  set -- $spec
  echo "== while another process spins $3 block(s) for $1 ns, $2 kernels back to back"
  $P spin $1 $2 $3 & sp=$!
  sleep 0.8
  $P idle 300
  wait $sp
done
echo "== idle again"; $P idle 2000
} > "$W/idle-probe.txt" 2>&1
{
echo "== share with a child in the same namespaces"; $P share -- $P import
echo "== share with a child in a bwrap sandbox (new pid, ipc, net, uts namespaces; /dev shown)"
$P share -- bin/gpu/bwrap --unshare-pid --unshare-ipc --unshare-net --unshare-uts --die-with-parent --ro-bind / / --dev-bind /dev /dev --proc /proc --tmpfs /tmp --ro-bind /tmp/probe /tmp/probe /tmp/probe import
} > "$W/share.txt" 2>&1
nvidia-smi -q -d COMPUTE 2>&1 | head -30 > "$W/compute-mode.txt"
nvidia-smi compute-policy -l >> "$W/compute-mode.txt" 2>&1
