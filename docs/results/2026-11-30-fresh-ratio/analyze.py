"""Reads a replay stage and prints, per (case, route), the fresh samples
against the warm ones: the largest fresh/warm time-per-call ratio over the
row's visits, and the largest share of the memoisation bound a visit used
(fresh / (5 x warm + cold allowance)); then every failed visit.

Usage: /usr/bin/python3 analyze.py REPLAY_DIR"""
import json, os, sys


def replay_doc(d):
    idx = json.load(open(os.path.join(d, "index.json")))
    man = json.load(open(os.path.join(d, "blobs/sha256", idx["manifests"][0]["digest"].split(":")[1])))
    for layer in man["layers"]:
        if layer.get("annotations", {}).get("org.opencontainers.image.title") == "tilepipe.json":
            return json.load(open(os.path.join(d, "blobs/sha256", layer["digest"].split(":")[1])))
    raise SystemExit("%s: no tilepipe.json layer" % d)


doc = replay_doc(sys.argv[1])
rows, failed = {}, []
for v in doc["visits"]:
    k = (v["case"], v["route"])
    if v["status"] != "passed":
        failed.append(v)
    if not v.get("freshNs"):
        continue
    r = rows.setdefault(k, {"ratio": 0, "share": 0, "fresh": 0, "warm": 0, "bound": 0, "visits": 0})
    ratio, share = v["freshNs"] / v["warmNs"], v["freshNs"] / v["freshBoundNs"]
    r["visits"] += 1
    if share > r["share"]:
        r.update(share=share, fresh=v["freshNs"], warm=v["warmNs"], bound=v["freshBoundNs"])
    r["ratio"] = max(r["ratio"], ratio)
bw = [s["coldBandwidth"] for s in doc["sessions"]]
print("%d visits, %d failed; memory bandwidth (one thread, 256 MiB) %s GB/s" % (
    len(doc["visits"]), len(failed), ", ".join("%.1f" % (b / 1e9) for b in bw)))
print()
print("| case | route | visits | max fresh/warm | max share of the bound | that visit: fresh, warm, bound per call |")
print("|---|---|---:|---:|---:|---|")
for (c, rt), r in sorted(rows.items(), key=lambda kv: -kv[1]["share"]):
    print("| %s | %s | %d | %.2f | %.2f | %.0f ns, %.0f ns, %.0f ns |" % (c, rt, r["visits"], r["ratio"], r["share"], r["fresh"], r["warm"], r["bound"]))
print()
ratios = sorted(r["ratio"] for r in rows.values())
shares = sorted(r["share"] for r in rows.values())
print("rows: %d; fresh/warm: median %.2f, max %.2f; share of the bound: median %.2f, max %.2f" % (
    len(rows), ratios[len(ratios) // 2], ratios[-1], shares[len(shares) // 2], shares[-1]))
if failed:
    print()
    print("Failed visits:")
    for v in failed:
        print("- visit %d (round %d) %s %s: %s" % (v["index"], v["round"] + 1, v["case"], v["route"], v["reason"]))
