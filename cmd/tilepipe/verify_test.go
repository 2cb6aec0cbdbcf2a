package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/testroute"
)

// goodRun is one passing naive run, shared (read-only) by the tests that
// copy it and then break one thing.
var goodRun struct {
	once sync.Once
	dir  string
	err  string
}

func passingRun(t *testing.T) string {
	t.Helper()
	goodRun.once.Do(func() {
		root, err := os.MkdirTemp("", "tilepipe-good-")
		if err != nil {
			goodRun.err = err.Error()
			return
		}
		cohort := filepath.Join(root, "cohort.json")
		os.WriteFile(cohort, []byte(`{"schema": 1, "cases": [`+gemm16+`, {"op": "add", "dims": {"M": 4, "N": 10}, "seed": 9}]}`), 0o644)
		goodRun.dir = filepath.Join(root, "run")
		args := append([]string{"run", "--cohort", cohort, "--routes", "", "--route-exec", testroute.Path(t),
			"--baseline", "naive", "--rounds", "2", "--output", goodRun.dir}, fast...)
		if code, out, errs := tp(t, args...); code != 0 {
			goodRun.err = out + errs
		}
	})
	if goodRun.err != "" {
		t.Fatalf("the passing run failed:\n%s", goodRun.err)
	}
	return goodRun.dir
}

// copyRun copies a run directory so a test can break its copy.
func copyRun(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "run")
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

// layerPath finds the blob titled title in a stage directory.
func layerPath(t *testing.T, stageDir, typ, title string) string {
	t.Helper()
	st, err := artifacts.OpenStage(stageDir, typ, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.Layer(title)
	if err != nil {
		t.Fatal(err)
	}
	return st.Store.Path(d.Digest)
}

// flipByte flips one bit in the middle of a (read-only) blob.
func flipByte(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o444); err != nil {
		t.Fatal(err)
	}
}

func auditArgs(dir string) []string {
	return []string{"audit", "--capture", filepath.Join(dir, "capture"), "--prepared", filepath.Join(dir, "prepared"), "--replay", filepath.Join(dir, "replay")}
}

// TestTamperedBlobFailsNextStageAndAudit flips one byte of a blob of each
// kind and checks that the next stage and the audit refuse, naming it.
func TestTamperedBlobFailsNextStageAndAudit(t *testing.T) {
	good := passingRun(t)
	for _, tc := range []struct {
		stage, typ, title string
		next              func(dir string) []string
	}{
		{"capture", artifacts.CaptureType, "cases/gemm-16x16x16/naive/kernels.o", nil},
		{"capture", artifacts.CaptureType, "cases/gemm-16x16x16/input/A.arrow", nil},
		{"capture", artifacts.CaptureType, "cases/add-4x10/bound/C.arrow", nil},
		{"capture", artifacts.CaptureType, "routes/naive/route", nil},
		{"capture", artifacts.CaptureType, artifacts.DocTitle, nil},
		{"prepared", artifacts.PreparedType, "cases/gemm-16x16x16/naive/harness", nil},
		{"prepared", artifacts.PreparedType, "cases/add-4x10/input/B.bin", nil},
		{"prepared", artifacts.PreparedType, "harness/harness.c", nil},
		{"replay", artifacts.ReplayType, "samples.arrow", nil},
		{"replay", artifacts.ReplayType, "visits/0/warm/C.arrow", nil},
	} {
		t.Run(tc.stage+"/"+tc.title, func(t *testing.T) {
			dir := copyRun(t, good)
			flipByte(t, layerPath(t, filepath.Join(dir, tc.stage), tc.typ, tc.title))
			want := "blob " + tc.title + " ("
			var next []string
			switch tc.stage {
			case "capture":
				next = []string{"prepare", "--capture", filepath.Join(dir, "capture"), "--output", filepath.Join(dir, "prepared2")}
			case "prepared":
				next = append([]string{"replay", "--prepared", filepath.Join(dir, "prepared"), "--capture", filepath.Join(dir, "capture"), "--output", filepath.Join(dir, "replay2")}, fast...)
			}
			if next != nil {
				code, _, errs := tp(t, next...)
				if code != exitFailure || !strings.Contains(errs, want) || !strings.Contains(errs, "digest mismatch") {
					t.Errorf("%s after tampering = exit %d, stderr %q; want exit 1 naming %q and a digest mismatch", next[0], code, errs, want)
				}
				if _, err := os.Stat(next[len(next)-1]); next[0] == "prepare" && err == nil {
					t.Errorf("prepare created %s although its input failed verification", next[len(next)-1])
				}
			}
			code, out, _ := tp(t, auditArgs(dir)...)
			if code != exitFailure || !strings.Contains(out, "| blobs | FAILED |") || !strings.Contains(out, want) {
				t.Errorf("audit after tampering = exit %d, want 1 with blobs FAILED naming %q:\n%s", code, want, out)
			}
		})
	}
}

// TestClosureChangeFailsReplay links the timer against a copy of the C
// library that the test controls, changes that copy after prepare and
// expects replay to refuse to time it. The copy gets in through the
// toolchain, which is the operator's: prepare's cc is a wrapper that adds
// an rpath to the link (a route cannot: the link policy refuses
// -Wl,-rpath).
func TestClosureChangeFailsReplay(t *testing.T) {
	long(t)
	realCC, err := exec.LookPath("cc")
	if err != nil {
		t.Fatal(err)
	}
	path, err := exec.Command(realCC, "-print-file-name=libc.so.6").Output()
	if err != nil {
		t.Fatalf("cc -print-file-name=libc.so.6: %v", err)
	}
	b, err := os.ReadFile(strings.TrimSpace(string(path)))
	if err != nil {
		t.Fatal(err)
	}
	lib, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(lib, "libc.so.6")
	if err := os.WriteFile(so, b, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	wrapper := fmt.Sprintf("#!/bin/sh\nexec '%s' \"$@\" '-Wl,-rpath,%s'\n", realCC, lib)
	if err := os.WriteFile(filepath.Join(bin, "cc"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	capDir, prepDir, repDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared"), filepath.Join(dir, "replay")
	if code, _, errs := tp(t, "capture", "--cohort", tinyCohort(t, gemm16), "--routes", "", "--route-exec", testroute.Path(t), "--output", capDir); code != 0 {
		t.Fatalf("capture = exit %d: %s", code, errs)
	}
	t.Setenv("PATH", bin+string(filepath.ListSeparator)+os.Getenv("PATH"))
	if code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir); code != 0 {
		t.Fatalf("prepare = exit %d: %s", code, errs)
	}
	pinned := false
	for _, e := range readPrepared(t, prepDir).Entries {
		for _, c := range e.Closure {
			pinned = pinned || c.Path == so
		}
	}
	if !pinned {
		t.Fatalf("prepare did not pin %s: the timer did not load the copy", so)
	}
	f, err := os.OpenFile(so, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	code, out, errs := tp(t, append([]string{"replay", "--prepared", prepDir, "--output", repDir, "--baseline", "naive", "--rounds", "1"}, fast...)...)
	if code != exitFailure {
		t.Fatalf("replay with a changed closure = exit %d, want 1\n%s%s", code, out, errs)
	}
	doc := readReplay(t, repDir)
	want := "binary closure before round 0: " + so + " changed: prepared "
	if len(doc.Closure) != 1 || doc.Closure[0].Status != artifacts.StatusFailed || !strings.HasPrefix(doc.Closure[0].Reason, want) {
		t.Errorf("closure checks = %+v, want one failed check starting %q", doc.Closure, want)
	}
	for _, v := range doc.Visits {
		if v.Status != artifacts.StatusFailed || !strings.HasPrefix(v.Reason, "not_run:") {
			t.Errorf("visit %d = %s %q, want failed not_run (nothing is timed on a changed binary)", v.Index, v.Status, v.Reason)
		}
	}
}

// TestInterpreterRetargetedFailsReplay: a process route's interpreter is
// run by the name the route gave, which may be a symlink (a virtual
// environment's bin/python3). Named by a symlink outside every closure
// directory, it still runs inside the visit's sandbox (the symlink is
// recreated there); pointed at another file after prepare, the closure
// check before the first round refuses it, naming the link, where it now
// leads and both digests, and nothing is timed.
func TestInterpreterRetargetedFailsReplay(t *testing.T) {
	long(t)
	routes := os.Getenv("TILEPIPE_ROUTES")
	if routes == "" {
		t.Skip("TILEPIPE_ROUTES is not set (make test sets it): the imposter runs torch-eager")
	}
	route := filepath.Join(routes, "torch-eager", "route")
	out, err := exec.Command(route, "describe").Output()
	if err != nil {
		t.Fatalf("torch-eager describe: %v", err)
	}
	var d struct {
		Available bool   `json:"available"`
		Version   string `json:"version"`
	}
	if err := json.Unmarshal(out, &d); err != nil || !d.Available {
		t.Skipf("torch-eager unavailable: %s", out)
	}
	// "torch VERSION (Python VERSION, INTERPRETER)"
	i := strings.LastIndex(d.Version, ", ")
	if i < 0 || !strings.HasSuffix(d.Version, ")") {
		t.Fatalf("torch-eager version %q names no interpreter", d.Version)
	}
	interp := d.Version[i+2 : len(d.Version)-1]
	lib, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(lib, "python3")
	if err := os.Symlink(interp, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TILEPIPE_TEST_TORCH_ROUTE", route)
	t.Setenv("TILEPIPE_TEST_INTERPRETER", link)
	dir := t.TempDir()
	capDir, prepDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared")
	if code, _, errs := tp(t, "capture", "--cohort", tinyCohort(t, add5x33), "--routes", "", "--route-exec", testroute.Imposter(t), "--output", capDir); code != 0 {
		t.Fatalf("capture = exit %d: %s", code, errs)
	}
	if code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir); code != 0 {
		t.Fatalf("prepare = exit %d: %s", code, errs)
	}
	e := readPrepared(t, prepDir).Entries[0]
	if e.Status != artifacts.StatusPrepared || e.Process == nil || e.Process.Interpreter != link {
		t.Fatalf("prepared entry = %s %q, want prepared with interpreter %s (%+v)", e.Status, e.Reason, link, e.Process)
	}
	replay := func(name string) (int, artifacts.ReplayDoc) {
		code, out, errs := tp(t, append([]string{"replay", "--prepared", prepDir, "--output", filepath.Join(dir, name), "--baseline", "imposter", "--rounds", "1"}, fast...)...)
		if code != exitOK && code != exitFailure {
			t.Fatalf("replay = exit %d\n%s%s", code, out, errs)
		}
		return code, readReplay(t, filepath.Join(dir, name))
	}
	if code, doc := replay("honest"); code != exitOK {
		t.Fatalf("replay with the interpreter named by a symlink = exit %d, want 0: %+v %+v", code, doc.Closure, doc.Visits)
	}
	other, err := filepath.EvalSymlinks("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	code, doc := replay("retargeted")
	want := fmt.Sprintf("binary closure before round 0: interpreter %s (now %s) changed: captured %s, now ", link, other, artifacts.Short(e.Process.InterpreterDigest))
	if code != exitFailure || len(doc.Closure) != 1 || doc.Closure[0].Status != artifacts.StatusFailed || !strings.HasPrefix(doc.Closure[0].Reason, want) {
		t.Errorf("replay with a retargeted interpreter = exit %d, closure checks %+v; want exit 1 and one failed check starting %q", code, doc.Closure, want)
	}
	for _, v := range doc.Visits {
		if v.Status != artifacts.StatusFailed || !strings.HasPrefix(v.Reason, "not_run:") {
			t.Errorf("visit %d = %s %q, want failed not_run", v.Index, v.Status, v.Reason)
		}
	}
}

var binOnce struct {
	sync.Once
	path string
	err  error
}

// tilepipeBinary builds the command once for tests that must kill it.
func tilepipeBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tilepipe-bin-")
		if err != nil {
			binOnce.err = err
			return
		}
		binOnce.path = filepath.Join(dir, "tilepipe")
		out, err := exec.Command("go", "build", "-o", binOnce.path, ".").CombinedOutput()
		if err != nil {
			binOnce.err = &exec.ExitError{Stderr: out}
		}
	})
	if binOnce.err != nil {
		t.Fatalf("go build: %v", binOnce.err)
	}
	return binOnce.path
}

// TestReplayResumesAfterKill kills a replay with SIGKILL in the middle and
// resumes it: every planned visit ends up recorded exactly once.
func TestReplayResumesAfterKill(t *testing.T) {
	long(t)
	good := passingRun(t)
	dir := copyRun(t, good)
	rep := filepath.Join(dir, "replay-resumed")
	args := []string{"replay", "--prepared", filepath.Join(dir, "prepared"), "--capture", filepath.Join(dir, "capture"), "--output", rep,
		"--baseline", "naive", "--rounds", "3", "--target", "0", "--samples", "2", "--singles", "1", "--sample-ms", "1", "--warmup-ms", "150"}
	cmd := exec.Command(tilepipeBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(rep, "journal.jsonl")
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(journal)
		if bytes.Count(b, []byte(`"visit"`)) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("replay wrote no 3 visits within 60s: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(rep, "index.json")); err == nil {
		t.Fatal("the killed replay committed index.json; kill it earlier")
	}
	if code, _, errs := tp(t, "audit", "--capture", filepath.Join(dir, "capture"), "--prepared", filepath.Join(dir, "prepared"), "--replay", rep); code != exitFailure || !strings.Contains(errs+"", "") {
		t.Errorf("audit of an interrupted replay = exit %d, want 1", code)
	}
	// Different flags must not resume.
	bad := append(append([]string{}, args...), "--resume")
	bad[len(bad)-2] = "100" // --warmup-ms
	if code, _, errs := tp(t, bad...); code != exitFailure || !strings.Contains(errs, "resume with the same flags") {
		t.Errorf("resume with other flags = exit %d, stderr %q; want exit 1 asking for the same flags", code, errs)
	}
	// Nor a replay begun by a tilepipe before exact intervals (its plan
	// records no config.interval): no flag can match it, so say so.
	planPath := filepath.Join(rep, "plan.json")
	orig, err := os.ReadFile(planPath)
	if err != nil {
		t.Fatal(err)
	}
	var plan map[string]any
	if err := json.Unmarshal(orig, &plan); err != nil {
		t.Fatal(err)
	}
	delete(plan["config"].(map[string]any), "interval")
	older, _ := json.Marshal(plan)
	os.Chmod(planPath, 0o644)
	if err := os.WriteFile(planPath, older, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := tp(t, append(args, "--resume")...); code != exitFailure || !strings.Contains(errs, `plan.json records config.interval ""; this tilepipe computes intervals by "sign" (docs/statistics.md): a replay begun by another version cannot be resumed, start a new one`) {
		t.Errorf("resume of an older version's replay = exit %d, stderr %q; want exit 1 saying it cannot be resumed", code, errs)
	}
	// Nor one begun before the load rule (no config.load).
	plan["config"].(map[string]any)["interval"] = "sign"
	delete(plan["config"].(map[string]any), "load")
	older, _ = json.Marshal(plan)
	if err := os.WriteFile(planPath, older, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := tp(t, append(args, "--resume")...); code != exitFailure || !strings.Contains(errs, `plan.json records no config.load (a replay begun before the load rule, docs/statistics.md): a replay begun by another version cannot be resumed, start a new one`) {
		t.Errorf("resume of a replay begun before the load rule = exit %d, stderr %q; want exit 1 saying it cannot be resumed", code, errs)
	}
	// Nor one begun under novel rule 1 (no config.novelRule): its visits
	// had other slots and judged calls than this tilepipe's.
	plan["config"].(map[string]any)["load"] = "exclude"
	delete(plan["config"].(map[string]any), "novelRule")
	older, _ = json.Marshal(plan)
	if err := os.WriteFile(planPath, older, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := tp(t, append(args, "--resume")...); code != exitFailure || !strings.Contains(errs, `plan.json records config.novelRule 0; this tilepipe times by novel rule 3 (docs/protocol.md, step 5): a replay begun by another version cannot be resumed, start a new one`) {
		t.Errorf("resume of a replay begun under novel rule 1 = exit %d, stderr %q; want exit 1 saying it cannot be resumed", code, errs)
	}
	if err := os.WriteFile(planPath, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := tp(t, append(args, "--resume")...)
	if code != 0 {
		t.Fatalf("replay --resume = exit %d\n%s%s", code, out, errs)
	}
	doc := readReplay(t, rep)
	if len(doc.Visits) != len(doc.Plan) || len(doc.Plan) != 3*2 {
		t.Fatalf("resumed replay: %d visits, %d planned, want 6 and 6", len(doc.Visits), len(doc.Plan))
	}
	seen := map[int]int{}
	for _, v := range doc.Visits {
		seen[v.Index]++
		if v.Status != artifacts.StatusPassed {
			t.Errorf("visit %d = %s %q, want passed", v.Index, v.Status, v.Reason)
		}
	}
	for i := range doc.Plan {
		if seen[i] != 1 {
			t.Errorf("visit %d recorded %d times, want once", i, seen[i])
		}
	}
	if code, _, errs := tp(t, append(args, "--resume")...); code != exitFailure || !strings.Contains(errs, "already finished") {
		t.Errorf("resume of a finished replay = exit %d, stderr %q; want exit 1 saying it already finished", code, errs)
	}
	code, out, _ = tp(t, "audit", "--capture", filepath.Join(dir, "capture"), "--prepared", filepath.Join(dir, "prepared"), "--replay", rep)
	if code != 0 {
		t.Errorf("audit of the resumed replay = exit %d:\n%s", code, out)
	}
}

var _ = ocispec.Descriptor{}
