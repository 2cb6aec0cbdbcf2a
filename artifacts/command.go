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
	"syscall"
	"time"
)

// MaxOutputBytes bounds what a child's stdout or stderr may hold.
const MaxOutputBytes = 64 << 20

// Run runs argv in dir with envDelta added to this process's environment,
// stores its stdout and stderr as blobs, and records it as a [Command]. A
// non-zero exit, a signal or the timeout is not an error: it is in
// Command.Exit and the returned reason. err is for "could not run".
func (s *Store) Run(ctx context.Context, argv []string, dir string, envDelta map[string]string, timeout time.Duration) (cmd Command, stdout []byte, reason string, err error) {
	if len(argv) == 0 {
		return Command{}, nil, "", errors.New("run: empty argv")
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Dir = dir
	c.Env = os.Environ()
	keys := make([]string, 0, len(envDelta))
	for k := range envDelta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.Env = append(c.Env, k+"="+envDelta[k])
	}
	var out, errb limitedBuffer
	out.limit, errb.limit = MaxOutputBytes, MaxOutputBytes
	c.Stdout, c.Stderr = &out, &errb
	c.WaitDelay = 5 * time.Second
	runErr := c.Run()
	cmd = Command{Argv: argv, EnvDelta: envDelta, Dir: dir}
	if d, e := s.PutBytes(out.Bytes(), MediaText); e == nil {
		cmd.Stdout = d.Digest
	} else {
		return cmd, nil, "", e
	}
	if d, e := s.PutBytes(errb.Bytes(), MediaText); e == nil {
		cmd.Stderr = d.Digest
	} else {
		return cmd, nil, "", e
	}
	var ee *exec.ExitError
	switch {
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
	case ctx.Err() != nil:
		return cmd, nil, "", ctx.Err()
	default:
		return cmd, nil, "", fmt.Errorf("run %s: %w", argv[0], runErr)
	}
	if out.over || errb.over {
		reason = fmt.Sprintf("output_too_large: more than %d bytes", MaxOutputBytes)
		if cmd.Exit == 0 {
			cmd.Exit = -1
		}
	}
	if reason != "" && errb.Len() > 0 {
		reason += ": " + lastLine(errb.Bytes())
	}
	return cmd, out.Bytes(), reason, nil
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

type limitedBuffer struct {
	bytes.Buffer
	limit int
	over  bool
}

// ReadFrom shadows bytes.Buffer's, which io.Copy (used by os/exec) would
// otherwise call, bypassing the limit in Write.
func (b *limitedBuffer) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{b}, r)
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		// Keep draining the child so it never blocks on a full pipe.
		b.over = true
		b.Buffer.Write(p[:max(0, b.limit-b.Len())])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
