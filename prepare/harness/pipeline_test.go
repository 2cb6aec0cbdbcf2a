package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/internal/fakecuda"
	"github.com/tilepipe/tilepipe/internal/visit"
)

// pipelineLaunch is a split-K GEMM pipeline in the timer's line form
// (launch.Manifest.Lines): four partial products into buffer 0, then their
// sum into C, both run on the host by the fake driver (fakecuda.c,
// fake_kernel).
func pipelineLaunch(launches ...string) string {
	w := 4 * dim * dim * 4
	var b strings.Builder
	fmt.Fprintf(&b, "arch sm_90\nbuffer %d 256\n", w)
	for _, l := range launches {
		switch l {
		case "partial":
			fmt.Fprintf(&b, "launch\nkernel fakecuda_gemm_partial\ngrid 1 1 1\nblock 1 1 1\ncluster 1 1 1\nshared 0\n"+
				"param tensor 0 16\nparam tensor 1 16\nparam buffer 0\nparam i32 %d\nparam i32 4\n", dim)
		case "reduce":
			fmt.Fprintf(&b, "launch\nkernel fakecuda_gemm_reduce\ngrid 1 1 1\nblock 1 1 1\ncluster 1 1 1\nshared 0\n"+
				"param buffer 0\nparam tensor 2 16\nparam i32 %d\nparam i32 4\n", dim)
		}
	}
	return b.String()
}

// TestCudaTimerPipeline runs the CUDA timer's pipeline (launch file with
// "launch" lines and a buffer) on the fake driver: every call launches
// the partial products and then their sum, in that order, on the one
// buffer, and the outputs are A·B; a pipeline whose sum reads the buffer
// without the launch that fills it gets only the poison the timer writes
// there before each validation call (NaN, then a huge value), and fails
// as unrepeatable; a buffer no launch takes, or a launch line after a
// launch of the one-launch form, ends the timer naming the line.
func TestCudaTimerPipeline(t *testing.T) {
	lib := fakecuda.Lib(t)
	exe := cudaTimer(t)
	for _, tc := range []struct{ name, launch, want string }{
		{"split-K", pipelineLaunch("partial", "reduce"), ""},
		{"stale buffer", pipelineLaunch("reduce"), "not_repeatable: C set 0 byte 0"},
		{"unused buffer", "buffer 64 16\n" + pipelineLaunch("partial", "reduce"), "exited: status 2: harness: error: LAUNCH: buffer 1: passed to no launch"},
		{"mixed forms", "kernel k\ngrid 1 1 1\nblock 1 1 1\nshared 0\nparam tensor 0 0\nlaunch\n", `exited: status 2: harness: error: LAUNCH:6: "launch" after a launch without one: one form or the other`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newGemmCase(t)
			lf, cf, log := filepath.Join(c.dir, "launch.txt"), filepath.Join(c.dir, "kernel.cubin"), filepath.Join(c.dir, "launches.log")
			// The visit file names them relative to the timer's directory:
			// its keys take no spaces, and the hostile suite's TMPDIR has one.
			for path, text := range map[string]string{lf: tc.launch, cf: "a cubin the fake driver never reads", c.visit: c.visitText() + "cubin kernel.cubin\nlaunch launch.txt\n"} {
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			spec := visit.Spec{Argv: []string{exe, "--visit", c.visit}, Env: fakecuda.Env(lib, "FAKECUDA_LAUNCH_LOG="+log), Dir: c.dir,
				Timeout: 20 * time.Second, Threads: 2, Files: c.osFiles()}
			r, err := visit.RunAll(context.Background(), spec, func(s *visit.Session) ([]visit.Sample, int64, error) { return s.Drive(plan) })
			if err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tc.want, "LAUNCH", "launch.txt")
			if r.Reason != want && !(strings.HasPrefix(want, "exited") && strings.HasPrefix(r.Reason, want)) {
				t.Fatalf("visit = %q, want %q", r.Reason, want)
			}
			if tc.want != "" {
				return
			}
			for s := range sets {
				if got := c.files[4].Set(s); !bytes.Equal(got, floatBytes(naiveGemm(c.a[s], c.b[s]))) {
					t.Errorf("warm set %d: C is not A·B", s)
				}
			}
			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			buf := ""
			for i, l := range lines {
				name, addr, _ := strings.Cut(l, " ")
				if want := []string{"fakecuda_gemm_partial", "fakecuda_gemm_reduce"}[i%2]; name != want || (buf != "" && addr != buf) {
					t.Fatalf("launch %d: %q, want %s on buffer %s (every call: partial, then reduce, one buffer)", i, l, want, buf)
				}
				buf = addr
			}
			if len(lines) < 20 || len(lines)%2 != 0 {
				t.Errorf("%d launches logged, want an even number from the validation calls and samples", len(lines))
			}
		})
	}
}
