package artifacts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestOneWriter: a stage being written refuses a second writer, naming
// the holder, whether it resumes or restarts the stage; once the writer
// is gone (its lock released, as the kernel does when it dies) the stage
// can be resumed, and a capture-like stage restarted.
func TestOneWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "stage")
	s, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	prefix := fmt.Sprintf("stage %s is being written by pid %d on %s (", dir, os.Getpid(), host)
	suffix := "Z: one writer per stage directory; wait for it or stop it"
	var le *LockedError
	if _, err := Resume(dir); !errors.As(err, &le) || !strings.HasPrefix(err.Error(), prefix) || !strings.HasSuffix(err.Error(), suffix) {
		t.Errorf("Resume while written = %v, want %s...%s", err, prefix, suffix)
	}
	if _, _, err := Restart(dir); !errors.As(err, &le) || !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("Restart while written = %v, want %s...", err, prefix)
	}
	if _, err := s.PutBytes([]byte("work"), MediaText); err != nil {
		t.Fatal(err)
	}
	s.Release() // the writer dies

	r, err := Resume(dir)
	if err != nil {
		t.Fatalf("Resume after the writer died: %v", err)
	}
	r.Release()
	s2, dead, err := Restart(dir)
	if err != nil || dead == nil || dead.PID != os.Getpid() {
		t.Fatalf("Restart after the writer died = %v, dead %+v; want a new stage naming pid %d", err, dead, os.Getpid())
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "blobs", "sha256")); len(ents) != 0 {
		t.Errorf("the restarted stage kept %d blobs of the dead writer", len(ents))
	}
	if _, err := s2.Commit(CaptureType, mustPut(t, s2, "{}"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, LockFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the commit the lock file is still there (%v)", err)
	}
	want := fmt.Sprintf("stage %s already finished (index.json exists): nothing to resume", dir)
	if _, err := Resume(dir); err == nil || err.Error() != want {
		t.Errorf("Resume of a committed stage = %v, want %s", err, want)
	}
	want = fmt.Sprintf("output directory %s already exists; stages never overwrite, choose a new one", dir)
	if _, _, err := Restart(dir); err == nil || err.Error() != want {
		t.Errorf("Restart of a committed stage = %v, want %s", err, want)
	}
	// A directory that is no stage of tilepipe's is never removed.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "keep"), []byte("x"), 0o644)
	if _, _, err := Restart(other); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Restart of a foreign directory = %v, want already exists", err)
	}
	if _, err := os.Stat(filepath.Join(other, "keep")); err != nil {
		t.Errorf("Restart touched a foreign directory: %v", err)
	}
}

// TestDiscard: a created, uncommitted stage is removed; a resumed one is
// not (its journal is the work of an earlier run).
func TestDiscard(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "stage")
	s, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Release()
	r, err := Resume(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Discard(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("Discard removed a resumed stage: %v", err)
	}
	r.Release()
	s, err = Create(filepath.Join(t.TempDir(), "new"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Discard left the stage it created: %v", err)
	}
}

func mustPut(t *testing.T, s *Store, js string) ocispec.Descriptor {
	t.Helper()
	d, err := s.PutBytes([]byte(js), MediaStatement)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestAbort: a writer's deferred Abort removes the stage it created when
// it failed, keeps it when it did not, and leaves a committed stage alone.
func TestAbort(t *testing.T) {
	write := func(dir string, fail, commit bool) (err error) {
		s, err := Begin(dir, "test", nil)
		if err != nil {
			return err
		}
		defer s.Abort(&err)
		if _, err := s.PutBytes([]byte("x"), MediaOctet); err != nil {
			return err
		}
		if commit {
			cfg, err := s.PutJSON(map[string]string{}, MediaStatement)
			if err != nil {
				return err
			}
			if _, err := s.Commit(CaptureType, cfg, nil, nil); err != nil {
				return err
			}
		}
		if fail {
			return errors.New("the writer failed")
		}
		s.Release()
		return nil
	}
	for _, tc := range []struct {
		name         string
		fail, commit bool
		exists       bool
	}{
		{"failed before its commit", true, false, false},
		{"succeeded, uncommitted", false, false, true},
		{"failed after its commit", true, true, true},
	} {
		dir := filepath.Join(t.TempDir(), "stage")
		err := write(dir, tc.fail, tc.commit)
		if tc.fail != (err != nil) {
			t.Errorf("%s: write = %v", tc.name, err)
		}
		if _, serr := os.Lstat(dir); (serr == nil) != tc.exists {
			t.Errorf("%s: %s exists %v, want %v", tc.name, dir, serr == nil, tc.exists)
		}
	}
}
