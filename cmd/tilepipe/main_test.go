package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/testroute"
	"github.com/tilepipe/tilepipe/report"
)

// tp runs tilepipe in-process and returns exit code, stdout and stderr.
// Route builds see no variable of the test's environment but those given
// with --route-env: tp forwards every TILEPIPE_TEST_* variable that way to
// capture and run, so tests configure the naive route with t.Setenv.
func tp(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if len(args) > 0 && (args[0] == "capture" || args[0] == "run") {
		var fwd []string
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "TILEPIPE_TEST_") {
				fwd = append(fwd, "--route-env", kv)
			}
		}
		args = append(append([]string{args[0]}, fwd...), args[1:]...)
	}
	var out, errb bytes.Buffer
	code := tilepipe(context.Background(), append([]string{"tilepipe"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// tinyCohort writes a cohort of small cases so the naive route builds fast.
// long skips an end-to-end test of more than a couple of seconds under
// go test -short (make test-short, the everyday loop); make test runs it.
func long(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("long: an end-to-end run of seconds; make test runs it")
	}
}

func tinyCohort(t *testing.T, cases string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cohort.json")
	if err := os.WriteFile(p, []byte(`{"schema": 1, "name": "tiny", "cases": [`+cases+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// secondNaive is a copy of the naive test route in a directory of its
// own, so a run can time two routes with the same kernels (its name is
// the directory's, naive2): the path of its route program.
func secondNaive(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "naive2")
	if out, err := exec.Command("cp", "-a", filepath.Dir(testroute.Path(t)), dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return filepath.Join(dir, "route")
}

const gemm16 = `{"op": "gemm", "dims": {"M": 16, "N": 16, "K": 16}, "seed": 3}`

// fast are replay flags that keep test visits short.
var fast = []string{"--samples", "2", "--singles", "1", "--sample-ms", "1", "--warmup-ms", "0", "--target", "0"}

// naiveRun runs the whole pipeline with the naive test route into a new
// directory and returns it with the exit code and output.
func naiveRun(t *testing.T, cohort string, rounds string, extra ...string) (string, int, string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"run", "--cohort", cohort, "--routes", "", "--route-exec", testroute.Path(t),
		"--baseline", "naive", "--rounds", rounds, "--output", dir}, fast...)
	code, out, errs := tp(t, append(args, extra...)...)
	return dir, code, out, errs
}

func readReplay(t *testing.T, dir string) artifacts.ReplayDoc {
	t.Helper()
	st, err := artifacts.OpenStage(dir, artifacts.ReplayType, nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc artifacts.ReplayDoc
	if err := st.ReadDoc(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func readPrepared(t *testing.T, dir string) artifacts.PreparedDoc {
	t.Helper()
	st, err := artifacts.OpenStage(dir, artifacts.PreparedType, nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc artifacts.PreparedDoc
	if err := st.ReadDoc(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func readAudit(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Type      string         `json:"_type"`
		Predicate map[string]any `json:"predicate"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != artifacts.StatementType {
		t.Fatalf("%s: _type = %q, want %q", path, st.Type, artifacts.StatementType)
	}
	return st.Predicate
}

func TestRunNaivePasses(t *testing.T) {
	cohort := tinyCohort(t, gemm16+`, {"op": "softmax", "dims": {"M": 4, "N": 100}, "seed": 4}, {"op": "layernorm", "dims": {"M": 3, "N": 33}, "seed": 5}`)
	dir, code, out, errs := naiveRun(t, cohort, "2")
	if code != exitOK {
		t.Fatalf("run = exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, want := range []string{"| gemm-16x16x16 | naive | passed |", "audit verdict: PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("run stdout lacks %q:\n%s", want, out)
		}
	}
	if v := readAudit(t, filepath.Join(dir, "audit.json"))["verdict"]; v != "pass" {
		t.Errorf("audit.json verdict = %v, want pass", v)
	}
	for _, typ := range []string{artifacts.CaptureType, artifacts.PreparedType, artifacts.ReplayType, artifacts.AuditType} {
		artifacts.CheckStage(t, filepath.Join(dir, artifacts.StageName(typ)), typ)
	}
	doc := readReplay(t, filepath.Join(dir, "replay"))
	if got, want := len(doc.Visits), 2*3; got != want {
		t.Errorf("replay visits = %d, want %d", got, want)
	}
	// The run directory's top: the results table as replay stored it, the
	// audit, and a last line that names them.
	if b, err := os.ReadFile(filepath.Join(dir, "results.md")); err != nil || string(b) != report.Table(doc) {
		t.Errorf("results.md = %q, %v; want replay.Table of the replay stage:\n%s", b, err, report.Table(doc))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "audit.md")); err != nil || !strings.Contains(out, string(b)) {
		t.Errorf("audit.md = %q, %v; want the audit printed on stdout", b, err)
	}
	want := fmt.Sprintf("\nresults: %[1]s/results.md, report: %[1]s/report.html, audit: %[1]s/audit.md (%[1]s/audit.json); stages: %[1]s/capture, %[1]s/prepared, %[1]s/replay, %[1]s/audit\n", dir)
	if !strings.HasSuffix(out, want) {
		t.Errorf("run stdout ends\n%s\nwant it to end %q", out[max(0, len(out)-300):], want)
	}
}

func TestRunWhere(t *testing.T) {
	dir := t.TempDir()
	if got, want := runWhere(dir), "stages: none"; got != want {
		t.Errorf("runWhere(empty) = %q, want %q", got, want)
	}
	for _, d := range []string{"capture", "prepared"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := runWhere(dir), "stages: "+dir+"/capture, "+dir+"/prepared"; got != want {
		t.Errorf("runWhere(stopped after prepare) = %q, want %q", got, want)
	}
}

// TestRelativePaths runs every stage with paths relative to the working
// directory; timers run in other directories and must still find them.
func TestRelativePaths(t *testing.T) {
	long(t)
	t.Chdir(t.TempDir())
	cohort := tinyCohort(t, gemm16)
	steps := [][]string{
		{"capture", "--cohort", cohort, "--routes", "", "--route-exec", testroute.Path(t), "--output", "c"},
		{"prepare", "--capture", "c", "--output", "p"},
		append([]string{"replay", "--prepared", "p", "--output", "r", "--baseline", "naive", "--rounds", "1"}, fast...),
		{"audit", "--capture", "c", "--prepared", "p", "--replay", "r", "--output", "audit.json"},
	}
	for _, args := range steps {
		if code, out, errs := tp(t, args...); code != 0 {
			t.Fatalf("tilepipe %v = exit %d, want 0\n%s%s", args, code, out, errs)
		}
	}
}

func TestUnsupportedRowsExit3(t *testing.T) {
	long(t)
	t.Setenv("TILEPIPE_TEST_OPS", "gemm")
	cohort := tinyCohort(t, gemm16+`, {"op": "sum", "dims": {"M": 4, "N": 10}, "seed": 4}`)
	_, code, out, errs := naiveRun(t, cohort, "1")
	if code != exitUnsupported {
		t.Fatalf("run = exit %d, want %d\n%s\n%s", code, exitUnsupported, out, errs)
	}
	if want := "| sum-4x10 | naive | unsupported | - | - | - | - | - | naive has no op sum |"; !strings.Contains(out, want) {
		t.Errorf("run stdout lacks the kept unsupported row %q:\n%s", want, out)
	}
}

// TestFaultsAreResults builds deliberately broken objects and checks that
// each visit fails with its exact reason, the row is kept, the run exits 1
// and the audit of the (consistent) checkpoint still passes.
func TestFaultsAreResults(t *testing.T) {
	long(t)
	for _, tc := range []struct{ fault, reason string }{
		{"halfwrite", "output_not_overwritten: C set 0 element 128"},
		{"overrun", "guard_overwritten: C warm byte 5120"},
		{"mutate", "input_written: A warm set 0 byte 0"},
		{"nondeterministic", "not_repeatable: C set 0 byte 0"},
		{"offbybound", "oracle: warm set 0: bound: C[0] = "},
		{"crash", "crashed: killed by signal 11 (segmentation fault)"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			t.Setenv("TILEPIPE_TEST_FAULT", tc.fault)
			dir, code, out, errs := naiveRun(t, tinyCohort(t, gemm16), "1")
			if code != exitFailure {
				t.Fatalf("run = exit %d, want 1\n%s\n%s", code, out, errs)
			}
			doc := readReplay(t, filepath.Join(dir, "replay"))
			if len(doc.Visits) != 1 {
				t.Fatalf("visits = %d, want 1", len(doc.Visits))
			}
			v := doc.Visits[0]
			if v.Status != artifacts.StatusFailed || !strings.HasPrefix(v.Reason, tc.reason) {
				t.Errorf("visit = %s %q, want failed %q", v.Status, v.Reason, tc.reason)
			}
			if tc.fault == "offbybound" && !strings.HasSuffix(v.Reason, "(1 of 256 elements outside)") {
				t.Errorf("visit reason = %q, want one element outside", v.Reason)
			}
			if s := doc.Summary[0]; s.Status != artifacts.StatusFailed || !strings.Contains(s.Reason, tc.reason) {
				t.Errorf("summary row = %s %q, want failed, naming %q", s.Status, s.Reason, tc.reason)
			}
			if v := readAudit(t, filepath.Join(dir, "audit.json"))["verdict"]; v != "pass" {
				t.Errorf("audit verdict = %v, want pass (a failed visit is a result, the chain is intact)", v)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	existing := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown command", []string{"bogus"}, exitUsage, `unknown command "bogus"`},
		{"missing output", []string{"capture", "--cohort", "quick"}, exitUsage, "capture: --output is required"},
		{"unknown flag", []string{"prepare", "--bogus"}, exitUsage, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"prepare", "--capture", "a", "--output", "b", "extra"}, exitUsage, "unexpected arguments [extra]"},
		{"existing output", []string{"capture", "--cohort", "quick", "--output", existing}, exitFailure, "already exists; stages never overwrite"},
		{"unknown cohort", []string{"capture", "--cohort", "nope", "--output", filepath.Join(existing, "x")}, exitFailure, `cohort "nope": not a built-in cohort`},
		{"incomplete stage", []string{"prepare", "--capture", existing, "--output", filepath.Join(existing, "p")}, exitFailure, "oci-layout"},
		{"route-env without =", []string{"capture", "--cohort", "quick", "--route-env", "FOO", "--output", filepath.Join(existing, "c1")}, exitFailure, `--route-env "FOO": want KEY=VALUE`},
		{"route-env twice", []string{"capture", "--cohort", "quick", "--route-env", "A=1", "--route-env", "A=2", "--output", filepath.Join(existing, "c2")}, exitFailure, "--route-env A: given twice"},
		{"no sandbox here", []string{"capture", "--cohort", "quick", "--bwrap", "/bin/false", "--output", filepath.Join(existing, "c3")}, exitFailure,
			"capture: no sandbox for route builds can be made on this machine: /bin/false --version: exit status 1; --no-sandbox builds without one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := tp(t, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.msg) {
				t.Errorf("tilepipe %v = exit %d, stderr %q; want exit %d naming %q", tc.args, code, errs, tc.code, tc.msg)
			}
		})
	}
}

func TestCohortsAndRoutesList(t *testing.T) {
	long(t)
	code, out, errs := tp(t, "cohorts")
	if code != 0 || !strings.Contains(out, "cpu-default:") || !strings.Contains(out, "gemm-100x300x200") {
		t.Errorf("cohorts = exit %d:\n%s%s", code, out, errs)
	}
	code, out, errs = tp(t, "routes")
	if code != 0 || !strings.Contains(out, "ROUTE  ") || !strings.Contains(out, "EXTRAS") || !strings.Contains(out, "halide") {
		t.Errorf("routes = exit %d:\n%s%s", code, out, errs)
	}
}

// TestCohortRounds: a cohort's "rounds" is replay's default; --rounds wins.
func TestCohortRounds(t *testing.T) {
	long(t)
	p := filepath.Join(t.TempDir(), "cohort.json")
	if err := os.WriteFile(p, []byte(`{"schema": 1, "rounds": 3, "cases": [`+gemm16+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags []string
		want  int
	}{{nil, 3}, {[]string{"--rounds", "2"}, 2}} {
		dir := filepath.Join(t.TempDir(), "run")
		args := append([]string{"run", "--cohort", p, "--routes", "", "--route-exec", testroute.Path(t), "--baseline", "naive", "--output", dir}, fast...)
		if code, out, errs := tp(t, append(args, tc.flags...)...); code != 0 {
			t.Fatalf("run %v = exit %d\n%s%s", tc.flags, code, out, errs)
		}
		if got := readReplay(t, filepath.Join(dir, "replay")).Config.Rounds; got != tc.want {
			t.Errorf("run %v: replay rounds = %d, want %d", tc.flags, got, tc.want)
		}
	}
}
