package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/internal/testroute"
)

// TestReplayRefusesWithoutFreezer: every visit is frozen between its novel
// samples (visit protocol 4), so a replay that cannot make a cgroup with a
// freezer has no claim to time. Run as an unprivileged user (nobody, by
// setpriv), which may make no cgroup here, replay refuses before anything
// is written, naming why, and creates no output directory. Skipped unless
// run as root with setpriv (make test is: CI runs it).
func TestReplayRefusesWithoutFreezer(t *testing.T) {
	long(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and setpriv to run replay as nobody")
	}
	// A directory nobody can read and traverse: t.TempDir's parents are
	// private, and the hostile suite's TMPDIR may be too.
	dir, err := os.MkdirTemp("/tmp", "tilepipe-nofreezer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	capDir, prepDir, repDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared"), filepath.Join(dir, "replay")
	if code, out, errs := tp(t, "capture", "--cohort", tinyCohort(t, gemm16), "--routes", "", "--route-exec", testroute.Path(t), "--output", capDir); code != 0 {
		t.Fatalf("capture = exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir); code != 0 {
		t.Fatalf("prepare = exit %d\n%s", code, errs)
	}
	exe := filepath.Join(dir, "tilepipe")
	b, err := os.ReadFile(builtTilepipe(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		mode := info.Mode().Perm() | 0o004 // readable by others
		if info.IsDir() {
			mode |= 0o001 // and traversable
		}
		return os.Chmod(p, mode)
	}); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777) // nobody may write the replay's output there
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", exe, "replay", "--prepared", prepDir, "--output", repDir, "--baseline", "naive")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	const want = "tilepipe: error: replay: a visit is frozen between its novel samples (docs/protocol.md, visit protocol 4), and no cgroup freezer can be made here (cgroup "
	if code != exitFailure || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "permission denied") {
		t.Errorf("replay as nobody = %v (exit %d), want exit %d and %q...permission denied...\n%s", err, code, exitFailure, want, stderr.String())
	}
	if _, err := os.Stat(repDir); !os.IsNotExist(err) {
		t.Errorf("replay refused, but %s exists (stat: %v): a refused replay writes nothing", repDir, err)
	}
}
