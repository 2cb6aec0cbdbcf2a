package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/testroute"
)

func readCapture(t *testing.T, dir string) artifacts.CaptureDoc {
	t.Helper()
	st, err := artifacts.OpenStage(dir, artifacts.CaptureType, nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc artifacts.CaptureDoc
	if err := st.ReadDoc(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestRequiresCPURefusesReplay captures a build that needs a CPU feature
// no CPU has and expects replay to refuse before it times anything.
func TestRequiresCPURefusesReplay(t *testing.T) {
	t.Setenv("TILEPIPE_TEST_REQUIRES_CPU", "sse2,tilepipe_test_flag")
	dir := t.TempDir()
	capDir, prepDir, repDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared"), filepath.Join(dir, "replay")
	if code, _, errs := tp(t, "capture", "--cohort", tinyCohort(t, gemm16), "--routes", "", "--route-exec", testroute.Path(t), "--output", capDir); code != 0 {
		t.Fatalf("capture = exit %d: %s", code, errs)
	}
	if got := readCapture(t, capDir).Cases[0].Builds[0].RequiresCPU; strings.Join(got, ",") != "sse2,tilepipe_test_flag" {
		t.Errorf("captured requiresCPU = %v, want [sse2 tilepipe_test_flag]", got)
	}
	if code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir); code != 0 {
		t.Fatalf("prepare = exit %d: %s", code, errs)
	}
	missing := "tilepipe_test_flag"
	if flags, err := artifacts.CPUFlags(artifacts.CPUInfoPath); err != nil || !slices.Contains(flags, "sse2") {
		missing = "sse2 tilepipe_test_flag" // not an x86 machine
	}
	code, out, errs := tp(t, append([]string{"replay", "--prepared", prepDir, "--output", repDir, "--baseline", "naive", "--rounds", "1"}, fast...)...)
	want := "tilepipe: error: replay: case gemm-16x16x16 route naive: built for CPU features [" + missing + "] that this CPU lacks (/proc/cpuinfo flags)\n"
	if code != exitFailure || errs != want {
		t.Errorf("replay = exit %d, stderr %q; want exit 1, stderr %q\n%s", code, errs, want, out)
	}
	if _, err := os.Stat(repDir); err == nil {
		t.Errorf("replay created %s although it refused to time", repDir)
	}
}

// TestValidatingRoute runs the naive route as a validating route: the
// capture checks what its build computed, the audit re-checks it, and a
// wrong kernel fails at capture.
func TestValidatingRoute(t *testing.T) {
	long(t)
	t.Setenv("TILEPIPE_TEST_VALIDATES", "1")
	dir, code, out, errs := naiveRun(t, tinyCohort(t, gemm16), "1")
	if code != exitOK {
		t.Fatalf("run = exit %d\n%s%s", code, out, errs)
	}
	v := readCapture(t, filepath.Join(dir, "capture")).Cases[0].Builds[0].Validation
	if v == nil || !v.Pass || v.Checked != 256 {
		t.Errorf("capture validation = %+v, want a pass over 256 elements", v)
	}
	if want := "; and of 1 validating builds' outputs at capture |"; !strings.Contains(out, want) {
		t.Errorf("audit lacks %q:\n%s", want, out)
	}

	for _, tc := range []struct {
		name  string
		forge func(b *artifacts.Build)
		want  string
	}{
		{"forged verdict", func(b *artifacts.Build) { b.Validation.Checked = 255 },
			"case gemm-16x16x16 route naive validation: capture recorded pass=true \"\" (255 elements, worst "},
		{"validation dropped", func(b *artifacts.Build) { b.Validation = nil },
			"case gemm-16x16x16 route naive: built by a validating route, but capture recorded no validation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forged := copyRun(t, dir)
			forge(t, filepath.Join(forged, "capture"), artifacts.CaptureType, func(_ *artifacts.Store, d *artifacts.CaptureDoc, _ *artifacts.Receipt) {
				tc.forge(&d.Cases[0].Builds[0])
			})
			code, out, _ := tp(t, auditArgs(forged)...)
			if code != exitFailure || !strings.Contains(out, "| outputs | FAILED |") || !strings.Contains(out, tc.want) {
				t.Errorf("audit after %s = exit %d, want 1 with outputs FAILED naming %q:\n%s", tc.name, code, tc.want, out)
			}
		})
	}

	t.Run("wrong kernel", func(t *testing.T) {
		t.Setenv("TILEPIPE_TEST_FAULT", "offbybound")
		dir, code, out, errs := naiveRun(t, tinyCohort(t, gemm16), "1")
		if code != exitFailure {
			t.Fatalf("run = exit %d, want 1\n%s%s", code, out, errs)
		}
		b := readCapture(t, filepath.Join(dir, "capture")).Cases[0].Builds[0]
		if b.Status != artifacts.StatusFailed || !strings.HasPrefix(b.Reason, "validation: bound: C[0] = ") || b.Reason != "validation: "+b.Validation.Reason {
			t.Errorf("build = %s %q (validation %+v), want failed \"validation: bound: C[0] = ...\"", b.Status, b.Reason, b.Validation)
		}
		if !strings.Contains(out, "| outputs | PASSED |") {
			t.Errorf("audit does not agree with the failed validation:\n%s", out)
		}
	})
}

// TestExternalIRNeedsAcceptingRoute: capture and run refuse --ir when no
// selected route accepts IR, and --ir needs --abi.
func TestExternalIRNeedsAcceptingRoute(t *testing.T) {
	d := t.TempDir()
	ll, abi := filepath.Join(d, "a.ll"), filepath.Join(d, "abi.json")
	os.WriteFile(ll, []byte("; IR\n"), 0o644)
	os.WriteFile(abi, []byte(`{"symbol": "tilepipe_entry"}`), 0o644)
	base := []string{"--cohort", tinyCohort(t, gemm16), "--routes", "", "--route-exec", testroute.Path(t)}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"capture", append(append([]string{"capture"}, base...), "--ir", ll, "--abi", abi, "--output", filepath.Join(d, "c1")),
			"tilepipe: error: --ir: no selected route accepts IR (routes: naive)\n"},
		{"run", append(append([]string{"run"}, base...), "--ir", ll, "--abi", abi, "--output", filepath.Join(d, "r1")),
			"tilepipe: error: --ir: no selected route accepts IR (routes: naive)\n"},
		{"ir without abi", append(append([]string{"capture"}, base...), "--ir", ll, "--output", filepath.Join(d, "c2")),
			"tilepipe: error: --ir without --abi: give both or neither\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := tp(t, tc.args...)
			if code != exitFailure || errs != tc.want {
				t.Errorf("tilepipe %s = exit %d, stderr %q; want exit 1, stderr %q", tc.name, code, errs, tc.want)
			}
		})
	}
}
