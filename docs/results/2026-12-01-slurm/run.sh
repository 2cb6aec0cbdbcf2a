#!/usr/bin/env bash
# quick, replayed as 1 and as 4 shards on a real single-node Slurm
# (internal/tools/minislurm: munged, slurmctld and slurmd of Debian's
# slurm-wlm 22.05, a slurm.conf for this machine), each merged and audited
# by the job after its array. Prints the wall times and writes summary.md.
#
#   make build && docs/results/2026-12-01-slurm/run.sh NEW_DIR
set -euo pipefail
out=${1:?usage: run.sh NEW_DIR}
root=$(cd "$(dirname "$0")/../../.." && pwd)
tp=$root/bin/tilepipe
export TILEPIPE_ROUTES=$root/bin/routes
mkdir "$out"
out=$(cd "$out" && pwd)
(cd "$root" && go build -o "$out/minislurm" ./internal/tools/minislurm)
"$out/minislurm" > "$out/slurm.env" 2> "$out/minislurm.log" &
ms=$!
trap 'kill $ms 2>/dev/null; wait $ms 2>/dev/null || true' EXIT
for _ in $(seq 120); do [ -s "$out/slurm.env" ] && break; sleep 0.5; done
. "$out/slurm.env"
sinfo
$tp capture --cohort quick --output "$out/capture" 2> "$out/capture.log" || [ $? -eq 3 ]  # 3: unsupported rows, kept
$tp prepare --capture "$out/capture" --output "$out/prepared" 2> "$out/prepare.log" || [ $? -eq 3 ]
for n in 1 4; do
  t0=$(date +%s.%N)
  $tp slurm submit --prepared "$out/prepared" --shards $n --output "$out/job$n" --threads 2 --rounds 2 --target 0 | tee "$out/job$n.submit"
  until [ -z "$(squeue -h -o %i)" ]; do sleep 2; done
  [ -e "$out/job$n/audit.json" ] || { $tp slurm status "$out/job$n"; exit 1; }
  t1=$(date +%s.%N)
  echo "job$n: $(python3 -c "print(f'{$t1-$t0:.1f}')") s from submit to the audit" | tee "$out/job$n.wall"
  $tp slurm status "$out/job$n" | tee "$out/job$n.status"
done
# The control: the same prepared stage replayed once more, whole, without
# Slurm, to show how far two replays of one machine differ row by row.
$tp replay --prepared "$out/prepared" --output "$out/control" --threads 2 --rounds 2 --target 0 > "$out/control.out" 2> "$out/control.err" || true
python3 - "$out" <<'PY' | tee "$out/summary.md"
import json, sys, os, datetime
out = sys.argv[1]
def receipt(stage):
    # the stage's receipt: the manifest's config blob
    idx = json.load(open(os.path.join(stage, "index.json")))
    m = json.load(open(os.path.join(stage, "blobs/sha256", idx["manifests"][0]["digest"][7:])))
    c = open(os.path.join(stage, "blobs/sha256", m["config"]["digest"][7:])).read()
    st = json.loads(c)
    if "payload" in st:  # a DSSE envelope
        import base64
        st = json.loads(base64.b64decode(st["payload"]))
    return st["predicate"], m
def doc(stage):
    p, m = receipt(stage)
    for l in m["layers"]:
        if l["annotations"]["org.opencontainers.image.title"] == "tilepipe.json":
            return json.load(open(os.path.join(stage, "blobs/sha256", l["digest"][7:])))
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
print("| job | shard | cases | visits | replay time |\n|---|---|---:|---:|---:|")
rows = {}
for n in (1, 4):
    job = os.path.join(out, f"job{n}")
    for i in range(n):
        sd = os.path.join(job, "shards", str(i))
        p, _ = receipt(sd)
        d = doc(sd)
        print(f"| {n} shards | {i}/{n} | {len(d['cases'])} | {len(d['visits'])} | {(t(p['finishedOn'])-t(p['startedOn'])).total_seconds():.1f} s |")
    p, _ = receipt(os.path.join(job, "merged"))
    a = json.load(open(os.path.join(job, "audit.json")))["predicate"]
    print(f"| {n} shards | merge | | | {(t(p['finishedOn'])-t(p['startedOn'])).total_seconds():.1f} s |")
    print(f"| {n} shards | audit: {a['verdict']}, {a['claims']['supported']} of {a['claims']['supported']+a['claims']['unsupported']} claims | | | {(t(a['finishedOn'])-t(a['startedOn'])).total_seconds():.1f} s |")
    rows[n] = {(s["case"], s["route"]): s for s in doc(os.path.join(job, "merged"))["summary"]}
print("\nMerged medians, 4 shards over 1 shard (same prepared stage, two replays):\n")
print("| case | route | 1 shard | 4 shards | ratio |\n|---|---|---:|---:|---:|")
rs = []
for k, s1 in rows[1].items():
    s4 = rows[4][k]
    if s1["status"] == "passed" and s4["status"] == "passed":
        r = s4["medianNs"] / s1["medianNs"]
        rs.append(r)
        print(f"| {k[0]} | {k[1]} | {s1['medianNs']/1e3:.2f} µs | {s4['medianNs']/1e3:.2f} µs | {r:.3f} |")
rs.sort()
print(f"\n{len(rs)} rows: median ratio {rs[len(rs)//2]:.3f}, range {rs[0]:.3f} – {rs[-1]:.3f}")
ctl = {(s["case"], s["route"]): s for s in doc(os.path.join(out, "control"))["summary"]}
cs = sorted(ctl[k]["medianNs"] / s1["medianNs"] for k, s1 in rows[1].items() if s1["status"] == "passed" and ctl[k]["status"] == "passed")
print(f"control, a whole replay without Slurm over the 1-shard job: {len(cs)} rows, median ratio {cs[len(cs)//2]:.3f}, range {cs[0]:.3f} – {cs[-1]:.3f}")
iq = lambda v: (v[len(v)//4], v[3*len(v)//4])
print(f"middle half of the rows: 4 shards/1 shard {iq(rs)[0]:.3f} – {iq(rs)[1]:.3f}; control/1 shard {iq(cs)[0]:.3f} – {iq(cs)[1]:.3f}")
PY
