#!/usr/bin/env bash
# On the GPU machine: bash probe.sh OUT. For each (op, mode, style): build
# in a fresh directory, copy it elsewhere, replay there in a new process.
set -u
W=${1:?output}; H=$(cd "$(dirname "$0")" && pwd)
PY=$(command -v python3); [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
export PYTHONUNBUFFERED=1
for spec in "add max-autotune mut" "add max-autotune pure" "add default mut" "add max-autotune-no-cudagraphs mut" \
            "addbig max-autotune pure" "addbig max-autotune-no-cudagraphs mut" "softmax max-autotune pure" \
            "softmax max-autotune-no-cudagraphs mut" "gemm max-autotune pure" "gemm max-autotune-no-cudagraphs mut"; do
  set -- $spec; d=/tmp/tc/$1-$2-$3
  rm -rf "$d" "$d.copy"; mkdir -p "$d"
  timeout 240 $PY "$H/probe.py" build "$d" "$@" >> "$W/probe.jsonl" 2>> "$W/probe.err" || echo "{\"cmd\":\"build\",\"spec\":\"$spec\",\"exit\":$?}" >> "$W/probe.jsonl"
  cp -a "$d" "$d.copy"
  timeout 120 $PY "$H/probe.py" replay "$d.copy" "$@" >> "$W/probe.jsonl" 2>> "$W/probe.err" || echo "{\"cmd\":\"replay\",\"spec\":\"$spec\",\"exit\":$?}" >> "$W/probe.jsonl"
  echo "$spec done $(date +%T)" >&2
done
