package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/testroute"
)

// TestRouteAliases: one route program under two names is an A/B of two
// builds in one replay, one command: --route-exec NAME=PATH for a
// route program, --routes ALIAS=ROUTE for a built-in one. The capture
// records each alias with the name its describe answer gives, the audit
// holds that name to the stored describe answer (a forged one is
// named), and a malformed alias is a usage error before anything runs.
func TestRouteAliases(t *testing.T) {
	long(t)
	naive := testroute.Path(t)
	dir, code, out, errs := naiveRun(t, tinyCohort(t, gemm16), "2", "--route-exec", "naive-b="+naive)
	if code != exitOK {
		t.Fatalf("run --route-exec naive-b=PATH = exit %d:\n%s%s", code, out, errs)
	}
	var cdoc artifacts.CaptureDoc
	st := openStage(t, filepath.Join(dir, "capture"), artifacts.CaptureType)
	if err := st.ReadDoc(&cdoc); err != nil {
		t.Fatal(err)
	}
	if len(cdoc.Routes) != 2 || cdoc.Routes[1].Name != "naive-b" || cdoc.Routes[1].Describes != "naive" || cdoc.Routes[0].Describes != "" {
		t.Fatalf("capture routes %+v: want naive, then naive-b describing itself as naive", cdoc.Routes)
	}
	if _, err := st.Layer("routes/naive-b/describe.json"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(out, "| gemm-16x16x16 | naive-b | passed |") {
		t.Errorf("results lack the aliased row:\n%s", out)
	}

	forged := copyRun(t, dir)
	forge(t, filepath.Join(forged, "capture"), artifacts.CaptureType, func(_ *artifacts.Store, d *artifacts.CaptureDoc, _ *artifacts.Receipt) {
		d.Routes[1].Describes = "halide"
	})
	rechain(t, forged)
	code, md := auditRun(t, forged, filepath.Join(forged, "replay"))
	if want := `- route naive-b: name "halide", its describe.json (`; code != exitFailure || !strings.Contains(md, want) || !strings.Contains(md, `) says "naive"`) {
		t.Errorf("audit of a forged alias = exit %d, want 1 and %q:\n%s", code, want, md)
	}

	for _, bad := range []string{"naive b=" + naive, "=" + naive, "naive-b="} {
		code, _, errs := tp(t, "capture", "--cohort", tinyCohort(t, gemm16), "--routes", "", "--route-exec", bad, "--output", filepath.Join(t.TempDir(), "c"))
		if want := `--route-exec "` + bad + `": want NAME=PATH with NAME of letters`; code != exitUsage || !strings.Contains(errs, want) {
			t.Errorf("capture --route-exec %q = exit %d, %q; want usage and %q", bad, code, errs, want)
		}
	}

	t.Run("built-in", func(t *testing.T) {
		needRoutes(t, "halide")
		dir := filepath.Join(t.TempDir(), "run")
		args := append([]string{"run", "--cohort", tinyCohort(t, add3x7), "--routes", "halide,halide-b=halide", "--baseline", "halide", "--rounds", "6", "--output", dir}, fast...)
		if code, out, errs := tp(t, args...); code != exitOK || !strings.Contains(out, "| add-3x7 | halide-b | passed |") {
			t.Fatalf("run --routes halide,halide-b=halide = exit %d:\n%s%s", code, out, errs)
		}
		// The same objects, byte for byte: an A/A of one build.
		a := layerPath(t, filepath.Join(dir, "capture"), artifacts.CaptureType, "cases/add-3x7/halide/kernel.o")
		b := layerPath(t, filepath.Join(dir, "capture"), artifacts.CaptureType, "cases/add-3x7/halide-b/kernel.o")
		if a != b {
			t.Errorf("halide and halide-b kernel objects are %s and %s, want one blob", a, b)
		}
	})
}
