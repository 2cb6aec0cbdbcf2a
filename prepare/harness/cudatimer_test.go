package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/launch"
	"github.com/tilepipe/tilepipe/internal/telemetry"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
)

// cudaTimer builds harness.c with its CUDA back end (cuda/backend.c): no
// CUDA header or library is needed to build it.
func cudaTimer(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "cuda-timer")
	cc(t, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-DTILEPIPE_CUDA", "-o", exe, "harness.c", "-ldl")
	return exe
}

// TestCudaTimerBuilds: CI (no GPU) builds the CUDA timer; its closure
// listing, its ceilings, its health check and its telemetry load the driver first, so
// without one they say so and exit 2.
func TestCudaTimerBuilds(t *testing.T) {
	exe := cudaTimer(t)
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("a GPU driver is here")
	}
	for _, args := range [][]string{{"--closure"}, {"--ceilings"}, {"--ceilings", "/usr/lib/libcublas.so"}, {"--health"}, {"--telemetry"}} {
		_, stderr, err := run(t, exe, args...)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.HasPrefix(string(stderr), "harness: error: dlopen libcuda.so.1: ") {
			t.Errorf("cuda-timer %s without a driver = %v %q, want exit 2 naming dlopen", strings.Join(args, " "), err, stderr)
		}
	}
	_, stderr, err := run(t, exe, "--ceilings", "a", "b")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || string(stderr) != "harness: error: usage: cuda-timer --ceilings [LIBCUBLAS]\n" {
		t.Errorf("cuda-timer --ceilings a b = %v %q, want exit 2 and its usage", err, stderr)
	}
}

// TestCudaTimerVisitFile: the CUDA timer's own visit keys are read before
// anything touches the driver, so CI checks them: an L2 policy other than
// warm or flush, or given twice, is refused naming the line (a CPU
// harness refuses the key altogether: TestVisitMalformed).
func TestCudaTimerVisitFile(t *testing.T) {
	exe := cudaTimer(t)
	for _, tc := range []struct{ name, l2, want string }{
		{"unknown policy", "l2 cold\n", `VISIT:3: l2: want "l2 warm" or "l2 flush"`},
		{"no policy", "l2\n", `VISIT:3: l2: want "l2 warm" or "l2 flush"`},
		{"twice", "l2 warm\nl2 flush\n", `VISIT:4: duplicate key "l2"`},
		{"graph of no calls", "graph 0\n", `VISIT:3: graph: want one integer in [1, 10000000]`},
		{"graph too large", "graph 10000001\n", `VISIT:3: graph: want one integer in [1, 10000000]`},
		{"graph twice", "graph 32\ngraph 32\n", `VISIT:4: duplicate key "graph"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newGemmCase(t)
			text := strings.Replace(c.visitText(), "threads 2\n", "threads 2\n"+tc.l2, 1)
			if err := os.WriteFile(c.visit, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tc.want, "VISIT", c.visit)
			r := runVisit(t, exe, c)
			if !strings.HasPrefix(r.Reason, "exited: status 2: harness: error: ") || !strings.Contains(r.Reason, want) {
				t.Errorf("cuda-timer --visit (%s) = %q, want exit status 2 naming %q", tc.name, r.Reason, want)
			}
		})
	}
}

// TestCudaTimerVisit runs the CUDA timer on the GPU (skipped without one,
// or without Triton): the triton route builds add for 1000 x 1000 f32,
// the timer validates two warm sets, serves samples and a novel sample
// (frozen between, as replay drives them), and every output is A + B; a launch whose grid
// covers only the first block leaves the poison and fails the visit.
func TestCudaTimerVisit(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no GPU here")
	}
	if err := exec.Command("python3", "-c", "import triton").Run(); err != nil {
		t.Skip("no Triton here")
	}
	const m, n = 1000, 1000
	c := oracle.Case{ID: "add-1000x1000-cuda", Op: "add", Dims: map[string]int{"M": m, "N": n}, Dtype: "f32", Pattern: "normal", Seed: 1, Policy: "strict", Device: "cuda"}
	sig, err := oracle.Signature(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cf := filepath.Join(dir, "case.json")
	b, _ := json.Marshal(struct {
		oracle.Case
		Signature []oracle.Param `json:"signature"`
		Threads   int            `json:"threads"`
	}{c, sig, 1})
	os.WriteFile(cf, b, 0o644)
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	route, _ := filepath.Abs("../../routes/triton/route")
	if out, err := exec.Command(route, "build", "--case", cf, "--workdir", work).CombinedOutput(); err != nil || !strings.Contains(string(out), `"built"`) {
		t.Fatalf("triton build: %v\n%s", err, out)
	}
	mb, err := os.ReadFile(filepath.Join(work, "launch.json"))
	if err != nil {
		t.Fatal(err)
	}
	man, err := launch.Parse(mb)
	if err == nil {
		err = man.Check(sig)
	}
	if err != nil {
		t.Fatal(err)
	}
	exe := cudaTimer(t)
	for _, tc := range []struct{ name, want string }{
		{"honest", ""},
		{"one block", "output_not_overwritten: C set 0 element 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lm := man
			if tc.want != "" {
				lm.Grid = [3]uint32{1, 1, 1}
			}
			lf := filepath.Join(t.TempDir(), "launch.txt")
			os.WriteFile(lf, []byte(lm.Lines(sig)), 0o644)
			r, files, a, bb := runAdd(t, exe, filepath.Join(work, "kernel.cubin"), lf, m*n)
			if r.Reason != tc.want {
				t.Fatalf("visit reason %q, want %q (validated %+v)", r.Reason, tc.want, r.Validated)
			}
			if tc.want != "" {
				return
			}
			// Every warm and novel output is A + B, as float32 adds.
			for pi, pool := range []int{4, 5} { // C warm, C fresh
				for s := range sets {
					got := files[pool].Set(s)
					for i := 0; i < m*n; i++ {
						want := a[pi][s][i] + bb[pi][s][i]
						if g := math.Float32frombits(uint32(got[4*i]) | uint32(got[4*i+1])<<8 | uint32(got[4*i+2])<<16 | uint32(got[4*i+3])<<24); g != want {
							t.Fatalf("pool %d set %d element %d = %g, want %g", pi, s, i, g, want)
						}
					}
				}
			}
			t.Logf("calls per sample %d; samples %v", r.Calls, r.Samples)
		})
	}
}

// runAdd drives one add visit of the CUDA timer as replay does: warm and
// fresh memory files for A, B (random) and C, samples, a novel sample of
// every fresh set.
func runAdd(t *testing.T, exe, cubin, lf string, elems int) (*visit.Run, []*visit.MemFile, [2][][]float32, [2][][]float32) {
	t.Helper()
	bytes := elems * 4
	var a, b [2][][]float32
	var files []*visit.MemFile
	rng := rand.New(rand.NewPCG(1, 2))
	for _, in := range []struct {
		name string
		x    *[2][][]float32
	}{{"A", &a}, {"B", &b}} {
		for pi, pool := range []string{visit.PoolWarm, visit.PoolFresh} {
			var raw [][]byte
			for range sets {
				x := make([]float32, elems)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				in.x[pi] = append(in.x[pi], x)
				raw = append(raw, floatBytes(x))
			}
			mf, err := visit.NewInput(in.name, visit.NewLayout(pool, sets, bytes), raw)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, mf)
		}
	}
	for _, pool := range []string{visit.PoolWarm, visit.PoolFresh} {
		mf, err := visit.NewOutput("C", visit.NewLayout(pool, sets, bytes))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, mf)
	}
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
	})
	vf := filepath.Join(t.TempDir(), "visit.txt")
	os.WriteFile(vf, []byte(fmt.Sprintf(`tilepipe-visit 3
threads 1
pool warm %d 4096
pool fresh %d 64
param input A f32 %d 5 6
param input B f32 %d 7 8
param output C f32 %d 9 10
cubin %s
launch %s
`, sets, sets, bytes, bytes, bytes, cubin, lf)), 0o644)
	var osf []*os.File
	for _, f := range files {
		osf = append(osf, f.File)
	}
	l, err := visit.ProbeLimiter()
	if err != nil || !l.CanFreeze() {
		t.Skipf("no freezer here for novel samples: %v", err)
	}
	// The novel slots are staged as replay stages them (novel rule 3):
	// by the timer's own --telemetry, the monitor.
	m, err := telemetry.Start([]string{exe, "--telemetry"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	spec := visit.Spec{Argv: []string{exe, "--visit", vf}, Dir: filepath.Dir(exe), Timeout: 60 * time.Second, Threads: 1, Files: osf, Limiter: l}
	r, err := visit.RunAll(context.Background(), spec, func(s *visit.Session) ([]visit.Sample, int64, error) {
		ss, n, err := s.Drive(plan)
		if err != nil {
			return nil, 0, err
		}
		if err := s.Freeze(); err != nil {
			return nil, 0, err
		}
		fresh := []telemetry.StageFile{{Name: "A", Role: oracle.RoleInput, Bytes: int64(bytes), File: files[1].File},
			{Name: "B", Role: oracle.RoleInput, Bytes: int64(bytes), File: files[3].File}, {Name: "C", Role: oracle.RoleOutput, Bytes: int64(bytes), File: files[5].File}}
		if _, err := m.Open(sets, visit.FreshGap, fresh); err != nil {
			return nil, 0, err
		}
		st, err := m.Stage(1, sets, false)
		if err != nil {
			return nil, 0, err
		}
		var reason string
		span, tn, err := s.NovelStaged(sets, &visit.Staging{Slots: st.File, Probe: func() error { return m.Probe(1) },
			Unstage: func() error { reason, err = m.Unstage(1); return err }})
		st.File.Close()
		if err == nil && reason != "" {
			err = &visit.Failure{Reason: reason}
		}
		return append(ss, visit.Sample{Kind: samples.KindNovel, Calls: sets, SpanNs: span.Nanoseconds(), TimerNs: tn}), n, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, files, a, b
}
