package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/testroute"
)

// replayArgs replays the shared passing run's prepared stage into rep.
func replayArgs(dir, rep string, extra ...string) []string {
	return append([]string{"replay", "--prepared", filepath.Join(dir, "prepared"), "--capture", filepath.Join(dir, "capture"), "--output", rep,
		"--baseline", "naive", "--samples", "2", "--singles", "1", "--sample-ms", "1", "--warmup-ms", "0", "--target", "0"}, extra...)
}

func auditRun(t *testing.T, dir, rep string) (int, string) {
	t.Helper()
	code, out, errs := tp(t, "audit", "--capture", filepath.Join(dir, "capture"), "--prepared", filepath.Join(dir, "prepared"), "--replay", rep)
	return code, out + errs
}

// startReplay runs the tilepipe binary (it must be killable) and waits
// until its journal holds at least visits visit lines.
func startReplay(t *testing.T, args []string, rep string, visits int, env ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(tilepipeBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(90 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(rep, "journal.jsonl"))
		if bytes.Count(b, []byte(`"visit":`)) >= visits {
			return cmd, &stderr
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay wrote no %d visits within 90 s: %s", visits, stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// journalVisits reads the visits of a replay's journal.
func journalVisits(t *testing.T, rep string) []artifacts.VisitResult {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rep, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []artifacts.VisitResult
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var l artifacts.JournalLine
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		if l.Visit != nil {
			out = append(out, *l.Visit)
		}
	}
	return out
}

// TestReplayInterrupted: SIGINT or SIGTERM during a replay stops the visit
// in flight and journals nothing for it (no spurious "crashed: killed by
// signal 9"), exits 128 + the signal's number saying how to continue,
// and --resume re-runs that visit: every row passes and the audit
// accepts the stage.
func TestReplayInterrupted(t *testing.T) {
	long(t)
	good := passingRun(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(signalName(sig), func(t *testing.T) {
			dir := copyRun(t, good)
			rep := filepath.Join(dir, "replay-interrupted")
			args := replayArgs(dir, rep, "--rounds", "2", "--sample-ms", "20", "--samples", "3")
			cmd, stderr := startReplay(t, args, rep, 1)
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
				t.Fatalf("interrupted replay = %v, want exit %d\n%s", err, 128+int(sig), stderr)
			}
			// The hint is the whole command, every plan flag included (a
			// resume asking for another plan is refused), quoted for a shell.
			prefix := fmt.Sprintf("tilepipe: interrupted by %s; the visit in flight was not recorded; continue with: ", signalName(sig))
			last := lastLines(stderr.String(), 1)
			hint, ok := strings.CutPrefix(last, prefix)
			if !ok {
				t.Fatalf("stderr ends %q, want %q and a command", last, prefix)
			}
			want := fmt.Sprintf("tilepipe replay --prepared %s --output %s --rounds 2 --samples 3 --singles 1 --sample-ms 20 --warmup-ms 0 --baseline naive --target 0 --capture %s --resume",
				shellQuote(filepath.Join(dir, "prepared")), shellQuote(rep), shellQuote(filepath.Join(dir, "capture")))
			if hint != want {
				t.Errorf("hint %q, want %q", hint, want)
			}
			done := journalVisits(t, rep)
			for _, v := range done {
				if v.Status != artifacts.StatusPassed {
					t.Errorf("the interrupted replay journaled visit %d as %s %q", v.Index, v.Status, v.Reason)
				}
			}
			if len(done) >= 4 {
				t.Fatalf("the replay finished all %d visits before the signal; nothing was interrupted", len(done))
			}
			// Pasted into a shell as printed, with tilepipe on PATH.
			bin := t.TempDir()
			if err := os.Symlink(tilepipeBinary(t), filepath.Join(bin, "tilepipe")); err != nil {
				t.Fatal(err)
			}
			sh := exec.Command("/bin/sh", "-c", hint)
			sh.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			if out, err := sh.CombinedOutput(); err != nil {
				t.Fatalf("the printed command (%s) = %v\n%s", hint, err, out)
			}
			doc := readReplay(t, rep)
			for _, v := range doc.Visits {
				if v.Status != artifacts.StatusPassed {
					t.Errorf("resumed replay: visit %d %s %q, want passed", v.Index, v.Status, v.Reason)
				}
			}
			if code, out := auditRun(t, dir, rep); code != 0 {
				t.Errorf("audit of the resumed replay = exit %d\n%s", code, out)
			}
		})
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestSecondWriterRefused: while a replay writes its directory, a second
// replay of it (--resume) is refused with the holder named, and changes
// nothing; once the first is killed, --resume takes over and the audit
// accepts the result.
func TestSecondWriterRefused(t *testing.T) {
	long(t)
	dir := copyRun(t, passingRun(t))
	rep := filepath.Join(dir, "replay-locked")
	args := replayArgs(dir, rep, "--rounds", "2", "--sample-ms", "20", "--samples", "3")
	cmd, _ := startReplay(t, args, rep, 1)
	before, _ := os.ReadFile(filepath.Join(rep, "plan.json"))
	host, _ := os.Hostname()
	code, _, errs := tp(t, append(args, "--resume")...)
	want := fmt.Sprintf("tilepipe: error: --resume: stage %s is being written by pid %d on %s (%s replay --prepared", rep, cmd.Process.Pid, host, tilepipeBinary(t))
	if code != exitFailure || !strings.HasPrefix(errs, want) || !strings.HasSuffix(errs, "Z: one writer per stage directory; wait for it or stop it\n") {
		t.Errorf("second writer = exit %d, stderr %q; want exit 1, %q ... one writer per stage directory", code, errs, want)
	}
	if after, _ := os.ReadFile(filepath.Join(rep, "plan.json")); !bytes.Equal(before, after) {
		t.Error("the refused writer changed plan.json")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if code, out, errs := tp(t, append(args, "--resume")...); code != 0 {
		t.Fatalf("replay --resume after the writer died = exit %d\n%s%s", code, out, errs)
	}
	if code, out := auditRun(t, dir, rep); code != 0 {
		t.Errorf("audit = exit %d\n%s", code, out)
	}
}

// TestResumeFromEveryKillPoint kills replay (SIGKILL, at an exact point:
// artifacts/crashpoint) after its plan, after every journal line (the
// session, each closure check, each visit), before its commit and after
// it, then resumes: the result is always a stage its audit accepts.
// Killing after a round's last visit and before the closure check after
// it once gave a stage the audit refused.
func TestResumeFromEveryKillPoint(t *testing.T) {
	long(t)
	dir := copyRun(t, passingRun(t))
	// One round of two cases: a session, the check before, two visits, the
	// check after.
	points := []string{"plan:1", "journal:1", "journal:2", "journal:3", "journal:4", "journal:5", "finish:1", "commit:1"}
	for _, p := range points {
		t.Run(strings.ReplaceAll(p, ":", "-"), func(t *testing.T) {
			rep := filepath.Join(dir, "replay-"+strings.ReplaceAll(p, ":", "-"))
			args := replayArgs(dir, rep, "--rounds", "1")
			cmd := exec.Command(tilepipeBinary(t), args...)
			cmd.Env = append(os.Environ(), "TILEPIPE_CRASH_AT="+p)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("replay with TILEPIPE_CRASH_AT=%s = %v, want killed by SIGKILL\n%s", p, err, out)
			}
			code, stdout, errs := tp(t, append(args, "--resume")...)
			switch {
			case p == "commit:1":
				// Killed after index.json: the stage is whole.
				if want := fmt.Sprintf("tilepipe: error: --resume: stage %s already finished (index.json exists): nothing to resume\n", rep); code != exitFailure || errs != want {
					t.Errorf("resume after the commit = exit %d %q, want exit 1 %q", code, errs, want)
				}
			case code != 0:
				t.Fatalf("replay --resume = exit %d\n%s%s", code, stdout, errs)
			}
			if code, out := auditRun(t, dir, rep); code != 0 {
				t.Errorf("audit after a kill at %s and --resume = exit %d\n%s", p, code, out)
			}
			if _, err := os.Lstat(filepath.Join(rep, artifacts.LockFile)); err == nil {
				t.Errorf("the finished stage still has its %s file", artifacts.LockFile)
			}
			if p != "commit:1" { // killed after its commit, before this tidying
				ents, _ := os.ReadDir(rep)
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				if want := []string{"blobs", "index.json", "oci-layout"}; !slices.Equal(names, want) {
					t.Errorf("the finished stage holds %v, want its OCI layout alone %v", names, want)
				}
			}
		})
	}
}

// TestResumeRefusesEditedJournal: a journal edited while replay was down
// (a visit's callsPerSample doubled, which halves its per-call times) is
// checked against the sample table it points to and refused; before,
// --resume accepted it and it ended up in the final document.
func TestResumeRefusesEditedJournal(t *testing.T) {
	dir := copyRun(t, passingRun(t))
	rep := filepath.Join(dir, "replay-edited")
	args := replayArgs(dir, rep, "--rounds", "1")
	cmd := exec.Command(tilepipeBinary(t), args...)
	cmd.Env = append(os.Environ(), "TILEPIPE_CRASH_AT=journal:3") // session, check, one visit
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("replay was not killed:\n%s", out)
	}
	path := filepath.Join(rep, "journal.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	var l artifacts.JournalLine
	if err := json.Unmarshal(lines[2], &l); err != nil || l.Visit == nil {
		t.Fatalf("journal line 3 = %s (%v), want a visit", lines[2], err)
	}
	calls := l.Visit.CallsPerSample
	l.Visit.CallsPerSample *= 2
	lines[2], _ = json.Marshal(l)
	if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := tp(t, append(args, "--resume")...)
	want := fmt.Sprintf("tilepipe: error: --resume %s: journal.jsonl:3: visit %d: batch sample 0: %d calls, callsPerSample %d: the journal disagrees with what it points to (edited or corrupted); start a new replay\n",
		rep, l.Visit.Index, calls, 2*calls)
	if code != exitFailure || errs != want {
		t.Errorf("resume of an edited journal = exit %d\n%s\nwant exit 1\n%s", code, errs, want)
	}
}

// slowBuild describes itself at once and takes 30 s to build.
const slowBuild = `#!/bin/sh
if [ "$1" = describe ]; then
  echo '{"protocol": 1, "name": "slow", "kind": "object", "version": "slow 1", "available": true, "reason": "", "ops": ["add"]}'
  exit 0
fi
exec sleep 30
`

// TestCaptureInterrupted: SIGINT or SIGTERM while a route builds stops
// the capture at once: exit 128 + the signal, nothing committed, no
// directory left (before, the killed build was committed as "crashed"
// and prepare accepted it), and the same command runs again.
func TestCaptureInterrupted(t *testing.T) {
	dir := t.TempDir()
	route := filepath.Join(dir, "route")
	cohort := filepath.Join(dir, "cohort.json")
	if err := os.WriteFile(route, []byte(slowBuild), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(cohort, []byte(`{"schema": 1, "cases": [{"op": "add", "dims": {"M": 4, "N": 10}, "seed": 9}]}`), 0o644)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		out := filepath.Join(dir, "capture-"+signalName(sig))
		cmd := exec.Command(tilepipeBinary(t), "capture", "--cohort", cohort, "--routes", "", "--route-exec", route, "--no-sandbox", "--output", out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "packet"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("capture did not start building within 30 s: %s", stderr.String())
			}
		}
		time.Sleep(500 * time.Millisecond) // the build is running: it takes 30 s
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
			t.Fatalf("%s: capture = %v, want exit %d\n%s", signalName(sig), err, 128+int(sig), stderr.String())
		}
		want := "tilepipe: interrupted by " + signalName(sig) + "; capture stopped and removed its incomplete directory: run the same command again\n"
		if !strings.HasSuffix(stderr.String(), want) {
			t.Errorf("%s: stderr ends %q, want %q", signalName(sig), lastLines(stderr.String(), 2), want)
		}
		if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the interrupted capture left %s (%v)", signalName(sig), out, err)
		}
	}
}

// TestRunCohortErrorLeavesNothing: run with a cohort that does not parse
// fails before anything is committed and leaves no run directory, so the
// corrected command can use the same name.
func TestRunCohortErrorLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	cohort := filepath.Join(dir, "bad.json")
	os.WriteFile(cohort, []byte(`{"schema": 1, "cases": [{"op": "add", "dims": {"M": 4, "N": 10}, "params": {"alpha": 2}}]}`), 0o644)
	out := filepath.Join(dir, "run")
	code, _, errs := tp(t, "run", "--cohort", cohort, "--routes", "", "--route-exec", testroute.Path(t), "--output", out)
	want := "tilepipe: error: " + cohort + ":1: case add-4x10: params.alpha: op add takes no parameters\n"
	if code != exitFailure || errs != want {
		t.Errorf("run with a bad cohort = exit %d %q, want exit 1 %q", code, errs, want)
	}
	if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run with a bad cohort left %s (%v)", out, err)
	}
}

// TestReplayDefaultBaseline: a replay given no --baseline of a capture
// without the default baseline (torch-eager) has none, says so and passes
// (a one-route capture, such as halide-cuda's carried to a GPU machine,
// was refused on an H100); a --baseline that was not captured is still
// refused, with the routes named.
func TestReplayDefaultBaseline(t *testing.T) {
	long(t)
	dir := passingRun(t)
	rep := filepath.Join(t.TempDir(), "replay")
	args := append([]string{"replay", "--prepared", filepath.Join(dir, "prepared"), "--capture", filepath.Join(dir, "capture"), "--rounds", "2"}, fast...)
	code, _, errs := tp(t, append(args, "--output", rep)...)
	if code != 0 || !strings.Contains(errs, "replay: no baseline: the default, torch-eager, is not among the captured routes [naive] (no ratios; --baseline ROUTE names one)") {
		t.Fatalf("replay without --baseline = exit %d, want 0 and the note\n%s", code, errs)
	}
	if b := readReplay(t, rep).Config.Baseline; b != "" {
		t.Errorf("config.baseline %q, want none", b)
	}
	if code, out := auditRun(t, dir, rep); code != 0 {
		t.Errorf("audit of the replay without a baseline = exit %d\n%s", code, out)
	}
	code, _, errs = tp(t, append(args, "--output", filepath.Join(t.TempDir(), "r2"), "--baseline", "torch-eager")...)
	if code == 0 || !strings.Contains(errs, `--baseline "torch-eager": not one of the captured routes [naive]`) {
		t.Errorf("replay --baseline torch-eager = exit %d, want the refusal\n%s", code, errs)
	}
}
