package capture

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cpuRoute describes itself with no devices (the CPU alone) and, asked to
// build, leaves a mark: a CPU route must never be asked to build a case
// for the GPU, or it would build (and replay would time) a CPU kernel.
const cpuRoute = `#!/bin/sh
here=$(dirname "$0")
if [ "$1" = describe ]; then
  echo '{"protocol": 1, "name": "cpuonly", "kind": "object", "version": "1", "available": true, "reason": "", "ops": ["add"]}'
  exit 0
fi
touch "$here/asked"
exit 1
`

// TestDeviceNotBuilt: a case on cuda with a route that builds for the CPU
// alone is an unsupported row naming both devices, and the route is never
// asked to build it.
func TestDeviceNotBuilt(t *testing.T) {
	dir := t.TempDir()
	co := filepath.Join(dir, "cohort.json")
	must(t, os.WriteFile(co, []byte(`{"schema": 1, "cases": [{"op": "add", "dims": {"M": 2, "N": 3}, "seed": 7, "device": "cuda"}]}`), 0o644))
	route := filepath.Join(dir, "route")
	must(t, os.WriteFile(route, []byte(cpuRoute), 0o755))
	cfg := Config{Cohort: co, RouteExec: []string{route}, Output: filepath.Join(dir, "capture"), Threads: 1, Jobs: 1, BuildTimeout: time.Minute, NoSandbox: true}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Doc.Cases[0]
	if c.Case.ID != "add-2x3-cuda" {
		t.Errorf("case id %q, want add-2x3-cuda (the device in the default id)", c.Case.ID)
	}
	b := c.Builds[0]
	if want := "device: the case runs on cuda, route cpuonly builds for cpu"; b.Status != "unsupported" || b.Reason != want {
		t.Errorf("build = %s %q, want unsupported %q", b.Status, b.Reason, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "asked")); err == nil {
		t.Error("the CPU route was asked to build a cuda case")
	}
}

// TestDescribeDevices: a describe answer naming a device tilepipe does not
// know is refused.
func TestDescribeDevices(t *testing.T) {
	dir := t.TempDir()
	route := filepath.Join(dir, "route")
	must(t, os.WriteFile(route, []byte(strings.Replace(cpuRoute, `"ops": ["add"]`, `"ops": ["add"], "devices": ["tpu"]`, 1)), 0o755))
	_, err := Describe(context.Background(), route)
	if want := "route " + route + `: describe: devices: "tpu": want cpu or cuda`; err == nil || err.Error() != want {
		t.Errorf("Describe = %v, want %s", err, want)
	}
}
