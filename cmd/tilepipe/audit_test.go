package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/internal/testroute"
	"github.com/tilepipe/tilepipe/oracle"
)

// forge rewrites a stage the way a careless or dishonest tool would: it
// changes the document (and receipt) and re-commits a self-consistent
// manifest, so every blob hashes correctly and only the audit's
// recomputations can tell.
func forge[T any](t *testing.T, dir, typ string, mutate func(s *artifacts.Store, doc *T, rec *artifacts.Receipt)) {
	t.Helper()
	st, err := artifacts.OpenStage(dir, typ, nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc T
	if err := st.ReadDoc(&doc); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Receipt()
	if err != nil {
		t.Fatal(err)
	}
	mutate(st.Store, &doc, &rec.Predicate)
	if _, err := st.Store.Finish(typ, doc, rec.Predicate, st.Manifest.Subject); err != nil {
		t.Fatal(err)
	}
}

// resample forges visit 0's sample table: mutate's rows are stored and
// the visit points at them.
func resample(t *testing.T, dir string, mutate func([]samples.Row) []samples.Row) {
	t.Helper()
	forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(s *artifacts.Store, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {
		rows, err := samples.ReadFile(s.Path(d.Visits[0].Samples), nil)
		if err != nil {
			t.Fatal(err)
		}
		sd, err := artifacts.PutSamples(s, mutate(rows))
		if err != nil {
			t.Fatal(err)
		}
		d.Visits[0].Samples = sd.Digest
	})
}

// retensor stores a copy of tensor ref with element 0 changed.
func retensor(t *testing.T, src, dst *artifacts.Store, ref artifacts.TensorRef) artifacts.TensorRef {
	t.Helper()
	tt, err := tensor.ReadFile(src.Path(ref.Digest), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tt.Release()
	b := append([]byte(nil), tt.Bytes()...)
	b[3] ^= 0x40 // the exponent of element 0 (f32) or a mantissa byte (f64)
	d, err := artifacts.PutTensor(dst, tt.Meta, b)
	if err != nil {
		t.Fatal(err)
	}
	ref.Digest, ref.Size = d.Digest, d.Size
	return ref
}

// TestAuditRecomputes forges one thing at a time and checks that exactly
// the audit check responsible catches it, with evidence.
func TestAuditRecomputes(t *testing.T) {
	good := passingRun(t)
	type replayDoc = artifacts.ReplayDoc
	for _, tc := range []struct {
		name   string
		forge  func(t *testing.T, dir string)
		check  string
		status string
		want   string
	}{
		{"summary edited", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Summary[0].MedianNs *= 0.5
			})
		}, "summaries", "FAILED", "summary gemm-16x16x16/naive medianNs: stored "},
		{"visit dropped", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Plan, d.Visits = d.Plan[:len(d.Plan)-1], d.Visits[:len(d.Visits)-1]
			})
		}, "balance", "FAILED", "planned 1 times, want one visit per round (2)"},
		{"output replaced", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(s *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				for i, v := range d.Visits {
					if v.Case == "gemm-16x16x16" {
						d.Visits[i].Outputs[0] = retensor(t, s, s, v.Outputs[0])
						return
					}
				}
			})
		}, "outputs", "FAILED", "passed in replay but warm set 0 fails the recomputed oracle: "}, // bound or nan: the inputs are drawn per replay
		{"visit before verification", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Visits[0].Start = d.Sessions[0].Verified.Add(-time.Second)
			})
		}, "time windows", "FAILED", "visit 0 started "},
		{"dependency not verified", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, _ *replayDoc, r *artifacts.Receipt) {
				r.ResolvedDependencies = r.ResolvedDependencies[:1]
			})
		}, "chain", "FAILED", "was not recorded as verified"},
		{"foreign dependency", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, _ *replayDoc, r *artifacts.Receipt) {
				r.ResolvedDependencies = append(r.ResolvedDependencies, artifacts.Dependency{Name: "elsewhere", Digest: artifacts.Digest("sha256:" + strings.Repeat("ab", 32)), VerifiedAt: r.StartedOn})
			})
		}, "chain", "FAILED", "replay receipt: consumed elsewhere (abababababab), which no predecessor stage produced"},
		{"impossible time", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Summary[0].MinNs = 1
			})
		}, "physical floor", "FAILED", "gemm-16x16x16/naive passed in replay, but below_physical_floor: fastest sample 1 ns per call, "},
		{"peak raised", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				f := &d.Sessions[0].Floors[0]
				f.PeakFlops *= 10
				f.ComputeNs /= 10 // consistent with itself, not with the clock and the flags
			})
		}, "physical floor", "FAILED", "session 0 floor of gemm-16x16x16: compute floor "},
		{"floor bytes", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Sessions[0].Floors[0].Bytes /= 2
			})
		}, "physical floor", "FAILED", "session 0 floor of gemm-16x16x16: bytes 1536, working set 6144; the case gives 3072 and 6144"},
		{"bandwidth inflated", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				for i := range d.Sessions {
					f := &d.Sessions[i].Floors[0]
					f.Bandwidth *= 100
					f.MemoryNs /= 100
				}
			})
		}, "physical floor", "WARNED", "gemm-16x16x16: the replay recorded "},
		{"fresh sample hidden", func(t *testing.T, dir string) {
			resample(t, dir, func(rows []samples.Row) []samples.Row {
				var out []samples.Row
				for _, r := range rows {
					if r.Kind != "fresh" {
						out = append(out, r)
					}
				}
				return out
			})
		}, "summaries", "FAILED", "passed in replay but fails the fresh-sample bound: 0 fresh samples of 0 calls in all and "},
		{"fresh sample slowed", func(t *testing.T, dir string) {
			resample(t, dir, func(rows []samples.Row) []samples.Row {
				for i := range rows {
					if rows[i].Kind == "fresh" {
						rows[i].TotalNs *= 1000
					}
				}
				return rows
			})
		}, "summaries", "FAILED", "passed in replay but fails the fresh-sample bound: memoisation_suspected: fresh calls took "},
		{"seeds changed", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Inputs.Rounds[0]++
			})
		}, "outputs", "FAILED", "fails the recomputed oracle"},
		{"allocator fill", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Visits[0].MallocPerturb++
			})
		}, "outputs", "FAILED", "visit 0: allocator fill "},
		{"input replaced", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "capture"), artifacts.CaptureType, func(s *artifacts.Store, d *artifacts.CaptureDoc, _ *artifacts.Receipt) {
				d.Cases[0].Packet.Inputs[0] = retensor(t, s, s, d.Cases[0].Packet.Inputs[0])
			})
		}, "inputs", "FAILED", "case gemm-16x16x16 input A: stored bytes differ from the recomputed ones at byte 3"},
		{"expected replaced", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "capture"), artifacts.CaptureType, func(s *artifacts.Store, d *artifacts.CaptureDoc, _ *artifacts.Receipt) {
				d.Cases[0].Packet.Expected[0] = retensor(t, s, s, d.Cases[0].Packet.Expected[0])
			})
		}, "oracle", "FAILED", "case gemm-16x16x16 expected C: stored bytes differ from the recomputed ones at byte 3"},
		{"other oracle version", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "capture"), artifacts.CaptureType, func(_ *artifacts.Store, d *artifacts.CaptureDoc, _ *artifacts.Receipt) {
				d.Oracle = "tilepipe-oracle/0"
			})
		}, "oracle", "FAILED", `capture: oracle "tilepipe-oracle/0", this auditor computes "` + oracle.Version + `": references and bounds are compared only within one oracle version; audit with the tilepipe that made the capture`},
		{"sandbox record dropped", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Sandbox = nil
			})
		}, "containment", "FAILED", "no sandbox recorded, and config.noSandbox is not set"},
		{"visit outside the sandbox", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Visits[0].Argv = d.Visits[0].Argv[len(d.Visits[0].Argv)-3:]
			})
		}, "containment", "FAILED", "visit 0: argv does not start with the recorded sandbox "},
		{"CPU beyond the threads", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Visits[0].CPUNs = 2*d.Visits[0].WallNs*int64(d.Visits[0].Threads) + 1e9
			})
		}, "containment", "FAILED", "visit 0: "},
		{"throttled visit passed", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Visits[0].Throttled = 3
			})
		}, "containment", "FAILED", "visit 0: passed, yet hit its CPU quota in 3 periods"},
		{"empty samples dropped", func(t *testing.T, dir string) {
			resample(t, dir, func(rows []samples.Row) []samples.Row {
				var kept []samples.Row
				for _, r := range rows {
					if r.Kind != "empty" {
						kept = append(kept, r)
					}
				}
				return kept
			})
		}, "containment", "FAILED", "visit 0: 0 empty samples (the channel's overhead), config says 2"},
		{"timer numbers replaced", func(t *testing.T, dir string) {
			resample(t, dir, func(rows []samples.Row) []samples.Row {
				for i := range rows {
					rows[i].TimerNs = rows[i].TotalNs + 1_000_000 // more than replay's span holds
				}
				return rows
			})
		}, "containment", "FAILED", "visit 0: clock_mismatch: empty sample 0 (0 calls): replay measured "},
		{"capture re-committed", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "capture"), artifacts.CaptureType, func(*artifacts.Store, *artifacts.CaptureDoc, *artifacts.Receipt) {})
		}, "chain", "FAILED", "prepared manifest subject: want capture manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyRun(t, good)
			tc.forge(t, dir)
			code, out, _ := tp(t, auditArgs(dir)...)
			row := "| " + tc.check + " | " + tc.status + " |"
			if !strings.Contains(out, row) || !strings.Contains(out, tc.want) {
				t.Errorf("audit after %s = exit %d, want row %q with evidence %q:\n%s", tc.name, code, row, tc.want, out)
			}
			if tc.status == "FAILED" && code != exitFailure {
				t.Errorf("audit after %s = exit %d, want 1", tc.name, code)
			}
		})
	}
}

// TestAuditMarksNoSandbox: a replay without a sandbox is recorded as such,
// and the audit warns and marks every row.
func TestAuditMarksNoSandbox(t *testing.T) {
	dir, code, out, errs := naiveRun(t, tinyCohort(t, gemm16), "1", "--no-sandbox")
	if code != exitOK {
		t.Fatalf("run --no-sandbox = exit %d:\n%s%s", code, out, errs)
	}
	for _, want := range []string{"| containment | WARNED |", "| gemm-16x16x16 | naive | passed | unsupported | - | no-sandbox; timed without a sandbox |"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit of a --no-sandbox run lacks %q:\n%s", want, out)
		}
	}
	if d := readReplay(t, filepath.Join(dir, "replay")); d.Sandbox != nil || !d.Config.NoSandbox {
		t.Errorf("replay doc sandbox = %+v, noSandbox = %t; want none recorded and the choice kept", d.Sandbox, d.Config.NoSandbox)
	}
}

// TestAuditWarnsOnScreen: one round over two routes cannot balance their
// order; the audit says so (WARNED), and replay warns when it starts.
func TestAuditWarnsOnScreen(t *testing.T) {
	second := filepath.Join(t.TempDir(), "naive2")
	if out, err := exec.Command("cp", "-a", filepath.Dir(testroute.Path(t)), second).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"run", "--cohort", tinyCohort(t, gemm16), "--routes", "", "--route-exec", testroute.Path(t),
		"--route-exec", filepath.Join(second, "route"), "--baseline", "naive", "--rounds", "1", "--output", dir}, fast...)
	code, out, errs := tp(t, args...)
	if code != exitOK {
		t.Fatalf("run = exit %d:\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "| balance | WARNED |") || !strings.Contains(out, "1 rounds over 2 routes is a screen, not a balanced comparison") {
		t.Errorf("audit of a one-round two-route run lacks the balance warning:\n%s", out)
	}
	if !strings.Contains(errs, "this run is a screen, not a balanced comparison") {
		t.Errorf("replay did not warn about the screen:\n%s", errs)
	}
}
