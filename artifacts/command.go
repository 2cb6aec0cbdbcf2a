package artifacts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"
)

// MaxOutputBytes bounds what a child's stdout or stderr may hold.
const MaxOutputBytes = 64 << 20

// passEnv are the variables of this process's environment every command
// tilepipe runs gets (if set): where programs are, whose home, the locale,
// and OpenBLAS's CPU override, which some machines need to run it at all.
// Everything else is scrubbed; a command's own variables are its envDelta.
var passEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"}

// Env is the scrubbed environment: the passEnv variables of this process
// plus delta (which wins), sorted.
func Env(delta map[string]string) []string {
	env := map[string]string{}
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range delta {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// PipeGrace is how long a command's stdout and stderr may stay open after
// it exited (a process it left behind holds them).
const PipeGrace = 5 * time.Second

// Run runs argv in dir with a scrubbed environment ([Env] of envDelta) in a
// process group of its own, stores its stdout and stderr as blobs, and
// records it as a [Command]. When the command exits, or its timeout
// passes, every process left in its group is killed. A non-zero exit, a
// signal, the timeout or a pipe held open is not an error: it is in
// Command.Exit and the returned reason. err is for "could not run".
func (s *Store) Run(ctx context.Context, argv []string, dir string, envDelta map[string]string, timeout time.Duration) (cmd Command, stdout []byte, reason string, err error) {
	if len(argv) == 0 {
		return Command{}, nil, "", errors.New("run: empty argv")
	}
	parent := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Dir = dir
	c.Env = Env(envDelta)
	// Its own process group: a terminal's Ctrl-C reaches tilepipe alone,
	// which then ends the group. Pdeathsig: it dies with tilepipe.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	killGroup := func() error {
		if c.Process != nil {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
		return nil
	}
	c.Cancel = killGroup
	out, errb := &limitedBuffer{limit: MaxOutputBytes}, &limitedBuffer{limit: MaxOutputBytes}
	outDone, errDone, err := pipeTo(c, out, errb)
	if err != nil {
		return Command{}, nil, "", fmt.Errorf("run %s: %w", argv[0], err)
	}
	var runErr error
	if runErr = c.Start(); runErr == nil {
		runErr = c.Wait()
	}
	closeChild(c)
	killGroup() // what the command left behind in its group
	held := !drained(PipeGrace, outDone, errDone)
	closeParent(out, errb)
	cmd = Command{Argv: argv, EnvDelta: envDelta, Dir: dir}
	if d, e := s.PutBytes(out.bytes(), MediaText); e == nil {
		cmd.Stdout = d.Digest
	} else {
		return cmd, nil, "", e
	}
	if d, e := s.PutBytes(errb.bytes(), MediaText); e == nil {
		cmd.Stderr = d.Digest
	} else {
		return cmd, nil, "", e
	}
	if reason, err = exitReason(parent, ctx, runErr, timeout, &cmd); err != nil {
		return cmd, nil, "", err
	}
	switch {
	case reason != "":
	case out.over || errb.over:
		reason = fmt.Sprintf("output_too_large: more than %d bytes", MaxOutputBytes)
		cmd.Exit = -1
	case held:
		reason = fmt.Sprintf("pipe_held_open: stdout or stderr still open %s after the command exited (a process it started outside its group holds it)", PipeGrace)
		cmd.Exit = -1
	}
	if reason != "" && len(errb.bytes()) > 0 {
		reason += ": " + lastLine(errb.bytes())
	}
	return cmd, out.bytes(), reason, nil
}

// drained waits up to grace for both pipes' drains to end: false if one
// is still held open.
func drained(grace time.Duration, done ...chan struct{}) bool {
	t := time.NewTimer(grace)
	defer t.Stop()
	for _, d := range done {
		select {
		case <-d:
		case <-t.C:
			return false
		}
	}
	return true
}

// exitReason: why the command ended, as a result about it (timed out,
// crashed, exited non-zero; cmd.Exit set), or an error when its end says
// nothing about it (tilepipe interrupted, or it could not run).
func exitReason(parent, ctx context.Context, runErr error, timeout time.Duration, cmd *Command) (reason string, err error) {
	var ee *exec.ExitError
	switch {
	case parent.Err() != nil:
		// Interrupted: the command was killed by us, not by its own
		// doing; that is no result about it.
		return "", parent.Err()
	case runErr == nil:
	case ctx.Err() == context.DeadlineExceeded:
		cmd.Exit = -1
		reason = fmt.Sprintf("timed_out: after %s", timeout)
	case errors.As(runErr, &ee):
		cmd.Exit = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			reason = fmt.Sprintf("crashed: killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		} else {
			reason = fmt.Sprintf("exited: status %d", cmd.Exit)
		}
	default:
		return "", fmt.Errorf("run %s: %w", cmd.Argv[0], runErr)
	}
	return reason, nil
}

// pipeTo gives c pipes for stdout and stderr, drained into out and errb
// by goroutines of ours (not exec's, which would make Wait wait for every
// process that holds them).
func pipeTo(c *exec.Cmd, out, errb *limitedBuffer) (outDone, errDone chan struct{}, err error) {
	drain := func(b *limitedBuffer) (*os.File, chan struct{}, error) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			io.Copy(b, r)
		}()
		b.r = r
		return w, done, nil
	}
	var ow, ew *os.File
	if ow, outDone, err = drain(out); err != nil {
		return nil, nil, err
	}
	if ew, errDone, err = drain(errb); err != nil {
		ow.Close()
		out.r.Close()
		return nil, nil, err
	}
	c.Stdout, c.Stderr = ow, ew
	return outDone, errDone, nil
}

// closeChild closes the parent's copies of the child's pipe ends.
func closeChild(c *exec.Cmd) {
	for _, w := range []io.Writer{c.Stdout, c.Stderr} {
		w.(*os.File).Close()
	}
}

// closeParent closes the read ends, ending a drain that a held pipe blocks.
func closeParent(bs ...*limitedBuffer) {
	for _, b := range bs {
		b.r.Close()
	}
}

func lastLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	if len(b) > 300 {
		b = b[:300]
	}
	return string(b)
}

// limitedBuffer keeps at most limit bytes and drains the rest, so the
// child never blocks on a full pipe. Its drain goroutine may still run
// when Run returns (a held pipe), hence the lock.
type limitedBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
	over  bool
	r     *os.File // the read end it drains
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len()+len(p) > b.limit {
		b.over = true
		b.buf.Write(p[:max(0, b.limit-b.buf.Len())])
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *limitedBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
