#!/bin/bash
# Replay wall time of quick's prepared stage, protocol 3 (HEAD before) against protocol 4, ABAB.
P=/tmp/runs/q1/prepared
for i in 1 2; do
  for v in old new; do
    s=$(date +%s.%N)
    /tmp/tp-$v replay --prepared $P --output /tmp/runs/ab/r-$v-$i > /tmp/runs/ab/r-$v-$i.log 2>&1
    rc=$?
    e=$(date +%s.%N)
    echo "$v $i rc $rc wall $(echo "$e - $s" | bc) s"
  done
done
