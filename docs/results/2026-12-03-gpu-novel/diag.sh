set -u
W=$1; mkdir -p $W
export TILEPIPE_ROUTES=$(pwd)/routes PATH=$(pwd)/bin/gpu:$PATH
echo '{"schema": 1, "rounds": 1, "cases": [{"op": "add", "dims": {"M": 2, "N": 64}, "seed": 201, "device": "cuda"}, {"op": "add", "dims": {"M": 64, "N": 1000}, "seed": 7, "device": "cuda"}]}' > $W/co.json
bin/tilepipe run --cohort $W/co.json --routes triton --baseline triton --samples 3 --timeout-s 40 --output $W/r > $W/r.out 2> $W/r.err &
bg=$!
for i in $(seq 16); do sleep 5
  for p in $(pgrep -f -- '--visit'); do echo "== $(date +%T) pid $p $(tr '\0' ' ' < /proc/$p/cmdline | cut -c1-120)"; grep -E 'State' /proc/$p/status; for t in /proc/$p/task/*; do echo "  task $(basename $t) $(cat $t/comm) $(grep State $t/status) wchan=$(cat $t/wchan)"; cat $t/stack 2>/dev/null | head -5 | sed 's/^/      /'; done; done
  for c in $(find /sys/fs/cgroup -maxdepth 4 -name 'tilepipe-*' 2>/dev/null); do echo "cg $c: $(tr '\n' ' ' < $c/cgroup.events) freeze=$(cat $c/cgroup.freeze 2>/dev/null) procs=$(tr '\n' ' ' < $c/cgroup.procs)"; done
done > $W/diag.txt 2>&1
wait $bg; echo "run exit $?"
tail -20 $W/r.err
python3 - $W/r/replay/replay.json <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for v in d["visits"]:
    print(v["index"], v["case"], v["route"], v["status"], v["reason"][:300], "calls", v.get("callsPerSample"), "fresh", v.get("freshSets"), "novel", (v.get("novel") or {}).get("calls"), "wall", v.get("wallNs"))
    print("  stderr", v.get("stderr"))
PY
for f in $(python3 -c "import json;d=json.load(open('$W/r/replay/replay.json'));print(' '.join(v['stderr'].split(':')[1] for v in d['visits']))"); do echo "--- stderr $f"; cat $W/r/replay/blobs/sha256/$f 2>/dev/null | tail -5; done
