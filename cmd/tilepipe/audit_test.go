package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/audit"
	"github.com/tilepipe/tilepipe/cohort"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/internal/testroute"
	"github.com/tilepipe/tilepipe/oracle"
	"github.com/tilepipe/tilepipe/report"
)

// forge rewrites a stage the way a careful dishonest tool would: it
// changes the document (and receipt), removes the document, receipt and
// manifest it replaces, keeps every other layer's title and re-commits a
// self-consistent manifest (the receipt's finish time kept), so every
// blob hashes correctly and only the audit's recomputations can tell.
func forge[T any](t *testing.T, dir, typ string, mutate func(s *artifacts.Store, doc *T, rec *artifacts.Receipt)) {
	t.Helper()
	forgeStage(t, dir, typ, nil, func(st *artifacts.Stage, doc *T, rec *artifacts.Receipt) { mutate(st.Store, doc, rec) })
}

// forgeStage is forge with the stage as it was opened (for [relayer]) and,
// when subject is not nil, a new predecessor.
func forgeStage[T any](t *testing.T, dir, typ string, subject *ocispec.Descriptor, mutate func(st *artifacts.Stage, doc *T, rec *artifacts.Receipt)) {
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
	mutate(st, &doc, &rec.Predicate)
	s := st.Store
	for title, l := range st.Layers {
		if _, err := os.Lstat(s.Path(l.Digest)); title != artifacts.DocTitle && err == nil {
			s.Name(title, l)
		}
	}
	for _, d := range []artifacts.Digest{st.Layers[artifacts.DocTitle].Digest, st.Manifest.Config.Digest, st.Descriptor.Digest} {
		if err := os.Remove(s.Path(d)); err != nil {
			t.Fatal(err)
		}
	}
	if subject == nil {
		subject = st.Manifest.Subject
	}
	dd, err := s.PutJSON(doc, artifacts.MediaJSON)
	if err != nil {
		t.Fatal(err)
	}
	s.Name(artifacts.DocTitle, dd)
	layers, err := s.Layers()
	if err != nil {
		t.Fatal(err)
	}
	stmt := artifacts.Statement[artifacts.Receipt]{Type: artifacts.StatementType, PredicateType: artifacts.ReceiptPredicate, Predicate: rec.Predicate}
	for _, l := range layers {
		stmt.Subject = append(stmt.Subject, artifacts.SubjectOf(l.Annotations[artifacts.AnnotationTitle], l))
	}
	rd, err := s.PutJSON(stmt, artifacts.MediaStatement)
	if err != nil {
		t.Fatal(err)
	}
	md, err := s.Commit(typ, rd, layers, subject)
	if err != nil {
		t.Fatal(err)
	}
	// A forgery that holds only what the run already held tests nothing:
	// the values each forge chooses must differ from the run's.
	if md.Digest == st.Descriptor.Digest {
		t.Fatalf("forge %s: the edit changed nothing", dir)
	}
}

// relayer replaces the layer titled title of the stage being forged with
// edit's bytes: the old blob goes, the new one takes its title.
func relayer(t *testing.T, st *artifacts.Stage, title string, edit func([]byte) []byte) artifacts.Digest {
	t.Helper()
	old, err := st.Layer(title)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Store.ReadVerified(old.Digest, title, artifacts.MaxDocBytes)
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.Store.PutBytes(edit(b), old.MediaType)
	if err != nil {
		t.Fatal(err)
	}
	if d.Digest == old.Digest {
		t.Fatalf("relayer %s: the edit changed nothing", title)
	}
	st.Store.Name(title, d)
	if err := os.Remove(st.Store.Path(old.Digest)); err != nil {
		t.Fatal(err)
	}
	return d.Digest
}

// rejournal applies edit to every line of the replay's journal.jsonl.
func rejournal(t *testing.T, st *artifacts.Stage, edit func(l *artifacts.JournalLine)) {
	t.Helper()
	relayer(t, st, "journal.jsonl", func(b []byte) []byte {
		var out []byte
		for _, line := range bytes.SplitAfter(b, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var l artifacts.JournalLine
			if err := json.Unmarshal(line, &l); err != nil {
				t.Fatal(err)
			}
			edit(&l)
			jb, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			out = append(append(out, jb...), '\n')
		}
		return out
	})
}

// reconfigure changes the replay's configuration everywhere it is
// recorded, as a careful forger would: the document, plan.json, the
// receipt's parameters and the results table.
func reconfigure(t *testing.T, st *artifacts.Stage, d *artifacts.ReplayDoc, r *artifacts.Receipt, edit func(c *artifacts.ReplayConfig)) {
	t.Helper()
	edit(&d.Config)
	relayer(t, st, "plan.json", func(b []byte) []byte {
		var pr artifacts.PlanRecord
		if err := json.Unmarshal(b, &pr); err != nil {
			t.Fatal(err)
		}
		edit(&pr.Config)
		out, _ := json.MarshalIndent(pr, "", "  ")
		return out
	})
	r.Parameters["config"] = d.Config
	if b, err := readLayer(st, "results.md"); err != nil || string(b) != report.Table(*d) { // the table shows most settings, not all
		relayer(t, st, "results.md", func([]byte) []byte { return []byte(report.Table(*d)) })
	}
}

// rechain re-points the prepared and replay stages of run dir at its
// (forged) capture, as a forger who re-hashes the whole checkpoint would:
// documents, plan.json, subjects and consumed digests, every recorded
// time kept. A rechained run with nothing else changed passes the audit.
func rechain(t *testing.T, dir string) {
	t.Helper()
	capDir, prepDir, repDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared"), filepath.Join(dir, "replay")
	open := func(dir, typ string) (*artifacts.Stage, *ocispec.Descriptor) {
		st, err := artifacts.OpenStage(dir, typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		subject := st.Descriptor
		subject.Annotations = nil
		return st, &subject
	}
	consumed := func(old []artifacts.Dependency, stages ...*artifacts.Stage) []artifacts.Dependency {
		var at time.Time
		for _, d := range old {
			if d.VerifiedAt.After(at) {
				at = d.VerifiedAt
			}
		}
		var out []artifacts.Dependency
		for _, st := range stages {
			out = append(out, artifacts.Dependency{Name: "manifest", Digest: st.Descriptor.Digest, VerifiedAt: at},
				artifacts.Dependency{Name: "receipt", Digest: st.Manifest.Config.Digest, VerifiedAt: at})
			for _, title := range st.Titles() {
				out = append(out, artifacts.Dependency{Name: title, Digest: st.Layers[title].Digest, VerifiedAt: at})
			}
		}
		return out
	}
	capSt, capSubject := open(capDir, artifacts.CaptureType)
	forgeStage(t, prepDir, artifacts.PreparedType, capSubject, func(_ *artifacts.Stage, d *artifacts.PreparedDoc, r *artifacts.Receipt) {
		d.Capture = capSt.Descriptor.Digest
		r.ResolvedDependencies = consumed(r.ResolvedDependencies, capSt)
		r.Predecessor.Digest = capSt.Descriptor.Digest
	})
	prepSt, prepSubject := open(prepDir, artifacts.PreparedType)
	forgeStage(t, repDir, artifacts.ReplayType, prepSubject, func(st *artifacts.Stage, d *artifacts.ReplayDoc, r *artifacts.Receipt) {
		d.Prepared, d.Capture = prepSt.Descriptor.Digest, capSt.Descriptor.Digest
		relayer(t, st, "plan.json", func(b []byte) []byte {
			var pr artifacts.PlanRecord
			if err := json.Unmarshal(b, &pr); err != nil {
				t.Fatal(err)
			}
			pr.Prepared, pr.Capture = d.Prepared, d.Capture
			out, _ := json.MarshalIndent(pr, "", "  ")
			return out
		})
		r.ResolvedDependencies = consumed(r.ResolvedDependencies, prepSt, capSt)
		r.Predecessor.Digest = prepSt.Descriptor.Digest
	})
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
	long(t)
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
		{"novel samples hidden", func(t *testing.T, dir string) {
			resample(t, dir, func(rows []samples.Row) []samples.Row {
				var out []samples.Row
				for _, r := range rows {
					if r.Kind != samples.KindNovel {
						out = append(out, r)
					}
				}
				return out
			})
		}, "records", "FAILED", "visit 0: 0 novel samples, config.samples "},
		{"a checked call's output edited", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(s *artifacts.Store, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {
				d.Visits[0].Novel.Outputs[0] = retensor(t, s, s, d.Visits[0].Novel.Outputs[0])
			})
		}, "outputs", "FAILED", "passed in replay but novel sample 0 call "},
		{"a row's claim relabelled warm", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {
				d.Summary[0].Kind = ""
			})
		}, "summaries", "FAILED", `summary gemm-16x16x16/naive kind: stored "", recomputed "novel" (a CPU row rests on novel samples, a GPU row on batch samples)`},
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
		{"loaded visit's flag cleared", func(t *testing.T, dir string) {
			forge(t, filepath.Join(dir, "replay"), artifacts.ReplayType, func(_ *artifacts.Store, d *replayDoc, _ *artifacts.Receipt) {
				d.Visits[0].Load = &artifacts.VisitLoad{OtherNs: d.Visits[0].WallNs, Loaded: false}
			})
		}, "containment", "FAILED", "visit 0: load other "},
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
			forge(t, filepath.Join(dir, "capture"), artifacts.CaptureType, func(_ *artifacts.Store, _ *artifacts.CaptureDoc, r *artifacts.Receipt) {
				r.Notes = map[string]string{"forged": "yes"} // a new receipt: a new manifest
			})
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
	long(t)
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
	long(t)
	second := secondNaive(t)
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"run", "--cohort", tinyCohort(t, gemm16), "--routes", "", "--route-exec", testroute.Path(t),
		"--route-exec", second, "--baseline", "naive", "--rounds", "1", "--output", dir}, fast...)
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

// evidence is the evidence section of check (with status) in audit.md.
func evidence(md, check, status string) string {
	head := "\n## " + check + ": " + status + "\n\n"
	i := strings.Index(md, head)
	if i < 0 {
		return ""
	}
	sec := md[i+len(head):]
	if j := strings.Index(sec, "\n## "); j >= 0 {
		sec = sec[:j]
	}
	return sec
}

// failedChecks lists the checks audit.md's table marks FAILED.
func failedChecks(md string) []string {
	var out []string
	for _, l := range strings.Split(md, "\n") {
		if f := strings.Split(l, " | "); len(f) >= 3 && f[1] == "FAILED" && strings.HasPrefix(f[0], "| ") {
			out = append(out, strings.TrimPrefix(f[0], "| "))
		}
	}
	return out
}

// ev is one evidence line, whole.
func ev(format string, args ...any) string { return "- " + fmt.Sprintf(format, args...) + "\n" }

// openStage opens a stage of a test run, failing the test if it cannot.
func openStage(t *testing.T, dir, typ string) *artifacts.Stage {
	t.Helper()
	st, err := artifacts.OpenStage(dir, typ, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestAuditRehashed forges one recorded number or layer at a time and
// re-hashes the checkpoint consistently: every digest and reference
// updated, every copy of the number changed where the forger can (the
// journal, plan.json, the receipt, the results table), a capture edit
// rechained through the prepared and replay stages. Only the check that
// relates the number to something the forger did not change can tell; the
// test names every check that fails, and the exact evidence.
func TestAuditRehashed(t *testing.T) {
	long(t)
	good := passingRun(t)
	orig := readReplay(t, filepath.Join(good, "replay"))
	type replayDoc = artifacts.ReplayDoc
	rep := func(dir string) string { return filepath.Join(dir, "replay") }
	forgeReplay := func(t *testing.T, dir string, mutate func(st *artifacts.Stage, d *replayDoc, r *artifacts.Receipt)) {
		t.Helper()
		forgeStage(t, rep(dir), artifacts.ReplayType, nil, mutate)
	}
	// lineOf is the journal.jsonl line (from 1) of visit i in the run.
	lineOf := func(t *testing.T, i int) int {
		b, err := readLayer(openStage(t, rep(good), artifacts.ReplayType), "journal.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			var l artifacts.JournalLine
			if json.Unmarshal([]byte(line), &l) == nil && l.Visit != nil && l.Visit.Index == i {
				return n + 1
			}
		}
		t.Fatalf("visit %d is not in the journal", i)
		return 0
	}
	batchCalls := orig.Visits[0].CallsPerSample
	last := orig.Visits[len(orig.Visits)-1]
	for _, tc := range []struct {
		name   string
		forge  func(t *testing.T, dir string) []string // the wanted evidence, each contained in the check's section
		check  string
		status string
		failed []string // every check that fails
	}{
		{"results table numbers", func(t *testing.T, dir string) []string {
			var n int
			var stored, rendered string
			forgeReplay(t, dir, func(st *artifacts.Stage, _ *replayDoc, _ *artifacts.Receipt) {
				relayer(t, st, "results.md", func(b []byte) []byte {
					lines := strings.Split(string(b), "\n")
					for i, l := range lines {
						if strings.HasPrefix(l, "| gemm-16x16x16 | naive | passed | ") {
							f := strings.Split(l, " | ")
							f[3] = "1 ns"
							n, rendered, lines[i] = i+1, l, strings.Join(f, " | ")
							stored = lines[i]
							break
						}
					}
					return []byte(strings.Join(lines, "\n"))
				})
			})
			return []string{ev("results.md line %d: %q, the document renders %q", n, stored, rendered)}
		}, "results table", "FAILED", []string{"results table"}},
		{"a null list in the document", func(t *testing.T, dir string) []string {
			// Strict decoding reads null as an empty list; a stage
			// tilepipe wrote never holds one (artifacts.ValidateStage).
			forgeStage(t, rep(dir), artifacts.ReplayType, nil, func(_ *artifacts.Stage, d *map[string]any, _ *artifacts.Receipt) { (*d)["routes"] = nil })
			return []string{"tilepipe.json: null at .routes, want a value ([] for a list)"}
		}, "blobs", "FAILED", []string{"blobs"}},
		{"sampleMs in the document only", func(t *testing.T, dir string) []string {
			forgeReplay(t, dir, func(_ *artifacts.Stage, d *replayDoc, _ *artifacts.Receipt) { d.Config.SampleMs = 5 })
			return []string{ev("plan.json config.sampleMs: %v, the document says 5", orig.Config.SampleMs), ev("receipt parameters.config.sampleMs: %v, the document says 5", orig.Config.SampleMs)}
		}, "records", "FAILED", []string{"records", "results table"}},
		{"threads in the document only", func(t *testing.T, dir string) []string {
			forgeReplay(t, dir, func(_ *artifacts.Stage, d *replayDoc, _ *artifacts.Receipt) { d.Config.Threads++ })
			n := orig.Config.Threads
			return []string{ev("plan.json config.threads: %d, the document says %d", n, n+1), ev("receipt parameters.config.threads: %d, the document says %d", n, n+1), ev("visit 0: threads %d, config.threads %d", n, n+1)}
		}, "records", "FAILED", []string{"records", "results table", "physical floor", "containment"}}, // containment: the session's core split is for the recorded threads
		{"warmupMs in the document only", func(t *testing.T, dir string) []string {
			forgeReplay(t, dir, func(_ *artifacts.Stage, d *replayDoc, _ *artifacts.Receipt) { d.Config.WarmupMs = 50 })
			return []string{ev("plan.json config.warmupMs: %v, the document says 50", orig.Config.WarmupMs), ev("receipt parameters.config.warmupMs: %v, the document says 50", orig.Config.WarmupMs)}
		}, "records", "FAILED", []string{"records", "results table"}},
		{"threads everywhere", func(t *testing.T, dir string) []string {
			forgeReplay(t, dir, func(st *artifacts.Stage, d *replayDoc, r *artifacts.Receipt) {
				reconfigure(t, st, d, r, func(c *artifacts.ReplayConfig) { c.Threads++ })
			})
			n := orig.Config.Threads
			return []string{ev("visit 0: threads %d, config.threads %d", n, n+1)}
		}, "records", "FAILED", []string{"records", "physical floor", "containment"}},
		{"sampleMs everywhere", func(t *testing.T, dir string) []string {
			forgeReplay(t, dir, func(st *artifacts.Stage, d *replayDoc, r *artifacts.Receipt) {
				reconfigure(t, st, d, r, func(c *artifacts.ReplayConfig) { c.SampleMs *= 100 })
			})
			return []string{"- batch samples: the median visit's median batch sample lasted ",
				fmt.Sprintf(", less than config.sampleMs %v ms / 4: calibration doubles the calls until a sample lasts sampleMs, and the batch samples repeat them (4 visits below 1073741824 calls)\n", orig.Config.SampleMs*100)}
			// A warning: load bends calibration too (docs/threat-model.md).
		}, "records", "WARNED", nil},
		{"warmupMs everywhere leaves no trace", func(t *testing.T, dir string) []string {
			// docs/threat-model.md: only --expect tells this one.
			forgeReplay(t, dir, func(st *artifacts.Stage, d *replayDoc, r *artifacts.Receipt) {
				reconfigure(t, st, d, r, func(c *artifacts.ReplayConfig) { c.WarmupMs = 50 })
			})
			return nil
		}, "records", "PASSED", nil},
		{"freshMin lowered everywhere", func(t *testing.T, dir string) []string {
			// A replay drawing fewer fresh sets than this tilepipe would.
			forgeReplay(t, dir, func(st *artifacts.Stage, d *replayDoc, r *artifacts.Receipt) {
				reconfigure(t, st, d, r, func(c *artifacts.ReplayConfig) { c.FreshMin = 1 })
			})
			return []string{"config.freshMin 1: want 3 (or absent, in a replay made before it)"}
		}, "outputs", "FAILED", []string{"outputs"}},
		{"novelRule unknown everywhere", func(t *testing.T, dir string) []string {
			// A rule this tilepipe does not know: nothing can be held to it.
			forgeReplay(t, dir, func(st *artifacts.Stage, d *replayDoc, r *artifacts.Receipt) {
				reconfigure(t, st, d, r, func(c *artifacts.ReplayConfig) { c.NovelRule = 4 })
			})
			return []string{"config.novelRule 4: want 2 or 3 (or absent, in a replay made before rule 2)"}
		}, "outputs", "FAILED", []string{"outputs", "records"}},
		{"novel slots cut", func(t *testing.T, dir string) []string {
			// One slot fewer than the run had; its samples' calls stay
			// within it.
			v := orig.Visits[0]
			if v.Novel == nil || int64(v.FreshSets) <= v.Novel.Calls {
				t.Fatalf("visit 0's novel record %+v: no slot to cut below its calls", v.Novel)
			}
			forgeReplay(t, dir, func(st *artifacts.Stage, d *replayDoc, _ *artifacts.Receipt) {
				d.Visits[0].FreshSets--
				rejournal(t, st, func(l *artifacts.JournalLine) {
					if l.Visit != nil && l.Visit.Index == 0 {
						l.Visit.FreshSets = d.Visits[0].FreshSets
					}
				})
			})
			return []string{ev("visit 0: %d novel slots, want %d for case %s under novel rule 3", v.FreshSets-1, v.FreshSets, v.Case)}
		}, "outputs", "FAILED", []string{"outputs"}},
		{"callsPerSample", func(t *testing.T, dir string) []string {
			forgeReplay(t, dir, func(st *artifacts.Stage, d *replayDoc, _ *artifacts.Receipt) {
				d.Visits[0].CallsPerSample *= 2
				rejournal(t, st, func(l *artifacts.JournalLine) {
					if l.Visit != nil && l.Visit.Index == 0 {
						l.Visit.CallsPerSample *= 2
					}
				})
			})
			return []string{ev("visit 0: batch sample 0: %d calls, callsPerSample %d", batchCalls, 2*batchCalls), ev("visit 0: batch sample 1: %d calls, callsPerSample %d", batchCalls, 2*batchCalls)}
		}, "records", "FAILED", []string{"records"}},
		{"maxErrRatio", func(t *testing.T, dir string) []string {
			forgeReplay(t, dir, func(st *artifacts.Stage, d *replayDoc, _ *artifacts.Receipt) {
				// Visit 0 is the exact-pattern gemm, whose outputs are exact
				// (ratio 0): the forgery adds, rather than halves.
				d.Visits[0].MaxErrRatio += 0.25
				rejournal(t, st, func(l *artifacts.JournalLine) {
					if l.Visit != nil && l.Visit.Index == 0 {
						l.Visit.MaxErrRatio += 0.25
					}
				})
			})
			return []string{fmt.Sprintf("- visit 0: maxErrRatio %g recorded, its stored outputs give ", orig.Visits[0].MaxErrRatio+0.25)}
		}, "outputs", "FAILED", []string{"outputs"}},
		{"plan.json config", func(t *testing.T, dir string) []string {
			forgeReplay(t, dir, func(st *artifacts.Stage, _ *replayDoc, _ *artifacts.Receipt) {
				relayer(t, st, "plan.json", func(b []byte) []byte {
					return bytes.Replace(b, []byte(fmt.Sprintf(`"bootstrap": %d`, orig.Config.Bootstrap)), []byte(`"bootstrap": 7`), 1)
				})
			})
			return []string{ev("plan.json config.bootstrap: 7, the document says %d", orig.Config.Bootstrap)}
		}, "records", "FAILED", []string{"records"}},
		{"plan.json plan", func(t *testing.T, dir string) []string {
			var edited artifacts.Visit
			forgeReplay(t, dir, func(st *artifacts.Stage, _ *replayDoc, _ *artifacts.Receipt) {
				relayer(t, st, "plan.json", func(b []byte) []byte {
					var pr artifacts.PlanRecord
					if err := json.Unmarshal(b, &pr); err != nil {
						t.Fatal(err)
					}
					pr.Plan[1].Position = 5
					edited = pr.Plan[1]
					out, _ := json.MarshalIndent(pr, "", "  ")
					return out
				})
			})
			return []string{ev("plan.json plan[1] %+v, the document %+v", edited, orig.Plan[1])}
		}, "records", "FAILED", []string{"records"}},
		{"journal visit", func(t *testing.T, dir string) []string {
			forgeReplay(t, dir, func(st *artifacts.Stage, _ *replayDoc, _ *artifacts.Receipt) {
				rejournal(t, st, func(l *artifacts.JournalLine) {
					if l.Visit != nil && l.Visit.Index == 0 {
						l.Visit.CPUNs++
					}
				})
			})
			return []string{ev("visit 0: the document's record differs from its last journal line (journal.jsonl:%d) in cpuNs", lineOf(t, 0))}
		}, "journal", "FAILED", []string{"journal"}},
		{"journal visit dropped", func(t *testing.T, dir string) []string {
			n := lineOf(t, last.Index)
			forgeReplay(t, dir, func(st *artifacts.Stage, _ *replayDoc, _ *artifacts.Receipt) {
				relayer(t, st, "journal.jsonl", func(b []byte) []byte {
					lines := strings.SplitAfter(string(b), "\n")
					return []byte(strings.Join(slices.Delete(lines, n-1, n), ""))
				})
			})
			return []string{ev("visit %d: passed in the document, but no journal line records it: only a visit a failed closure check kept from running (not_run) has none", last.Index)}
		}, "journal", "FAILED", []string{"journal"}},
		{"journal session", func(t *testing.T, dir string) []string {
			forgeReplay(t, dir, func(st *artifacts.Stage, _ *replayDoc, _ *artifacts.Receipt) {
				rejournal(t, st, func(l *artifacts.JournalLine) {
					if l.Session != nil {
						l.Session.ColdBandwidth *= 2
					}
				})
			})
			return []string{ev("session 0: the document's record differs from the journal's in coldBandwidth")}
		}, "journal", "FAILED", []string{"journal"}},
		{"visit marked not run", func(t *testing.T, dir string) []string {
			n := lineOf(t, last.Index)
			forgeReplay(t, dir, func(st *artifacts.Stage, d *replayDoc, _ *artifacts.Receipt) {
				d.Visits[last.Index] = artifacts.VisitResult{Visit: last.Visit, Status: artifacts.StatusFailed, Reason: "not_run: replay stopped after a binary closure check failed"}
				relayer(t, st, "journal.jsonl", func(b []byte) []byte {
					lines := strings.SplitAfter(string(b), "\n")
					return []byte(strings.Join(slices.Delete(lines, n-1, n), ""))
				})
				// The table names the visits' load: a careful forger renders
				// it again, so only the journal and the summaries tell.
				relayer(t, st, "results.md", func([]byte) []byte { return []byte(report.Table(*d)) })
			})
			return []string{ev("visit %d: not_run: replay stopped after a binary closure check failed, yet every binary closure check passed", last.Index)}
		}, "journal", "FAILED", []string{"summaries", "journal"}},
		{"cohort case", func(t *testing.T, dir string) []string {
			var got []byte
			forgeStage(t, filepath.Join(dir, "capture"), artifacts.CaptureType, nil, func(st *artifacts.Stage, _ *artifacts.CaptureDoc, _ *artifacts.Receipt) {
				relayer(t, st, "cohort.json", func(b []byte) []byte {
					out := bytes.Replace(b, []byte(`"seed": 9`), []byte(`"seed": 10`), 1)
					co, err := cohort.Parse("cohort.json", out)
					if err != nil {
						t.Fatal(err)
					}
					got, _ = json.Marshal(co.Cases[1])
					return out
				})
			})
			rechain(t, dir)
			want, _ := json.Marshal(readCapture(t, filepath.Join(dir, "capture")).Cases[1].Case)
			return []string{ev("case 1: cohort.json has %s, the capture document %s", got, want)}
		}, "cohort", "FAILED", []string{"cohort"}},
		{"cohort name", func(t *testing.T, dir string) []string {
			forgeStage(t, filepath.Join(dir, "capture"), artifacts.CaptureType, nil, func(st *artifacts.Stage, _ *artifacts.CaptureDoc, _ *artifacts.Receipt) {
				relayer(t, st, "cohort.json", func(b []byte) []byte {
					return bytes.Replace(b, []byte(`{"schema": 1,`), []byte(`{"schema": 1, "name": "forged",`), 1)
				})
			})
			rechain(t, dir)
			return []string{ev(`cohort.json name "forged", the capture document ""`)}
		}, "cohort", "FAILED", []string{"cohort"}},
		{"route version", func(t *testing.T, dir string) []string {
			var r artifacts.Route
			forge(t, filepath.Join(dir, "capture"), artifacts.CaptureType, func(_ *artifacts.Store, d *artifacts.CaptureDoc, _ *artifacts.Receipt) {
				r = d.Routes[0]
				d.Routes[0].Version = "forged"
			})
			rechain(t, dir)
			return []string{ev("route %s: version %q, its describe.json (%s) says %q", r.Name, "forged", artifacts.Short(r.Describe), r.Version)}
		}, "routes", "FAILED", []string{"routes"}},
		{"index.json size", func(t *testing.T, dir string) []string {
			md := openStage(t, rep(dir), artifacts.ReplayType).Descriptor
			md.Size++
			writeIndex(t, rep(dir), md)
			return []string{ev("stage %s: index.json: manifest descriptor size %d, the manifest blob %s has %d bytes", rep(dir), md.Size, artifacts.Short(md.Digest), md.Size-1)}
		}, "blobs", "FAILED", []string{"blobs"}},
		{"index.json artifactType", func(t *testing.T, dir string) []string {
			md := openStage(t, rep(dir), artifacts.ReplayType).Descriptor
			md.ArtifactType = artifacts.PreparedType
			writeIndex(t, rep(dir), md)
			return []string{ev("stage %s: index.json: manifest descriptor artifactType %q, the manifest says %q", rep(dir), artifacts.PreparedType, artifacts.ReplayType)}
		}, "blobs", "FAILED", []string{"blobs"}},
		{"unlisted blob", func(t *testing.T, dir string) []string {
			hex := strings.Repeat("ab", 32)
			if err := os.WriteFile(filepath.Join(rep(dir), "blobs", "sha256", hex), []byte("smuggled"), 0o444); err != nil {
				t.Fatal(err)
			}
			return []string{ev("stage %s: blobs/sha256/%s: not listed in the manifest", rep(dir), hex)}
		}, "blobs", "FAILED", []string{"blobs"}},
		{"clock above any CPU", func(t *testing.T, dir string) []string {
			reclock(t, rep(dir), func(float64) float64 { return 7e9 })
			return []string{"- session 0: recorded clock 7.00 GHz, above what any CPU sustains (6.5 GHz); this machine measures "}
		}, "physical floor", "FAILED", []string{"physical floor"}},
		{"CPU flags this machine lacks", func(t *testing.T, dir string) []string {
			own, err := artifacts.CPUFlags(artifacts.CPUInfoPath)
			if err != nil {
				t.Skip(err)
			}
			// Half-precision flags only: an f32 case's floor does not use
			// them, so the recorded floors still follow from the flags.
			i := slices.IndexFunc([]string{"amx_fp16", "amx_bf16", "avx512_fp16", "avx512_bf16"}, func(f string) bool { return !slices.Contains(own, f) })
			if i < 0 {
				t.Skip("this machine has every half-precision vector flag")
			}
			flag := []string{"amx_fp16", "amx_bf16", "avx512_fp16", "avx512_bf16"}[i]
			forgeReplay(t, dir, func(_ *artifacts.Stage, _ *replayDoc, r *artifacts.Receipt) {
				r.Environment.CPUFlags = append(r.Environment.CPUFlags, flag)
			})
			return []string{ev("the replay's CPU flags include %s, which this machine lacks: the compute floors assume it (machines differ or the flags were forged)", flag)}
		}, "physical floor", "WARNED", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyRun(t, good)
			want := tc.forge(t, dir)
			code, out, _ := tp(t, auditArgs(dir)...)
			row := "| " + tc.check + " | " + tc.status + " |"
			sec := evidence(out, tc.check, tc.status)
			for _, w := range want {
				if !strings.Contains(sec, w) {
					t.Errorf("audit after %s: %s evidence lacks %q; got:\n%s", tc.name, tc.check, w, sec)
				}
			}
			if !strings.Contains(out, row) {
				t.Errorf("audit after %s lacks row %q:\n%s", tc.name, row, out)
			}
			if got := failedChecks(out); !slices.Equal(got, tc.failed) {
				t.Errorf("audit after %s: failed checks %q, want %q:\n%s", tc.name, got, tc.failed, out)
			}
			if wantCode := map[bool]int{true: exitOK, false: exitFailure}[len(tc.failed) == 0]; code != wantCode {
				t.Errorf("audit after %s = exit %d, want %d", tc.name, code, wantCode)
			}
		})
	}
}

// reclock forges every session's clock of a replay (and its floors and
// journal lines with it, consistently).
func reclock(t *testing.T, dir string, clock func(float64) float64) {
	t.Helper()
	edit := func(s *artifacts.Session) {
		hz := clock(s.ClockHz)
		for i := range s.Floors {
			if f := &s.Floors[i]; f.Flops > 0 {
				f.PeakFlops *= hz / s.ClockHz
				f.ComputeNs = f.Flops / f.PeakFlops * 1e9 / floors.Slack
			}
		}
		s.ClockHz = hz
	}
	forgeStage(t, dir, artifacts.ReplayType, nil, func(st *artifacts.Stage, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {
		for i := range d.Sessions {
			edit(&d.Sessions[i])
		}
		rejournal(t, st, func(l *artifacts.JournalLine) {
			if l.Session != nil {
				edit(l.Session)
			}
		})
	})
}

// writeIndex points a stage's index.json at descriptor md.
func writeIndex(t *testing.T, dir string, md ocispec.Descriptor) {
	t.Helper()
	b, err := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{md}})
	if err != nil {
		t.Fatal(err)
	}
	if err := artifacts.WriteFileAtomic(filepath.Join(dir, "index.json"), b); err != nil {
		t.Fatal(err)
	}
}

// readLayer reads a verified layer of a stage by title.
func readLayer(st *artifacts.Stage, title string) ([]byte, error) {
	d, err := st.Layer(title)
	if err != nil {
		return nil, err
	}
	return st.Store.ReadVerified(d.Digest, title, artifacts.MaxDocBytes)
}

// TestAuditExpect: the audit pinned to the replay manifest the reviewer
// received (--expect) passes on that checkpoint and fails on a consistent
// re-hash of it, which an unpinned audit cannot tell from the original.
func TestAuditExpect(t *testing.T) {
	long(t)
	good := passingRun(t)
	want := string(openStage(t, filepath.Join(good, "replay"), artifacts.ReplayType).Descriptor.Digest)
	dir := copyRun(t, good)
	out := filepath.Join(t.TempDir(), "audit.json")
	code, md, errs := tp(t, append(auditArgs(dir), "--expect", want, "--output", out)...)
	if code != exitOK || !strings.Contains(md, "| pin | PASSED |") || !strings.Contains(md, "Pinned to `"+want+"`, the replay manifest given with --expect.") ||
		!strings.Contains(md, "; pinned to "+want+"; "+audit.Unsigned+")\n") {
		t.Errorf("audit --expect (the same checkpoint) = exit %d, want 0, pin PASSED and the verdict pinned to %s:\n%s%s", code, want, md, errs)
	}
	if p := readAudit(t, out); p["pinned"] != true || p["expected"] != want {
		t.Errorf("audit.json pinned = %v, expected = %v; want true and %s", p["pinned"], p["expected"], want)
	}

	// The capture re-committed with a new receipt, and every stage after
	// it re-pointed: every digest holds, every recomputation agrees.
	forge(t, filepath.Join(dir, "capture"), artifacts.CaptureType, func(_ *artifacts.Store, _ *artifacts.CaptureDoc, r *artifacts.Receipt) {
		r.Notes = map[string]string{"forged": "yes"}
	})
	rechain(t, dir)
	got := string(openStage(t, filepath.Join(dir, "replay"), artifacts.ReplayType).Descriptor.Digest)
	if got == want {
		t.Fatal("the re-hashed replay has the original manifest digest; the forgery changed nothing")
	}
	code, md, errs = tp(t, auditArgs(dir)...)
	if code != exitOK || strings.Contains(md, "| pin |") || !strings.Contains(md, "\nNot pinned: a consistent re-hash of the whole checkpoint cannot be told apart without --expect.\n") ||
		!strings.Contains(md, "; "+audit.NotPinned+"; "+audit.Unsigned+")\n") {
		t.Errorf("unpinned audit of a consistent re-hash = exit %d, want 0 (nothing tells it) and the verdict not pinned:\n%s%s", code, md, errs)
	}
	code, md, errs = tp(t, append(auditArgs(dir), "--expect", want)...)
	if w := ev("replay manifest %s, expected %s (--expect): this is not the checkpoint that was sent", got, want); code != exitFailure || !strings.Contains(evidence(md, "pin", "FAILED"), w) ||
		!slices.Equal(failedChecks(md), []string{"pin"}) {
		t.Errorf("audit --expect of a consistent re-hash = exit %d, want 1 with only pin FAILED: %q:\n%s", code, w, md)
	}
	if w := "tilepipe: audit: FAIL: checkpoint broken; 0 of 2 claims supported; pinned to " + want + "; unsigned\n"; !strings.Contains(errs, w) {
		t.Errorf("audit --expect of a consistent re-hash: stderr %q, want %q", errs, w)
	}

	code, _, errs = tp(t, append(auditArgs(dir), "--expect", "sha256:beef")...)
	if w := `audit: --expect "sha256:beef": want the replay manifest digest, sha256:<64 hex>`; code != exitUsage || !strings.Contains(errs, w) {
		t.Errorf("audit --expect sha256:beef = exit %d, stderr %q; want exit 2 with %q", code, errs, w)
	}
}
