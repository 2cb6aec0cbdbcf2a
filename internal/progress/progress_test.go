package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A writer that is not a terminal gets one plain line per step, no
// carriage returns.
func TestLinesWhenNotATerminal(t *testing.T) {
	var b bytes.Buffer
	r := New(&b)
	r.Step("capture", 1, 2, "gemm halide")
	r.Printf("capture: %s failed", "x")
	r.Step("capture", 2, 2, "gemm torch")
	r.Done()
	got := b.String()
	if strings.Contains(got, "\r") {
		t.Errorf("progress on a non-terminal wrote a carriage return: %q", got)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "tilepipe: capture [1/2 ") || !strings.HasSuffix(lines[0], "] gemm halide") || lines[1] != "tilepipe: capture: x failed" {
		t.Errorf("progress lines = %q, want 3 lines: step, message, step", lines)
	}
}

// On a terminal the status line is rewritten in place and ended before a
// message.
func TestRewritesOnATerminal(t *testing.T) {
	var b bytes.Buffer
	r := &Reporter{w: &b, tty: true}
	r.Step("replay", 1, 3, "a long message")
	r.Step("replay", 2, 3, "short")
	r.Printf("done")
	got := b.String()
	if !strings.HasPrefix(got, "\rtilepipe: replay [1/3") || strings.Count(got, "\r") != 2 || !strings.HasSuffix(got, "\ntilepipe: done\n") {
		t.Errorf("terminal progress = %q, want two rewrites then the message on its own line", got)
	}
}

func TestNilReporterIsQuiet(t *testing.T) {
	var r *Reporter
	r.Step("x", 1, 1, "y")
	r.Printf("z")
	r.Done()
}

// The time left comes from the stage's own rate: after the first step,
// each step's share of the time since the first, times the steps to go;
// work that may follow within a bound says "up to".
func TestTimeLeft(t *testing.T) {
	var b bytes.Buffer
	now := time.Unix(1000, 0)
	r := &Reporter{w: &b, start: now.Add(-time.Minute), now: func() time.Time { return now }}
	r.Step("replay", 1, 11, "first")
	now = now.Add(20 * time.Second)
	r.Step("replay", 3, 11, "third")
	now = now.Add(50 * time.Second)
	r.StepUpTo("replay", 8, 11, 5*time.Minute, "eighth")
	r.Step("audit", 1, 2, "its own rate")
	want := "tilepipe: replay [1/11 1m0s] first\n" +
		"tilepipe: replay [3/11 1m20s, about 1m30s left] third\n" + // 10 s a step, 9 to go
		"tilepipe: replay [8/11 2m10s, about 40s left, up to 5m0s more] eighth\n" +
		"tilepipe: audit [1/2 2m10s] its own rate\n"
	if got := b.String(); got != want {
		t.Errorf("progress =\n%s\nwant\n%s", got, want)
	}
}
