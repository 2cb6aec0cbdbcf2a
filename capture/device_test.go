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
	// A cubin runs on the GPU alone.
	must(t, os.WriteFile(route, []byte(strings.Replace(cpuRoute, `"kind": "object"`, `"kind": "cubin"`, 1)), 0o755))
	_, err = Describe(context.Background(), route)
	if want := "route " + route + ": describe: kind cubin: devices [], want [cuda] (a cubin runs on the GPU alone)"; err == nil || err.Error() != want {
		t.Errorf("Describe(cubin for the CPU) = %v, want %s", err, want)
	}
}

// cubinRoute is a cubin route that hands over the files in SRC (the PTX
// Triton 3.6 emitted for an add on the H200, a manifest and stand-in
// cubin bytes, which capture stores but does not read).
const cubinRoute = `#!/bin/sh
if [ "$1" = describe ]; then
  echo '{"protocol": 1, "name": "cubes", "kind": "cubin", "version": "1", "available": true, "reason": "", "ops": ["add"], "devices": ["cuda"]}'
  exit 0
fi
for a; do case "$a" in --workdir=*) w="${a#--workdir=}";; esac; done
prev=""; for a; do [ "$prev" = "--workdir" ] && w="$a"; prev="$a"; done
cp "SRC"/* "$w"/
echo '{"protocol": 1, "status": "built", "kind": "cubin", "files": [{"path": "add.cubin", "role": "cubin"}, {"path": "add.ptx", "role": "ptx"}, {"path": "launch.json", "role": "manifest"}]}'
`

// TestCubinBuild: capture checks a cubin build's launch manifest against
// the case and the PTX entry; a manifest that disagrees with either is a
// failed row naming the field, and prepare leaves a checked cubin
// unsupported until the CUDA timer exists.
func TestCubinBuild(t *testing.T) {
	ptx, err := os.ReadFile("../internal/launch/testdata/triton-add-sm90.ptx")
	must(t, err)
	manifest := `{"kernel": "add_kernel", "arch": "sm_90", "grid": [977, 1, 1], "block": [128, 1, 1], "cluster": [1, 1, 1], "sharedBytes": 0,
 "params": [{"kind": "tensor", "tensor": "A", "align": 16}, {"kind": "tensor", "tensor": "B", "align": 16}, {"kind": "tensor", "tensor": "C", "align": 16},
  {"kind": "i32", "value": 1000000}, {"kind": "scratch"}, {"kind": "scratch"}],
 "scratch": [{"bytes": 0, "align": 1}, {"bytes": 0, "align": 1}], "ptxas": ["-lineinfo", "-v"]}`
	for _, tc := range []struct{ name, manifest, want string }{
		{"matches", manifest, ""},
		{"a tensor not in the case", strings.Replace(manifest, `"tensor": "C"`, `"tensor": "D"`, 1),
			`route cubes build: launch.json: launch manifest: params[2]: tensor "D" is not in the case's signature`},
		{"n where the entry has a pointer", strings.Replace(manifest, `{"kind": "tensor", "tensor": "A", "align": 16}, {"kind": "tensor", "tensor": "B", "align": 16}, {"kind": "tensor", "tensor": "C", "align": 16},
  {"kind": "i32", "value": 1000000}`, `{"kind": "i32", "value": 1000000}, {"kind": "tensor", "tensor": "A", "align": 16}, {"kind": "tensor", "tensor": "B", "align": 16}, {"kind": "tensor", "tensor": "C", "align": 16}`, 1),
			"route cubes build: launch.json against add.ptx: launch manifest: params[0]: kind i32, the PTX entry passes .u64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			must(t, os.Mkdir(src, 0o755))
			must(t, os.WriteFile(filepath.Join(src, "add.ptx"), ptx, 0o644))
			must(t, os.WriteFile(filepath.Join(src, "add.cubin"), []byte("stand-in cubin"), 0o644))
			must(t, os.WriteFile(filepath.Join(src, "launch.json"), []byte(tc.manifest), 0o644))
			route := filepath.Join(dir, "route")
			must(t, os.WriteFile(route, []byte(strings.ReplaceAll(cubinRoute, "SRC", src)), 0o755))
			co := filepath.Join(dir, "cohort.json")
			must(t, os.WriteFile(co, []byte(`{"schema": 1, "cases": [{"op": "add", "dims": {"M": 1000, "N": 1000}, "seed": 7, "device": "cuda"}]}`), 0o644))
			cfg := Config{Cohort: co, RouteExec: []string{route}, Output: filepath.Join(dir, "capture"), Threads: 1, Jobs: 1, BuildTimeout: time.Minute, NoSandbox: true}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			b := res.Doc.Cases[0].Builds[0]
			switch {
			case tc.want == "" && b.Status != "built":
				t.Errorf("build = %s %q, want built", b.Status, b.Reason)
			case tc.want != "" && (b.Status != "failed" || b.Reason != tc.want):
				t.Errorf("build = %s %q\nwant failed %q", b.Status, b.Reason, tc.want)
			}
		})
	}
}
