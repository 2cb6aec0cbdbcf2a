#!/usr/bin/env python3
"""Each GPU novel row's stage in a replay exported by `tilepipe export`:
the median over its novel samples of replay's span beyond the timer's
number (total_ns - timer_ns), the median calls a sample (N), the median
novel time per call, and the stage's share of a sample's time. The same
figure replay now records as a summary's stageNs (docs/gpu-clock.md).

    tilepipe export --replay DIR/replay --output EXP
    python3 docs/results/2026-12-07-gpu-stage/stage.py EXP/samples.csv [BASELINE]

The last column is the stages' factor in a row's ratio against BASELINE
(torch-eager unless given): (1 - the baseline's share) / (1 - the row's),
the factor by which the stages alone move the published ratio.
"""
import collections
import csv
import statistics as st
import sys

stage, per, calls, warm = (collections.defaultdict(list) for _ in range(4))
for r in csv.DictReader(open(sys.argv[1])):
    k = (r["case"], r["route"])
    if r["kind"] == "batch" and r["batch_per_op_ns"]:
        warm[k].append(float(r["batch_per_op_ns"]))
    if r["kind"] != "novel" or r["clock"] != "replay" or not r["timer_ns"] or int(r["timer_ns"]) <= 0:
        continue
    stage[k].append(int(r["total_ns"]) - int(r["timer_ns"]))
    per[k].append(int(r["total_ns"]) / int(r["calls"]))
    calls[k].append(int(r["calls"]))
share = {k: min(1, st.median(stage[k]) / (st.median(calls[k]) * st.median(per[k]))) for k in stage}
base = sys.argv[2] if len(sys.argv) > 2 else "torch-eager"
print("| case | route | N | stage | novel per call | warm per call | stage share | stages' factor vs %s |" % base)
print("|---|---|---:|---:|---:|---:|---:|---:|")
for k in stage:
    s, n, m = st.median(stage[k]), st.median(calls[k]), st.median(per[k])
    w = "%.2f µs" % (st.median(warm[k]) / 1e3) if warm[k] else "-"
    b = (k[0], base)
    f = "%.3f" % ((1 - share[b]) / (1 - share[k])) if b in share and k != b and share[k] < 1 else "-"
    print("| %s | %s | %d | %.0f µs | %.2f µs | %s | %.1f%% | %s |" % (k[0], k[1], n, s / 1e3, m / 1e3, w, 100 * share[k], f))
