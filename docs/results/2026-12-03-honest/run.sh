cd /work/main
export TILEPIPE_ROUTES=$PWD/bin/routes
for c in quick cpu-default; do
  t0=$(date +%s)
  bin/tilepipe run --cohort $c --routes halide,orc,openblas,torch-eager --output /tmp/dw/$c > /tmp/dw/$c.md 2> /tmp/dw/$c.err
  echo "$c: exit $? in $(( $(date +%s) - t0 )) s"
done
