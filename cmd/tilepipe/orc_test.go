package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
)

// needRoutes skips the test unless the named routes are built under
// $TILEPIPE_ROUTES (which make test sets), or fails it with
// TILEPIPE_REQUIRE_ROUTES=1.
func needRoutes(t *testing.T, names ...string) {
	t.Helper()
	dir := os.Getenv("TILEPIPE_ROUTES")
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n, "route")); dir == "" || err != nil {
			if os.Getenv("TILEPIPE_REQUIRE_ROUTES") == "1" {
				t.Fatalf("route %s not built in TILEPIPE_ROUTES=%q with TILEPIPE_REQUIRE_ROUTES=1", n, dir)
			}
			t.Skipf("route %s not built (TILEPIPE_ROUTES=%q; make build)", n, dir)
		}
	}
}

const add3x7 = `{"op": "add", "dims": {"M": 3, "N": 7}, "seed": 3}`

// addABI writes the ABI file of routes/orc/testdata/add*.ll.
func addABI(t *testing.T, symbol string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "abi.json")
	abi := `{"symbol": "` + symbol + `", "op": "add", "dims": {"M": 3, "N": 7}, "dtype": "f32", "params": [
  {"name": "A", "role": "input", "dtype": "f32", "shape": [3, 7]},
  {"name": "B", "role": "input", "dtype": "f32", "shape": [3, 7]},
  {"name": "C", "role": "output", "dtype": "f32", "shape": [3, 7]}]}`
	if err := os.WriteFile(p, []byte(abi), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "routes", "orc", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func findBuild(t *testing.T, doc artifacts.CaptureDoc, caseID, route string) artifacts.Build {
	t.Helper()
	for _, c := range doc.Cases {
		for _, b := range c.Builds {
			if c.Case.ID == caseID && b.Route == route {
				return b
			}
		}
	}
	t.Fatalf("capture has no build of %s by %s", caseID, route)
	return artifacts.Build{}
}

// TestOrcHalideIR runs halide and orc (the JIT's object from Halide's IR of
// the same pipeline) through every stage, then flips one byte of the
// captured ORC object and expects prepare to refuse it.
func TestOrcHalideIR(t *testing.T) {
	long(t)
	needRoutes(t, "halide", "orc")
	dir := filepath.Join(t.TempDir(), "run")
	code, out, errs := tp(t, append([]string{"run", "--cohort", tinyCohort(t, gemm16+", "+add3x7), "--routes", "halide,orc",
		"--baseline", "halide", "--rounds", "2", "--output", dir}, fast...)...)
	if code != exitOK {
		t.Fatalf("run = exit %d\n%s%s", code, out, errs)
	}
	doc := readCapture(t, filepath.Join(dir, "capture"))
	for _, id := range []string{"gemm-16x16x16", "add-3x7"} {
		b := findBuild(t, doc, id, "orc")
		if b.Status != artifacts.StatusBuilt || b.Validation == nil || !b.Validation.Pass {
			t.Errorf("orc build of %s = %s %q, validation %+v; want built and validated", id, b.Status, b.Reason, b.Validation)
		}
		var objs []string
		for _, f := range b.Files {
			if f.Role == "object" {
				objs = append(objs, f.Path)
			}
		}
		if strings.Join(objs, " ") != "kernel.orc.o entry.orc.o" {
			t.Errorf("orc objects of %s = %v, want kernel.orc.o entry.orc.o", id, objs)
		}
		if len(b.RequiresCPU) == 0 {
			t.Errorf("orc build of %s records no requires_cpu", id)
		}
	}
	passed := 0
	for _, v := range readReplay(t, filepath.Join(dir, "replay")).Visits {
		if v.Route == "orc" && v.Status == artifacts.StatusPassed {
			passed++
		}
	}
	if passed != 4 {
		t.Errorf("replay passed %d orc visits, want 4 (2 cases, 2 rounds):\n%s", passed, out)
	}

	forged := copyRun(t, dir)
	title := "cases/add-3x7/orc/kernel.orc.o"
	flipByte(t, layerPath(t, filepath.Join(forged, "capture"), artifacts.CaptureType, title))
	code, _, errs = tp(t, "prepare", "--capture", filepath.Join(forged, "capture"), "--output", filepath.Join(forged, "prepared2"))
	if code != exitFailure || !strings.Contains(errs, "blob "+title+" (") || !strings.Contains(errs, "digest mismatch") {
		t.Errorf("prepare after a one-byte change to the ORC object = exit %d, stderr %q; want exit 1 naming %s and a digest mismatch", code, errs, title)
	}
}

// TestOrcExternalIR captures external IR: a correct add runs through every
// stage under its own entry name (prepare links it with --defsym), a wrong
// one fails its validation run at capture, and an ABI naming a symbol the
// IR lacks fails the build.
func TestOrcExternalIR(t *testing.T) {
	long(t)
	needRoutes(t, "orc")
	cohort := tinyCohort(t, add3x7+", "+gemm16)

	dir := filepath.Join(t.TempDir(), "run")
	code, out, errs := tp(t, append([]string{"run", "--cohort", cohort, "--routes", "orc", "--baseline", "orc",
		"--ir", fixture(t, "add.ll"), "--abi", addABI(t, "tp_add"), "--rounds", "1", "--output", dir}, fast...)...)
	if code != exitUnsupported {
		t.Fatalf("run = exit %d, want %d (gemm is not in the IR)\n%s%s", code, exitUnsupported, out, errs)
	}
	doc := readCapture(t, filepath.Join(dir, "capture"))
	if b := findBuild(t, doc, "add-3x7", "orc"); b.Status != artifacts.StatusBuilt || b.Entry == nil || b.Entry.Symbol != "tp_add" || b.Validation == nil || !b.Validation.Pass {
		t.Errorf("orc build of add-3x7 = %s %q entry %+v validation %+v; want built, tp_add, validated", b.Status, b.Reason, b.Entry, b.Validation)
	}
	if b := findBuild(t, doc, "gemm-16x16x16", "orc"); b.Status != artifacts.StatusUnsupported || !strings.Contains(b.Reason, "implements add") {
		t.Errorf("orc build of gemm = %s %q, want unsupported naming the IR's op", b.Status, b.Reason)
	}
	rep := readReplay(t, filepath.Join(dir, "replay"))
	timed := 0
	for _, v := range rep.Visits {
		if v.Case == "add-3x7" && v.Route == "orc" && v.Status == artifacts.StatusPassed {
			timed++
		}
	}
	if timed != 1 {
		t.Errorf("replay timed add-3x7 on orc %d times passed, want 1:\n%s", timed, out)
	}

	for _, tc := range []struct {
		name, ir, symbol, want string
	}{
		{"wrong result", "add_sub.ll", "tp_add", "validation: bound: C[0] = "},
		{"missing symbol", "add.ll", "tp_add2", "abi: entry tp_add2 is not defined by the IR ("},
		{"entry type", "add_void.ll", "tp_add", "abi: entry tp_add in "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capDir := filepath.Join(t.TempDir(), "capture")
			code, _, errs := tp(t, "capture", "--cohort", tinyCohort(t, add3x7), "--routes", "orc",
				"--ir", fixture(t, tc.ir), "--abi", addABI(t, tc.symbol), "--output", capDir)
			if code != exitFailure {
				t.Fatalf("capture = exit %d, want 1: %s", code, errs)
			}
			b := findBuild(t, readCapture(t, capDir), "add-3x7", "orc")
			if b.Status != artifacts.StatusFailed || !strings.Contains(b.Reason, tc.want) {
				t.Errorf("orc build = %s %q, want failed containing %q", b.Status, b.Reason, tc.want)
			}
		})
	}
}
