package artifacts

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LockFile is the file of a stage directory that its one writer holds
// locked (flock) from creating or resuming the stage until it commits. The
// kernel releases the lock when the writer dies, however it dies; the
// file itself, naming the holder, is removed after the commit.
const LockFile = "lock"

// Holder is what the lock file says about the process that holds it.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Command string    `json:"command"`
	Started time.Time `json:"started"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d on %s (%s), since %s", h.PID, h.Host, h.Command, h.Started.Format(time.RFC3339))
}

// LockedError is a second writer's refusal: the stage directory has a
// living writer.
type LockedError struct {
	Dir    string
	Holder Holder
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("stage %s is being written by %s: one writer per stage directory; wait for it or stop it", e.Dir, e.Holder)
}

// lock takes the stage's writer lock without waiting and records this
// process as its holder.
func (s *Store) lock() error {
	p := filepath.Join(s.dir, LockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("stage %s: lock: %w", s.dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			var h Holder
			b, _ := os.ReadFile(p)
			if json.Unmarshal(b, &h) != nil {
				h.Command = "unknown: the lock file does not say"
			}
			return &LockedError{Dir: s.dir, Holder: h}
		}
		return fmt.Errorf("stage %s: lock: %w", s.dir, err)
	}
	host, _ := os.Hostname()
	h := Holder{PID: os.Getpid(), Host: host, Command: strings.Join(os.Args, " "), Started: time.Now().UTC()}
	if len(h.Command) > 300 {
		h.Command = h.Command[:300] + "..."
	}
	b, _ := json.Marshal(h)
	if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		f.Close()
		return err
	}
	s.lockFile = f
	return nil
}

// unlock removes the lock file and releases the lock. After a commit
// nobody may write the stage again, and a writer that opened the old file
// meanwhile finds index.json.
func (s *Store) unlock() {
	if s.lockFile == nil {
		return
	}
	os.Remove(filepath.Join(s.dir, LockFile))
	s.lockFile.Close()
	s.lockFile = nil
}

// Resume opens an uncommitted stage directory for its writer to continue:
// it takes the writer lock and refuses a stage that was committed.
func Resume(dir string) (*Store, error) {
	s, err := OpenIncomplete(dir)
	if err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(s.dir, "index.json")); err == nil {
		s.unlock()
		return nil, fmt.Errorf("stage %s already finished (index.json exists): nothing to resume", s.dir)
	}
	return s, nil
}

// Discard removes a stage directory this process created and has not
// committed: a stage that failed before its commit leaves nothing behind.
// It does nothing to a resumed or committed stage.
func (s *Store) Discard() error {
	if !s.created || s.committed {
		return nil
	}
	err := os.RemoveAll(s.dir)
	s.unlock()
	return err
}

// Abort is Discard for a writer's deferred cleanup: where *err is set (the
// writer failed, or was interrupted, before its commit) it removes the
// stage this process created, adding to *err any failure to remove it.
//
//	s, err := artifacts.Begin(dir, "capture", say)
//	...
//	defer s.Abort(&err)
func (s *Store) Abort(err *error) {
	if *err == nil {
		return
	}
	if derr := s.Discard(); derr != nil {
		*err = fmt.Errorf("%w (and removing the incomplete %s: %v)", *err, s.dir, derr)
	}
}

// Begin starts writing the stage named name (capture, prepare) at dir, as
// Restart does, and says through say (when not nil) that a stage a dead
// writer left incomplete is started again.
func Begin(dir, name string, say func(format string, args ...any)) (*Store, error) {
	s, dead, err := Restart(dir)
	if err != nil {
		return nil, err
	}
	if dead != nil && say != nil {
		say("%s: %s was left incomplete by %s, which died: starting it again", name, s.Dir(), dead)
	}
	return s, nil
}

// Release lets go of the writer lock of a stage that stays uncommitted
// (a replay to be resumed), keeping the lock file: removing it could let
// two later writers lock two different files.
func (s *Store) Release() {
	if s.lockFile != nil {
		s.lockFile.Close()
		s.lockFile = nil
	}
}

// Restart is Create for a stage that cannot be resumed (capture,
// prepare): where dir is an uncommitted stage whose writer died (kill -9
// leaves one behind), it is removed and made anew, and dead names that
// writer; any other existing dir is refused as Create refuses it, and an
// uncommitted stage with a living writer as a second writer is.
func Restart(dir string) (s *Store, dead *Holder, err error) {
	old, oerr := OpenIncomplete(dir)
	if oerr != nil {
		return create(dir)
	}
	if _, ierr := os.Lstat(filepath.Join(old.dir, "index.json")); ierr == nil {
		return create(dir) // committed: never overwritten
	}
	b, lerr := os.ReadFile(filepath.Join(old.dir, LockFile))
	if lerr != nil {
		return create(dir) // not a stage tilepipe was writing
	}
	var h Holder
	if json.Unmarshal(b, &h) != nil {
		h.Command = "unknown: the lock file does not say"
	}
	if err := old.lock(); err != nil {
		return nil, nil, err // its writer is alive
	}
	err = os.RemoveAll(old.dir)
	old.Release()
	if err != nil {
		return nil, nil, fmt.Errorf("restart %s: %w", dir, err)
	}
	s, err = Create(dir)
	return s, &h, err
}

func create(dir string) (*Store, *Holder, error) {
	s, err := Create(dir)
	return s, nil, err
}
