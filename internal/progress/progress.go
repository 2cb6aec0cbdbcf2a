// Package progress reports long work: a single rewritten status line on a
// terminal, plain line-oriented messages otherwise (logs, CI, pipes).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Reporter writes progress to w.
type Reporter struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	start time.Time
	width int
}

// New reports to w; it redraws one line only when w is a terminal.
func New(w io.Writer) *Reporter {
	r := &Reporter{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		r.tty = true
	}
	return r
}

// Step reports item done of total with a message. On a terminal it rewrites
// the status line; otherwise it prints one line.
func (r *Reporter) Step(stage string, done, total int, msg string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	line := fmt.Sprintf("tilepipe: %s [%d/%d %s] %s", stage, done, total, time.Since(r.start).Round(time.Second), msg)
	if r.tty {
		pad := ""
		if n := r.width - len(line); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		fmt.Fprintf(r.w, "\r%s%s", line, pad)
		r.width = len(line)
		return
	}
	fmt.Fprintln(r.w, line)
}

// Printf prints a whole line, ending any status line first.
func (r *Reporter) Printf(format string, args ...any) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tty && r.width > 0 {
		fmt.Fprintln(r.w)
		r.width = 0
	}
	fmt.Fprintf(r.w, "tilepipe: "+format+"\n", args...)
}

// Done ends the status line.
func (r *Reporter) Done() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tty && r.width > 0 {
		fmt.Fprintln(r.w)
		r.width = 0
	}
}
