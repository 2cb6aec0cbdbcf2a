"""Reads the replays of run.sh and prints the protocol 3 / protocol 2 table.

Per row (case, route): the median over the replays of each protocol of the
row's median per-op time, and P3/P2. The rows of one replay move together
(a replay-level shift of several percent on this machine), so the effect
of the protocol is estimated per replay: each replay's level is the
geometric mean over rows of its median divided by the row's geometric mean
over all replays; P3/P2 is the ratio of the geometric means of the levels
of each protocol, with a 95% bootstrap interval that resamples replays
within each protocol. A row that failed in any replay is listed and left
out of the levels."""
import glob, json, math, os, random, sys


def replay_doc(d):
    idx = json.load(open(os.path.join(d, "index.json")))
    man = json.load(open(os.path.join(d, "blobs/sha256", idx["manifests"][0]["digest"].split(":")[1])))
    for layer in man["layers"]:
        if layer.get("annotations", {}).get("org.opencontainers.image.title") == "tilepipe.json":
            return json.load(open(os.path.join(d, "blobs/sha256", layer["digest"].split(":")[1])))
    raise SystemExit("%s: no tilepipe.json layer" % d)


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


out = sys.argv[1]
rows, failed, per_replay = {}, [], []
for d in sorted(glob.glob(os.path.join(out, "replay-*"))):
    if not os.path.isdir(d):
        continue
    doc = replay_doc(d)
    mode = d.rsplit("-", 1)[1]
    meds = {}
    for s in doc["summary"]:
        k = (s["case"], s["route"])
        if s["status"] != "passed":
            failed.append("%s: %s/%s %s: %s" % (os.path.basename(d), s["case"], s["route"], s["status"], s.get("reason")))
            continue
        rows.setdefault(k, {"p2": [], "p3": []})[mode].append(s["medianNs"])
        meds[k] = s["medianNs"]
    per_replay.append((os.path.basename(d), mode, meds))
good = {k for k, r in rows.items() if all(k in m for _, _, m in per_replay)}
print("%d replays per protocol; each 2 rounds x 2 routes x %d cases, 10 samples of >= 20 ms per visit." % (
    sum(1 for _, m, _ in per_replay if m == "p3"), len({k[0] for k in rows})))
print()
if failed:
    print("Rows that failed (left out):")
    for f in failed:
        print("- " + f)
    print()
print("| case | route | median per op, protocol 2 | protocol 3 | P3 / P2 |")
print("|---|---|---:|---:|---:|")
ratios = []
for k in sorted(good):
    p2, p3 = median(rows[k]["p2"]), median(rows[k]["p3"])
    ratios.append(p3 / p2)
    print("| %s | %s | %.0f ns | %.0f ns | %.3f |" % (k[0], k[1], p2, p3, p3 / p2))
print()
grand = {k: geomean([m[k] for _, _, m in per_replay]) for k in good}
levels = {"p2": [], "p3": []}
print("| replay | level (geometric mean of row median / row geometric mean over all replays) |")
print("|---|---:|")
for name, mode, m in per_replay:
    lvl = geomean([m[k] / grand[k] for k in good])
    levels[mode].append(lvl)
    print("| %s | %.4f |" % (name, lvl))
print()
rng = random.Random(1)
boots = sorted(geomean([rng.choice(levels["p3"]) for _ in levels["p3"]]) /
               geomean([rng.choice(levels["p2"]) for _ in levels["p2"]]) for _ in range(2000))
print("P3 / P2, by replay level: %.4f (95%% bootstrap interval resampling replays %.4f - %.4f)" % (
    geomean(levels["p3"]) / geomean(levels["p2"]), boots[50], boots[1949]))
print("P3 / P2, per row (median over replays): geometric mean %.4f, per row %.3f - %.3f" % (
    geomean(ratios), min(ratios), max(ratios)))
for route in sorted({k[1] for k in good}):
    rs = [median(rows[k]["p3"]) / median(rows[k]["p2"]) for k in sorted(good) if k[1] == route]
    print("P3 / P2 for %s: geometric mean %.4f over %d rows (%.3f - %.3f)" % (route, geomean(rs), len(rs), min(rs), max(rs)))
