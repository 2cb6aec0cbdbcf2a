"""Reads the replays of run.sh and prints the A/A table.

Per row (case, route): the median over the replays of each mode of the
row's median per-op time, with the sandbox (S) and without (N), and S/N.

The rows of one replay move together (a replay-level shift of several
percent on this machine), so the effect of the sandbox is estimated per
replay: each replay's level is the geometric mean over rows of its median
divided by the row's mean over all replays; S/N is the ratio of the
geometric means of the levels of each mode, with a 95% bootstrap interval
that resamples replays within each mode. Beside it, halide-b/halide within
each mode: the same objects under two names, the measurement's own noise."""
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


def interval(xs, seed=1, n=2000):
    rng = random.Random(seed)
    g = sorted(geomean([rng.choice(xs) for _ in xs]) for _ in range(n))
    return g[int(0.025 * n)], g[int(0.975 * n) - 1]


out = sys.argv[1]
rows, channel, replays = {}, [], {"sandbox": 0, "none": 0}
per_replay = []  # (name, mode, {row: median})
for d in sorted(glob.glob(os.path.join(out, "replay-*"))):
    if not os.path.isdir(d):
        continue
    doc = replay_doc(d)
    mode = d.rsplit("-", 1)[1]
    replays[mode] += 1
    meds = {}
    for s in doc["summary"]:
        if s["status"] != "passed":
            raise SystemExit("%s: %s/%s %s: %s" % (d, s["case"], s["route"], s["status"], s.get("reason")))
        rows.setdefault((s["case"], s["route"]), {"sandbox": [], "none": []})[mode].append(s["medianNs"])
        meds[(s["case"], s["route"])] = s["medianNs"]
        channel.append(s["channelNs"])
    per_replay.append((os.path.basename(d), mode, meds))
print("%d replays with the sandbox, %d without; each 2 rounds x 2 routes x 11 cases, 10 samples of >= 20 ms per visit." % (replays["sandbox"], replays["none"]))
print()
print("| case | route | median per op, sandbox | no sandbox | sandbox / none |")
print("|---|---|---:|---:|---:|")
ratios, aa = [], {"sandbox": [], "none": []}
for (c, rt), r in sorted(rows.items()):
    s, n = median(r["sandbox"]), median(r["none"])
    ratios.append(s / n)
    print("| %s | %s | %.0f ns | %.0f ns | %.3f |" % (c, rt, s, n, s / n))
    if rt == "halide-b":
        for mode in aa:
            aa[mode].append(median(r[mode]) / median(rows[(c, "halide")][mode]))
print()
grand = {k: geomean([m[k] for _, _, m in per_replay]) for k in rows}
levels = {"sandbox": [], "none": []}
print("| replay | level (geometric mean of row median / row mean over all replays) |")
print("|---|---:|")
for name, mode, m in per_replay:
    lvl = geomean([m[k] / grand[k] for k in m])
    levels[mode].append(lvl)
    print("| %s | %.4f |" % (name, lvl))
print()
rng = random.Random(1)
boots = sorted(geomean([rng.choice(levels["sandbox"]) for _ in levels["sandbox"]]) /
               geomean([rng.choice(levels["none"]) for _ in levels["none"]]) for _ in range(2000))
print("sandbox / none, by replay level: %.4f (95%% bootstrap interval resampling replays %.4f - %.4f)" % (
    geomean(levels["sandbox"]) / geomean(levels["none"]), boots[50], boots[1949]))
print("sandbox / none, per row (median over replays): geometric mean %.4f, per row %.3f - %.3f" % (
    geomean(ratios), min(ratios), max(ratios)))
for mode, xs in aa.items():
    lo, hi = interval(xs)
    print("A/A halide-b / halide (%s), geometric mean over %d cases: %.4f (%.4f - %.4f); per case %.3f - %.3f" % (
        mode, len(xs), geomean(xs), lo, hi, min(xs), max(xs)))
print("channel (median empty sample per row and replay): median %.1f us, max %.1f us" % (median(channel) / 1000, max(channel) / 1000))
