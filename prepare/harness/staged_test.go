package harness

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/internal/fakecuda"
	"github.com/tilepipe/tilepipe/internal/telemetry"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
)

// stagedTimer builds the CUDA timer linked with testdata/cuda_entry.c
// (an object route's entry) under fault.
func stagedTimer(t *testing.T, fault string) string {
	t.Helper()
	dir := t.TempDir()
	src, err := WriteCUDA(dir, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	d := fmt.Sprint(dim)
	exe := filepath.Join(dir, "cuda-timer")
	cc(t, "-std=gnu11", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", "-DTILEPIPE_CUDA",
		"-DM="+d, "-DN="+d, "-DK="+d, "-DFAULT=FAULT_"+fault, "-o", exe, src, filepath.Join("testdata", "cuda_entry.c"), "-ldl")
	return exe
}

// TestCudaTimerStaged runs the CUDA timer (an object entry) on the fake
// driver through novel samples staged by the real monitor, as replay
// takes them under novel rule 3 (docs/gpu-clock.md, "The stager"): the
// timer maps each sample's allocation from the descriptor its command
// carries and runs its calls there, every output comes back into the
// memory file as A·B of the inputs written before the sample, and an
// entry that writes an input or a canary gap on a novel call is named by
// the monitor. A novel command without the descriptor ends the timer.
func TestCudaTimerStaged(t *testing.T) {
	l, err := visit.ProbeLimiter()
	if err != nil || !l.CanFreeze() {
		t.Skipf("no freezer here for novel samples: %v", err)
	}
	lib := fakecuda.Lib(t)
	for _, tc := range []struct{ fault, want string }{
		{"none", ""},
		{"input", "input_written: A fresh byte 68 (device) (novel sample 0)"},
		{"gap", "guard_overwritten: C fresh byte 1088 (device) (novel sample 0)"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			exe := stagedTimer(t, tc.fault)
			m, err := telemetry.Start([]string{exe, "--telemetry"}, fakecuda.Env(lib))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c := newGemmCaseWith(t, true)
			aFresh, bFresh, cFresh := c.files[1], c.files[3], c.files[5]
			var reasons []string
			spec := visit.Spec{Argv: []string{exe, "--visit", c.visit}, Env: fakecuda.Env(lib), Dir: c.dir, Timeout: 20 * time.Second, Threads: 2, Files: c.osFiles(), Limiter: l}
			r, err := visit.RunAll(context.Background(), spec, func(s *visit.Session) ([]visit.Sample, int64, error) {
				if _, _, err := s.Drive(plan); err != nil {
					return nil, 0, err
				}
				if err := s.Freeze(); err != nil {
					return nil, 0, err
				}
				files := []telemetry.StageFile{{Name: "A", Role: oracle.RoleInput, Bytes: dim * dim * 4, File: aFresh.File},
					{Name: "B", Role: oracle.RoleInput, Bytes: dim * dim * 4, File: bFresh.File}, {Name: "C", Role: oracle.RoleOutput, Bytes: dim * dim * 4, File: cFresh.File}}
				if _, err := m.Open(sets, visit.FreshGap, files); err != nil {
					return nil, 0, err
				}
				for k := range 3 {
					want := writeNovelGemm(aFresh, bFresh, k)
					cFresh.Fill(visit.FillPattern("f32", 12345))
					seq := int64(k + 1)
					st, err := m.Stage(seq, sets, false)
					if err != nil {
						return nil, 0, err
					}
					var reason string
					_, _, err = s.NovelStaged(sets, &visit.Staging{Slots: st.File,
						Probe:   func() error { return m.Probe(seq) },
						Unstage: func() error { reason, err = m.Unstage(seq); return err }})
					st.File.Close()
					if err != nil {
						return nil, 0, err
					}
					reasons = append(reasons, reason)
					for set := range sets {
						if got := cFresh.Set(set); !bytes.Equal(got, floatBytes(want[set])) {
							t.Errorf("novel sample %d set %d: C differs from A·B of the inputs written before it", k, set)
						}
					}
				}
				if err := m.CloseFiles(); err != nil {
					return nil, 0, err
				}
				_, _, err := s.Novel(sets) // no descriptor
				return nil, 0, err
			})
			if err != nil {
				t.Fatal(err)
			}
			if reasons[0] != tc.want || reasons[1] == "" && tc.want != "" {
				t.Errorf("the monitor's reasons = %q, want %q first", reasons, tc.want)
			}
			want := fmt.Sprintf(`exited: status 2: harness: error: command "novel %d %d": carried 0 descriptor(s), want 1`, r.Calls, sets)
			if !strings.Contains(r.Reason, `: carried 0 descriptor(s), want 1`) {
				t.Errorf("a novel command without its descriptor = %q, want %q", r.Reason, want)
			}
		})
	}
}

// TestCommandCarriesNoDescriptor: the CPU harness takes no descriptor
// with a command; a novel command that carries one (a staged sample sent
// to a CPU timer) ends it, naming the command.
func TestCommandCarriesNoDescriptor(t *testing.T) {
	l, err := visit.ProbeLimiter()
	if err != nil || !l.CanFreeze() {
		t.Skipf("no freezer here for novel samples: %v", err)
	}
	dir := t.TempDir()
	exe := linkFault(t, dir, compileHarness(t, dir), "none")
	c := newGemmCaseWith(t, true)
	spec := visit.Spec{Argv: []string{exe, "--visit", c.visit}, Dir: dir, Timeout: 20 * time.Second, Threads: 2, Files: c.osFiles(), Limiter: l}
	r, err := visit.RunAll(context.Background(), spec, func(s *visit.Session) ([]visit.Sample, int64, error) {
		if err := s.Freeze(); err != nil {
			return nil, 0, err
		}
		nop := func() error { return nil }
		_, _, err := s.NovelStaged(sets, &visit.Staging{Slots: c.files[1].File, Probe: nop, Unstage: nop})
		return nil, 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`exited: status 2: harness: error: command "novel 1 %d": carried 1 descriptor(s), want 0`, sets); !strings.HasPrefix(r.Reason, want) {
		t.Errorf("a CPU novel command carrying a descriptor = %q, want %q", r.Reason, want)
	}
}
