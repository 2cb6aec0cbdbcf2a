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
	// begun is when each stage's first step was reported: its rate so
	// far gives the time left.
	begun map[string]time.Time
	now   func() time.Time // nil: time.Now; a test's clock
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
// the status line; otherwise it prints one line. The line shows the time
// since the reporter began and, from the stage's rate so far, about how
// long the rest of its total takes.
func (r *Reporter) Step(stage string, done, total int, msg string) {
	r.StepUpTo(stage, done, total, 0, msg)
}

// StepUpTo is Step for a total that may grow by work bounded in time
// (an adaptive replay's rounds, within its budget): more is the most that
// work can add to the time left, said as "up to".
func (r *Reporter) StepUpTo(stage string, done, total int, more time.Duration, msg string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.now != nil {
		now = r.now()
	}
	if r.begun == nil {
		r.begun = map[string]time.Time{}
	}
	begun, ok := r.begun[stage]
	if !ok {
		begun, r.begun[stage] = now, now
	}
	line := fmt.Sprintf("tilepipe: %s [%d/%d %s%s] %s", stage, done, total, now.Sub(r.start).Round(time.Second), left(now.Sub(begun), done, total, more), msg)
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

// left is ", about 3m10s left" from the rate of the done items after the
// first (whose start is the stage's start), with ", up to 4m more" when
// more may follow; "" until a rate is known.
func left(elapsed time.Duration, done, total int, more time.Duration) string {
	if done < 2 || done > total || elapsed <= 0 {
		return ""
	}
	rest := time.Duration(float64(elapsed) / float64(done-1) * float64(total-done+1))
	s := ", about " + round(rest) + " left"
	if more > 0 {
		s += ", up to " + round(more) + " more"
	}
	return s
}

// round is d to the second, or to ten seconds above ten minutes.
func round(d time.Duration) string {
	if d > 10*time.Minute {
		return d.Round(10 * time.Second).String()
	}
	return d.Round(time.Second).String()
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
