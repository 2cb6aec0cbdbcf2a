#!/bin/bash
# Issue 13's registry evidence: a signed checkpoint of a small cohort
# pushed to Debian's docker-registry on a loopback port, shown by oras
# discover and skopeo, one stage copied alone with oras cp (in chain
# order), pulled back and audited with --trust. Usage, after make build,
# with oras on PATH (go install oras.land/oras/cmd/oras@v1.3.6) and skopeo
# (apt-get install skopeo):
#   docs/results/2026-12-01-registry/run.sh NEW_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:?usage: run.sh NEW_DIR}
tp=$root/bin/tilepipe
export TILEPIPE_ROUTES=$root/bin/routes DOCKER_CONFIG=$out/docker
mkdir "$out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s/registry\nhttp:\n  addr: 127.0.0.1:%s\n' "$out" "$port" > "$out/registry.yml"
docker-registry serve "$out/registry.yml" > "$out/registry.log" 2>&1 &
trap 'kill $!' EXIT
until curl -sf "http://127.0.0.1:$port/v2/" > /dev/null; do sleep 0.1; done
reg=127.0.0.1:$port/tilepipe/tiny
set -x
"$tp" key generate --output "$out/key"
"$tp" run --cohort "$here/cohort.json" --routes halide,openblas --baseline halide --target 0 --sign "$out/key" --output "$out/run" > "$out/run.log" 2>&1 || [ $? -eq 3 ]
"$tp" push "$out/run" "$reg"
oras discover --plain-http --format tree "$reg:capture"
(cd "$out/run" && skopeo inspect --raw oci:replay:replay | head -n 4)
(cd "$out/run" && oras cp --from-oci-layout prepared:prepared --to-plain-http "127.0.0.1:$port/single/prepared:prepared") || true
for s in capture prepared; do (cd "$out/run" && oras cp --from-oci-layout "$s:$s" --to-plain-http "127.0.0.1:$port/single/prepared:$s"); done
"$tp" pull "$reg" "$out/pulled"
"$tp" audit --capture "$out/pulled/capture" --prepared "$out/pulled/prepared" --replay "$out/pulled/replay" --trust "$out/key.pub" | tail -n 1
"$tp" audit --capture "$out/pulled/capture" --prepared "$out/pulled/prepared" --replay "$out/pulled/replay" | tail -n 1
