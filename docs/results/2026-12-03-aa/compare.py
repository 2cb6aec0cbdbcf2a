"""Reads the replays of run.sh and prints the protocol 4 / protocol 3 tables.

Per row (case, route): the median over the replays of each protocol of the
row's median per-op time; under protocol 3 that is its warm batch samples,
under protocol 4 its novel samples (the claim) and, beside them, its warm
batch samples (warmNs). P4/P3 is given for both. The rows of one replay
move together (a replay-level shift of several percent on this machine),
so each effect is estimated per replay: a replay's level is the geometric
mean over rows of its median divided by the row's geometric mean over the
replays compared; the ratio is that of the geometric means of the levels
of each protocol, with a 95% bootstrap interval that resamples replays
within each protocol. A row that failed in any replay is listed and left
out."""
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
failed, replays = [], []  # replays: (name, mode, {row: {"claim": ns, "warm": ns}})
walls = {"p3": [], "p4": []}
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
        warm = s.get("warmNs") or s["medianNs"]  # protocol 3: the claim is the warm figure
        meds[k] = {"claim": s["medianNs"], "warm": warm}
    replays.append((os.path.basename(d), mode, meds))
good = sorted(k for k in set().union(*(m.keys() for _, _, m in replays)) if all(k in m for _, _, m in replays))


def level_ratio(fig4, rows):
    """P4 (figure fig4) over P3 (its claim, the warm samples) by replay level."""
    vals = {k: [m[k]["claim"] if mode == "p3" else m[k][fig4] for _, mode, m in replays] for k in rows}
    gm = {k: geomean(v) for k, v in vals.items()}
    lv = {"p3": [], "p4": []}
    for _, mode, m in replays:
        lv[mode].append(geomean([(m[k]["claim"] if mode == "p3" else m[k][fig4]) / gm[k] for k in rows]))
    est = geomean(lv["p4"]) / geomean(lv["p3"])
    rng = random.Random(1)
    boots = sorted(geomean([rng.choice(lv["p4"]) for _ in lv["p4"]]) / geomean([rng.choice(lv["p3"]) for _ in lv["p3"]]) for _ in range(4000))
    return est, boots[100], boots[3899]


print("%d replays per protocol; each 2 rounds x 2 routes x %d cases, 10 samples of >= 20 ms per visit." % (
    sum(1 for _, m, _ in replays if m == "p4"), len({k[0] for k in good})))
print()
if failed:
    print("Rows that failed (left out):")
    for f in failed:
        print("- " + f)
    print()
print("| case | route | P3 (warm) | P4 novel (claim) | P4 warm | P4 novel / P3 | P4 warm / P3 |")
print("|---|---|---:|---:|---:|---:|---:|")
per_novel, per_warm = [], []
for k in good:
    p3 = median([m[k]["claim"] for _, mode, m in replays if mode == "p3"])
    n4 = median([m[k]["claim"] for _, mode, m in replays if mode == "p4"])
    w4 = median([m[k]["warm"] for _, mode, m in replays if mode == "p4"])
    per_novel.append(n4 / p3)
    per_warm.append(w4 / p3)
    print("| %s | %s | %.0f ns | %.0f ns | %.0f ns | %.3f | %.3f |" % (k[0], k[1], p3, n4, w4, n4 / p3, w4 / p3))
print()
for fig, name in (("warm", "P4 warm / P3 (the same kind of sample: the A/A)"), ("claim", "P4 novel / P3 (what the claim now is)")):
    for route in (None, "halide", "torch-eager"):
        rows = [k for k in good if route is None or k[1] == route]
        est, lo, hi = level_ratio(fig, rows)
        print("%s, %s: by replay level %.3f (95%% bootstrap %.3f - %.3f); per row geometric mean %.3f (range %.3f - %.3f)" % (
            name, route or "all rows", est, lo, hi,
            geomean([(per_warm if fig == "warm" else per_novel)[good.index(k)] for k in rows]),
            min((per_warm if fig == "warm" else per_novel)[good.index(k)] for k in rows),
            max((per_warm if fig == "warm" else per_novel)[good.index(k)] for k in rows)))
