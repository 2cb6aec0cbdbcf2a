# Per visit: the median excess of a novel sample over N warm calls, and the
# novel and warm medians per call, before (two replays) and after (two).
# Usage: compare.py BEFORE1 BEFORE2 AFTER1 AFTER2 (dump outputs)
import sys, statistics as st, collections
def load(paths):
    d=collections.defaultdict(list)
    for p in paths:
        for line in open(p):
            if line.startswith('visit'): continue
            f=line.split()
            if len(f)<7: continue
            name=f[0]+' '+f[1]
            d[name].append((int(f[2]),int(f[3]),int(f[4]),int(f[5]),int(f[6])))
    return d
old=load(sys.argv[1:3]); new=load(sys.argv[3:5])
print(f"{'visit':45s} {'N':>4s} {'excess before':>14s} {'excess after':>13s} {'novel before':>13s} {'novel after':>12s} {'warm b':>8s} {'warm a':>8s}")
for k in old:
    if k not in new: continue
    o=old[k]; n=new[k]
    med=lambda xs,i: st.median([x[i] for x in xs])
    print(f"{k:45s} {o[0][0]:4d} {med(o,4)/1e3:11.0f} µs {med(n,4)/1e3:10.0f} µs {med(o,1)/1e3:10.1f} µs {med(n,1)/1e3:9.1f} µs {med(o,2)/1e3:6.1f} {med(n,2)/1e3:6.1f}")
