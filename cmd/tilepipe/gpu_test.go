package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/capture"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/internal/launch"
	"github.com/tilepipe/tilepipe/internal/telemetry"
	"github.com/tilepipe/tilepipe/oracle"
	"github.com/tilepipe/tilepipe/report"
)

// TestCubinPrepared: prepare builds the CUDA timer for a cubin build
// capture checked, writes its launch lines and pins the timer's closure,
// which loads the GPU driver: on a machine without one (CI) the entry is
// a failed row naming the driver (exit 1), never something timed on the
// CPU; with a driver it is prepared.
func TestCubinPrepared(t *testing.T) {
	long(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	ptx, err := os.ReadFile("../../internal/launch/testdata/triton-add-sm90.ptx")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "add.ptx"), ptx, 0o644)
	os.WriteFile(filepath.Join(src, "add.cubin"), []byte("stand-in cubin"), 0o644)
	os.WriteFile(filepath.Join(src, "launch.json"), []byte(`{"kernel": "add_kernel", "arch": "sm_90", "grid": [977, 1, 1], "block": [128, 1, 1], "cluster": [1, 1, 1], "sharedBytes": 0,
 "params": [{"kind": "tensor", "tensor": "A", "align": 16}, {"kind": "tensor", "tensor": "B", "align": 16}, {"kind": "tensor", "tensor": "C", "align": 16},
  {"kind": "i32", "value": 1000000}, {"kind": "scratch"}, {"kind": "scratch"}], "scratch": [{"bytes": 0, "align": 1}, {"bytes": 0, "align": 1}], "ptxas": ["-lineinfo", "-v"]}`), 0o644)
	route := filepath.Join(dir, "route")
	os.WriteFile(route, []byte(strings.ReplaceAll(`#!/bin/sh
if [ "$1" = describe ]; then
  echo '{"protocol": 1, "name": "cubes", "kind": "cubin", "version": "1", "available": true, "reason": "", "ops": ["add"], "devices": ["cuda"]}'
  exit 0
fi
prev=""; for a; do [ "$prev" = "--workdir" ] && w="$a"; prev="$a"; done
cp "SRC"/* "$w"/
echo '{"protocol": 1, "status": "built", "kind": "cubin", "files": [{"path": "add.cubin", "role": "cubin"}, {"path": "add.ptx", "role": "ptx"}, {"path": "launch.json", "role": "manifest"}]}'
`, "SRC", src)), 0o755)
	co := filepath.Join(dir, "cohort.json")
	os.WriteFile(co, []byte(`{"schema": 1, "cases": [{"op": "add", "dims": {"M": 1000, "N": 1000}, "seed": 7, "device": "cuda"}]}`), 0o644)
	capDir, prepDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared")
	if code, out, errs := tp(t, "capture", "--cohort", co, "--routes", "", "--route-exec", route, "--no-sandbox", "--output", capDir); code != 0 {
		t.Fatalf("capture = exit %d\n%s%s", code, out, errs)
	}
	code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir, "--no-sandbox")
	doc := readPrepared(t, prepDir)
	e := doc.Entries[0]
	if doc.CUDATimer == nil || doc.CUDASource == nil || e.Kind != "cubin" {
		t.Fatalf("prepared document: cudaTimer %v, cudaSource %v, entry kind %q: want the timer, its source and a cubin entry", doc.CUDATimer, doc.CUDASource, e.Kind)
	}
	// Before anything runs it, prepare builds the PTX again (the cubin
	// chain): without a ptxas the entry fails naming where it looked; with
	// one, the stand-in cubin is not what the PTX builds to.
	want := "cubin chain: ptxas not found (" + launch.PtxasHint + "): prepare builds every cubin again from its PTX"
	if _, err := launch.FindPtxas(); err == nil {
		want = "cubin chain: add.cubin is not what ptxas builds from add.ptx ("
	}
	if code != exitFailure || e.Status != "failed" || !strings.HasPrefix(e.Reason, want) {
		t.Errorf("prepare = exit %d, entry %s %q, want exit 1 and failed %q...\n%s", code, e.Status, e.Reason, want, errs)
	}
}

// TestGPUCubinChain (on a GPU with nvcc and ptxas): prepare builds every
// cubin build's PTX again with the ptxas tilepipe finds and compares the
// code. routes/testdata/cuda-adversary's cubin_swap hands over the source
// and PTX of an honest add beside a cubin built from block_skip's source:
// prepare refuses it, naming the first section whose bytes differ, before
// any visit could time it. Its guard_late cubin is its PTX's: prepared,
// with the chain recorded.
func TestGPUCubinChain(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no GPU here")
	}
	if _, err := os.Stat("/usr/local/cuda/bin/nvcc"); err != nil && os.Getenv("CUDA_HOME") == "" {
		t.Skip("no CUDA toolkit here")
	}
	route, err := filepath.Abs("../../routes/testdata/cuda-adversary/route")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ variant, status, want string }{
		{"cubin_swap", "failed", "cubin chain: kernel.cubin is not what ptxas builds from kernel.ptx ("},
		{"guard_late", "prepared", ""},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			t.Setenv("TILEPIPE_TEST_GPU_ADVERSARY", tc.variant)
			dir := t.TempDir()
			co := filepath.Join(dir, "cohort.json")
			os.WriteFile(co, []byte(`{"schema": 1, "cases": [{"op": "add", "dims": {"M": 64, "N": 1000}, "seed": 7, "device": "cuda"}]}`), 0o644)
			capDir, prepDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared")
			if code, out, errs := tp(t, "capture", "--cohort", co, "--routes", "", "--route-exec", route, "--output", capDir); code != 0 {
				t.Fatalf("capture = exit %d\n%s%s", code, out, errs)
			}
			code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir)
			e := readPrepared(t, prepDir).Entries[0]
			if e.Status != tc.status || !strings.HasPrefix(e.Reason, tc.want) {
				t.Fatalf("prepare = exit %d, entry %s %q; want %s %q...\n%s", code, e.Status, e.Reason, tc.status, tc.want, errs)
			}
			if tc.status == "failed" {
				if !strings.Contains(e.Reason, "): section .") || e.Chain != nil {
					t.Errorf("refused entry: reason %q, chain %+v; want the first section that differs named and no chain", e.Reason, e.Chain)
				}
			} else if c := e.Chain; c == nil || !slices.Equal(c.Args, []string{"--gpu-name=sm_90"}) || c.PtxasDigest == "" || c.Cubin != e.Kernel[0].Digest {
				t.Errorf("prepared entry's chain = %+v, want ptxas --gpu-name=sm_90 on the PTX, its digest, and the cubin the timer loads", c)
			}
			t.Logf("%s: %s %s", tc.variant, e.Status, e.Reason)
		})
	}
}

// TestTritonDescribe: the triton route answers describe on any machine
// (here without Triton: unavailable, with the import's error), as a cubin
// route for cuda alone, which capture accepts.
func TestTritonDescribe(t *testing.T) {
	p, err := filepath.Abs("../../routes/triton/route")
	if err != nil {
		t.Fatal(err)
	}
	d, err := capture.Describe(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != "cubin" || !slices.Equal(d.Devices, []string{"cuda"}) || (!d.Available && !strings.HasPrefix(d.Reason, "import triton: ")) {
		t.Errorf("describe = %+v, want kind cubin for [cuda], available or the import's error", d)
	}
}

// gpuCheckpoint is a real checkpoint from the H200 (gpu-quick, visit
// protocol 4: triton, cublas and torch-eager, two fixed rounds;
// docs/results/2026-12-03-gpu-novel), which CI audits on a machine
// without a GPU.
const gpuCheckpoint = "../../testdata/gpu-checkpoint"

// gpuCheckpointRule3 is a real checkpoint from an H100 under novel rule 3
// (gpu-quick: triton, cublas and torch-eager, two fixed rounds, every GPU
// novel sample staged by replay's monitor and timed by replay's span;
// docs/results/2026-12-07-gpu-stager), with one visit failed (gpu_busy).
const gpuCheckpointRule3 = "../../testdata/gpu-checkpoint-rule3"

// copyCheckpoint copies the committed GPU checkpoint's three stages into
// a new directory, writable, so a test can change a byte.
func copyCheckpoint(t *testing.T) string { return copyCheckpointOf(t, gpuCheckpoint) }

// copyCheckpointOf copies the three stages of the checkpoint in dir.
func copyCheckpointOf(t *testing.T, from string) string {
	t.Helper()
	dst := t.TempDir()
	for _, stage := range []string{"capture", "prepared", "replay"} {
		src := filepath.Join(from, stage)
		err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(from, p)
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestGPUCheckpointAudits: the committed GPU checkpoint audits here, with
// no GPU, intact with every timed claim supported and NVML readings around
// every sample; one byte of a captured cubin changed breaks it, and the
// audit names the cubin's blob.
func TestGPUCheckpointAudits(t *testing.T) {
	dir := copyCheckpoint(t)
	code, errs := auditOf(t, dir)
	if want := "audit verdict: PASS (checkpoint intact; 11 of 15 claims supported;"; code != 0 || !strings.Contains(errs, want) {
		t.Fatalf("audit of the GPU checkpoint = exit %d, want 0 and %q\n%s", code, want, errs)
	}
	if want := "audit: PASSED telemetry: GPU readings around every sample of 22 passed GPU visits; 0 samples flagged (power, heat or another process); 0 with readings of no powered GPU; 0 of them probed idle around every sample (replays made before the probe have none)\n"; !strings.Contains(errs, want) {
		t.Errorf("audit of the GPU checkpoint: want %q\n%s", want, errs)
	}
	path, digest := blobOf(t, dir, "softmax-3x33-cuda", "triton", "kernel.cubin")
	flip(t, path)
	code, errs = auditOf(t, dir)
	want := "blob cases/softmax-3x33-cuda/triton/kernel.cubin (" + path + "): digest mismatch: expected " + string(digest)
	if code != 1 || !strings.Contains(errs, "checkpoint BROKEN") || !strings.Contains(errs, want) {
		t.Errorf("audit with one byte of the softmax cubin flipped = exit %d, want 1, the checkpoint broken and\n%s\n%s", code, want, errs)
	}
}

// TestGPUCheckpointRule: the committed GPU checkpoint was made under
// novel rule 1 (no novelRule: 8 MiB of slots on every device) and audits
// under it (TestGPUCheckpointAudits). Relabelled as rule 2, re-hashed
// consistently, its visits' slots are not rule 2's 256 MiB for a CUDA
// case, and its summaries lack rule 2's single-call medians: the audit
// names both.
func TestGPUCheckpointRule(t *testing.T) {
	for _, tc := range []struct {
		rule  int
		wants []string
	}{
		{2, []string{
			"audit: FAILED outputs: ",
			"- visit 0: 5461 novel slots, want 32768 for case add-2x64-cuda under novel rule 2\n",
			"singleNs: stored 0, recomputed ",
		}},
		// Under rule 3 a GPU novel sample is staged and timed by replay's
		// span: the checkpoint's event-timed novel samples are named.
		{3, []string{
			"audit: FAILED records: ",
			`- visit 0: novel sample 0: clock "cuda_events", want "replay" for a cuda case` + "\n",
		}},
	} {
		t.Run(fmt.Sprintf("rule %d", tc.rule), func(t *testing.T) {
			dir := copyCheckpoint(t)
			forgeStage(t, filepath.Join(dir, "replay"), artifacts.ReplayType, nil, func(st *artifacts.Stage, d *artifacts.ReplayDoc, r *artifacts.Receipt) {
				if d.Config.NovelRule != 0 {
					t.Fatalf("the GPU checkpoint records novelRule %d, want it absent (rule 1)", d.Config.NovelRule)
				}
				reconfigure(t, st, d, r, func(c *artifacts.ReplayConfig) { c.NovelRule = tc.rule })
			})
			out := filepath.Join(t.TempDir(), "audit.json")
			code, stdout, errs := tp(t, append(auditArgs(dir), "--output", out)...)
			for _, want := range tc.wants {
				if code != 1 || !strings.Contains(stdout+errs, want) {
					t.Errorf("audit of the GPU checkpoint relabelled rule %d = exit %d, want 1 and %q\n%s%s", tc.rule, code, want, stdout, errs)
				}
			}
		})
	}
}

// TestGPUCheckpointRule3Audits: the committed rule-3 GPU checkpoint
// audits here, with no GPU, intact, with its failed visit kept and its row
// unsupported, every passed GPU visit probed idle around every sample and
// every GPU novel row on replay's clock. Relabelled as rule 1 (novelRule absent: the CUDA
// events' clock), re-hashed consistently, its staged novel samples are
// named by the records check.
func TestGPUCheckpointRule3Audits(t *testing.T) {
	code, got := auditOf(t, gpuCheckpointRule3)
	for _, want := range []string{
		"audit verdict: PASS (checkpoint intact; 9 of 15 claims supported;",
		"| 1 | 1 | add-2x64-cuda | torch-eager | gpu_busy: replay's empty kernel took 579 us on the GPU around a sample",
		"audit: PASSED telemetry: GPU readings around every sample of 21 passed GPU visits; 0 samples flagged (power, heat or another process); 0 with readings of no powered GPU; 21 of them probed idle around every sample",
		"audit: PASSED records: ",
	} {
		if code != 0 || !strings.Contains(got, want) {
			t.Errorf("audit of the rule-3 GPU checkpoint = exit %d, want 0 and %q\n%s", code, want, got)
		}
	}
	dir := copyCheckpointOf(t, gpuCheckpointRule3)
	forgeStage(t, filepath.Join(dir, "replay"), artifacts.ReplayType, nil, func(st *artifacts.Stage, d *artifacts.ReplayDoc, r *artifacts.Receipt) {
		if d.Config.NovelRule != 3 {
			t.Fatalf("the rule-3 GPU checkpoint records novelRule %d, want 3", d.Config.NovelRule)
		}
		reconfigure(t, st, d, r, func(c *artifacts.ReplayConfig) { c.NovelRule = 0 }) // rule 1: absent
	})
	code, got = auditOf(t, dir)
	if want := `novel sample 0: clock "replay", want "cuda_events" for a cuda case`; code != 1 || !strings.Contains(got, "audit: FAILED records: ") || !strings.Contains(got, want) {
		t.Errorf("audit of the rule-3 checkpoint relabelled rule 1 = exit %d, want 1, records failed and %q\n%s", code, want, got)
	}
}

// TestGPUTelemetryForged: the committed GPU checkpoint with visit 0's
// sample table rewritten and the replay re-hashed consistently, the way a
// tool hiding the GPU's state would. Readings removed fail the telemetry
// check; zeroed readings (a monitor that read nothing) warn and mark the
// row "telemetry unread"; a second process's readings with its flag
// cleared fail the table's read; the same readings with the flag the
// readings give warn and mark the row.
func TestGPUTelemetryForged(t *testing.T) {
	long(t)
	for _, tc := range []struct {
		name   string
		mutate func([]samples.Row) []samples.Row
		code   int
		wants  []string
	}{
		{"readings removed", func(rows []samples.Row) []samples.Row {
			for i := range rows {
				rows[i].Telemetry, rows[i].Before, rows[i].After, rows[i].Flags = "", samples.Reading{}, samples.Reading{}, ""
			}
			return rows
		}, 1, []string{"audit: FAILED telemetry: ", "\n- visit 0 (add-2x64-cuda triton): GPU sample empty 0 has no telemetry\n"}},
		{"readings zeroed", func(rows []samples.Row) []samples.Row {
			for i := range rows {
				rows[i].Before, rows[i].After = samples.Reading{}, samples.Reading{}
			}
			return rows
		}, 0, []string{
			"audit: WARNED telemetry: ", "\n- visit 0 (add-2x64-cuda triton, round 1): 25 samples' readings",
			" samples' readings cannot describe a powered GPU (SM clock 0 MHz, memory clock 0 MHz: a powered GPU has both): the telemetry says nothing of them",
			"| add-2x64-cuda | triton | passed | supported | 0.394 too few rounds | telemetry unread: ",
		}},
		{"other process, flag cleared", func(rows []samples.Row) []samples.Row {
			rows[0].After.Procs = 2
			return rows
		}, 1, []string{`flags "" disagree with the readings, which give "other_process"`}},
		{"other process, flagged", func(rows []samples.Row) []samples.Row {
			rows[0].After.Procs = 2
			rows[0].Flags = samples.Flags(rows[0].Telemetry, rows[0].Before, rows[0].After)
			return rows
		}, 0, []string{
			"audit: WARNED telemetry: ", "\n- visit 0 (add-2x64-cuda triton, round 1): other_process in 1 (empty 0)\n",
			"| add-2x64-cuda | triton | passed | supported | 0.394 too few rounds | other_process: 1 samples |",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyCheckpoint(t)
			resampleAll(t, dir, tc.mutate)
			out := filepath.Join(t.TempDir(), "audit.json")
			code, stdout, errs := tp(t, append(auditArgs(dir), "--output", out)...)
			for _, want := range tc.wants {
				if code != tc.code || !strings.Contains(stdout+errs, want) {
					t.Errorf("audit = exit %d, want %d and %q\n%s%s", code, tc.code, want, stdout, errs)
				}
			}
		})
	}
}

// TestGPUIdleForged: idle probes written into the committed checkpoint's
// visit 0 (a replay made before the probe, so it has none), in its
// document and its journal alike: a passed visit whose slowest probe found
// the GPU busy, and one with fewer probes than its samples need. The audit's
// telemetry check judges the record again, whatever replay said.
func TestGPUIdleForged(t *testing.T) {
	long(t)
	for _, tc := range []struct {
		name  string
		idle  artifacts.GPUIdle
		wants []string
	}{
		{"busy, and passed", artifacts.GPUIdle{Probes: 1000, WorstNs: 2_000_000},
			[]string{"audit: FAILED telemetry: ", "\n- visit 0 (add-2x64-cuda triton): idle probe of 2000 us, above 500 us: the GPU ran work of the visit outside its samples, and the visit passed\n"}},
		{"too few probes", artifacts.GPUIdle{Probes: 3, WorstNs: 100_000},
			[]string{"audit: FAILED telemetry: ", "\n- visit 0 (add-2x64-cuda triton): 3 idle probes for ", " samples: want one before and one after every sample\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyCheckpoint(t)
			forgeStage(t, filepath.Join(dir, "replay"), artifacts.ReplayType, nil, func(st *artifacts.Stage, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {
				idle := tc.idle
				d.Visits[0].GPUIdle = &idle
				rejournal(t, st, func(l *artifacts.JournalLine) {
					if l.Visit != nil && l.Visit.Index == d.Visits[0].Index {
						l.Visit.GPUIdle = &idle
					}
				})
			})
			out := filepath.Join(t.TempDir(), "audit.json")
			code, stdout, errs := tp(t, append(auditArgs(dir), "--output", out)...)
			for _, want := range tc.wants {
				if code != 1 || !strings.Contains(stdout+errs, want) {
					t.Errorf("audit = exit %d, want 1 and %q\n%s%s", code, want, stdout, errs)
				}
			}
			if strings.Contains(stdout+errs, "FAILED journal") {
				t.Errorf("the forgery left the journal disagreeing:\n%s", errs)
			}
		})
	}
}

// resampleAll forges visit 0's sample table as a careful tool would:
// the visit's table, the replay's table of all samples, the journal's
// record of the visit, the row's flagged count and results.md all say
// the same, so only a check of what the samples mean can tell.
func resampleAll(t *testing.T, dir string, mutate func([]samples.Row) []samples.Row) {
	t.Helper()
	forgeStage(t, filepath.Join(dir, "replay"), artifacts.ReplayType, nil, func(st *artifacts.Stage, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {
		read := func(dg artifacts.Digest) []samples.Row {
			rows, err := samples.ReadFile(st.Store.Path(dg), nil)
			if err != nil {
				t.Fatal(err)
			}
			return rows
		}
		v := &d.Visits[0]
		before := read(v.Samples)
		flagged := 0 // the flags the forgery adds
		for _, r := range before {
			if r.Flags != "" {
				flagged--
			}
		}
		rows := mutate(slices.Clone(before))
		for _, r := range rows {
			if r.Flags != "" {
				flagged++
			}
		}
		table := func(rows []samples.Row) func([]byte) []byte {
			return func([]byte) []byte {
				var b bytes.Buffer
				if err := samples.Write(&b, rows); err != nil {
					t.Fatal(err)
				}
				return b.Bytes()
			}
		}
		v.Samples = relayer(t, st, fmt.Sprintf("visits/%d/samples.arrow", v.Index), table(rows))
		var all []samples.Row
		all = append(all, rows...)
		for _, w := range d.Visits[1:] {
			if w.Status == artifacts.StatusPassed {
				all = append(all, read(w.Samples)...)
			}
		}
		d.Samples = relayer(t, st, "samples.arrow", table(all))
		rejournal(t, st, func(l *artifacts.JournalLine) {
			if l.Visit != nil && l.Visit.Index == v.Index {
				l.Visit.Samples = v.Samples
			}
		})
		for i := range d.Summary {
			if d.Summary[i].Case == v.Case && d.Summary[i].Route == v.Route && flagged != 0 {
				d.Summary[i].Flagged += flagged
				relayer(t, st, "results.md", func([]byte) []byte { return []byte(report.Table(*d)) })
			}
		}
	})
}

// TestCUDAObjectPrepared: an object build for a cuda case is linked with
// the CUDA timer (whose closure listing loads the driver: without one the
// entry fails naming it, where the CPU harness would have listed its
// closure), and a build that links a CUDA library gets it from the
// directory prepare finds, never from the route: with none here, the
// entry fails saying so.
func TestCUDAObjectPrepared(t *testing.T) {
	long(t)
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("a GPU driver is here: the GPU run covers this (docs/results/2026-12-01-gpu-chain)")
	}
	t.Setenv("TILEPIPE_CUDA_LIB", "")
	t.Setenv("CUDA_HOME", t.TempDir())
	for _, tc := range []struct{ name, link, want string }{
		{"no library", `[]`, "closure: exited: status 2: harness: error: dlopen libcuda.so.1: "},
		{"cublas", `["-lcublas"]`, "link: -lcublas names a CUDA library, and no CUDA library directory was found ($TILEPIPE_CUDA_LIB, $CUDA_HOME/lib64, /usr/local/cuda/lib64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat("/usr/local/cuda/lib64/libcublas.so"); err == nil && tc.link != `[]` {
				t.Skip("/usr/local/cuda has cuBLAS")
			}
			dir := t.TempDir()
			route := filepath.Join(dir, "route")
			os.WriteFile(route, []byte(`#!/bin/sh
if [ "$1" = describe ]; then
  echo '{"protocol": 1, "name": "devobj", "kind": "object", "version": "1", "available": true, "reason": "", "ops": ["add"], "devices": ["cuda"]}'
  exit 0
fi
prev=""; for a; do [ "$prev" = "--workdir" ] && w="$a"; prev="$a"; done
printf 'int tilepipe_entry(void *const *b, void *s) { (void)b; (void)s; return 0; }\n' > "$w/entry.c"
cc -c -o "$w/entry.o" "$w/entry.c" || exit 1
echo '{"protocol": 1, "status": "built", "kind": "object", "files": [{"path": "entry.o", "role": "object"}], "entry": {"symbol": "tilepipe_entry", "params": SIG}, "link": LINK}'
`), 0o755)
			b, _ := os.ReadFile(route)
			sig := `[{"name": "A", "role": "input", "dtype": "f32", "shape": [4, 8]}, {"name": "B", "role": "input", "dtype": "f32", "shape": [4, 8]}, {"name": "C", "role": "output", "dtype": "f32", "shape": [4, 8]}]`
			os.WriteFile(route, []byte(strings.NewReplacer("LINK", tc.link, "SIG", sig).Replace(string(b))), 0o755)
			co := filepath.Join(dir, "cohort.json")
			os.WriteFile(co, []byte(`{"schema": 1, "cases": [{"op": "add", "dims": {"M": 4, "N": 8}, "seed": 7, "device": "cuda"}]}`), 0o644)
			capDir, prepDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared")
			if code, out, errs := tp(t, "capture", "--cohort", co, "--routes", "", "--route-exec", route, "--no-sandbox", "--output", capDir); code != 0 {
				t.Fatalf("capture = exit %d\n%s%s", code, out, errs)
			}
			code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir, "--no-sandbox")
			doc := readPrepared(t, prepDir)
			e := doc.Entries[0]
			if code != exitFailure || e.Status != "failed" || !strings.HasPrefix(e.Reason, tc.want) || doc.CUDAObject == nil {
				t.Errorf("prepare = exit %d, entry %s %q, cudaObject %v; want exit 1, failed %q...\n%s", code, e.Status, e.Reason, doc.CUDAObject, tc.want, errs)
			}
		})
	}
}

// gpuAdversary runs capture, prepare and replay of add 64x1000 on the GPU
// with the triton-adversary route as adversary (and routes, "" or
// "triton", beside it) for rounds rounds; it returns replay's exit, its
// document and its stderr. It skips where there is no GPU or no Triton.
func gpuAdversary(t *testing.T, adversary, routes string, rounds int, extra ...string) (int, artifacts.ReplayDoc, string) {
	t.Helper()
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no GPU here")
	}
	if err := exec.Command("python3", "-c", "import triton").Run(); err != nil {
		t.Skip("no Triton here")
	}
	t.Setenv("TILEPIPE_TEST_GPU_ADVERSARY", adversary)
	baseline := "triton-adversary"
	if routes != "" {
		baseline = routes
	}
	return gpuChain(t, "triton-adversary", `{"op": "add", "dims": {"M": 64, "N": 1000}, "seed": 7, "device": "cuda"}`, routes, baseline, rounds, extra...)
}

// gpuChain runs capture (the route routes/testdata/ADVERSARY/route beside
// routes), prepare and replay (3 samples, rounds rounds, baseline, and any
// extra replay flags) of one cuda case; it returns replay's exit, its
// document and its stderr.
func gpuChain(t *testing.T, adversary, caseJSON, routes, baseline string, rounds int, extra ...string) (int, artifacts.ReplayDoc, string) {
	t.Helper()
	return gpuChainIn(t, t.TempDir(), adversary, caseJSON, routes, baseline, rounds, extra...)
}

// gpuChainIn is gpuChain writing its stages into dir (capture, prepared,
// replay).
func gpuChainIn(t *testing.T, dir, adversary, caseJSON, routes, baseline string, rounds int, extra ...string) (int, artifacts.ReplayDoc, string) {
	t.Helper()
	route, err := filepath.Abs("../../routes/testdata/" + adversary + "/route")
	if err != nil {
		t.Fatal(err)
	}
	co := filepath.Join(dir, "cohort.json")
	os.WriteFile(co, []byte(fmt.Sprintf(`{"schema": 1, "rounds": %d, "cases": [%s]}`, rounds, caseJSON)), 0o644)
	capDir, prepDir, repDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared"), filepath.Join(dir, "replay")
	if code, out, errs := tp(t, "capture", "--cohort", co, "--routes", routes, "--route-exec", route, "--output", capDir); code != 0 {
		t.Fatalf("capture = exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir); code != 0 {
		t.Fatalf("prepare = exit %d\n%s", code, errs)
	}
	code, _, errs := tp(t, append([]string{"replay", "--prepared", prepDir, "--output", repDir, "--baseline", baseline, "--samples", "3", "--rounds", fmt.Sprint(rounds), "--target", "0"}, extra...)...)
	return code, readReplay(t, repDir), errs
}

// TestGPUAdversaries runs add kernels that cheat (routes/testdata/
// triton-adversary) through capture, prepare and replay on the GPU
// (skipped without one, or without Triton) and expects each visit to fail
// naming what it did.
func TestGPUAdversaries(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"input_write", "input_written: A warm byte "},
		{"guard_after", "guard_overwritten: C warm byte "},
		{"write_before", "input_written: A warm byte "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, doc, errs := gpuAdversary(t, tc.name, "", 1)
			if len(doc.Visits) != 1 {
				t.Fatalf("replay = exit %d, %d visits\n%s", code, len(doc.Visits), errs)
			}
			v := doc.Visits[0]
			if code != exitFailure || v.Status != "failed" || !strings.HasPrefix(v.Reason, tc.want) || !strings.HasSuffix(v.Reason, "(device)") {
				t.Errorf("replay = exit %d, visit %s %q; want exit 1, failed %q... (device)", code, v.Status, v.Reason, tc.want)
			}
			t.Logf("%s: %s", tc.name, v.Reason)
		})
	}
}

// TestGPUNovelAdversaries runs kernels that keep state across launches
// to save work through capture, prepare and replay on the GPU (skipped
// without one, or without nvcc and cuBLAS): a cubin with __device__
// tables per block (routes/testdata/cuda-adversary) and an object entry
// that memoises by device buffer (routes/testdata/cublas-adversary). Warm
// samples repeat their sets, so each saves its work there; a novel
// sample's slots get new inputs and replay's fill before every sample, so
// each is caught at the first novel sample it saves work in (the third:
// both compute a buffer's first two calls, the validation calls of a
// warm set), with the exact reason. Two more wait until after validation
// to write their input or past their output, which only the timer's
// checks after every novel sample see (the next sample's copy would
// overwrite the evidence).
func TestGPUNovelAdversaries(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no GPU here")
	}
	if _, err := os.Stat("/usr/local/cuda/bin/nvcc"); err != nil && os.Getenv("CUDA_HOME") == "" {
		t.Skip("no CUDA toolkit here")
	}
	add := `{"op": "add", "dims": {"M": 64, "N": 1000}, "seed": 7, "device": "cuda"}`
	gemm := `{"op": "gemm", "dims": {"M": 256, "N": 256, "K": 256}, "seed": 8, "device": "cuda"}`
	for _, tc := range []struct{ route, variant, caseJSON, want string }{
		// Every call of sample 2 copies a saved result; the first of the
		// calls drawn to be judged names it (under novel rule 2, 88 of
		// each sample's calls are judged, not all).
		{"cuda-adversary", "block_memo", add, "oracle: novel sample 2 call "},
		{"cuda-adversary", "block_skip", add, "output_not_overwritten: C novel sample 2 call 0 element 0"},
		// Slot 0's A starts at byte 64 (visit.FreshGap); its C ends at
		// 64 + 256000, where the first canary byte it overwrites sits.
		{"cuda-adversary", "input_late", add, "input_written: A fresh byte 64 (device) (novel sample 2)"},
		{"cuda-adversary", "guard_late", add, "guard_overwritten: C fresh byte 256064 (device) (novel sample 2)"},
		{"cublas-adversary", "memo_buffers", gemm, "output_not_overwritten: C novel sample 2 call 0 element 0"},
		// Skips every warm call after validation, computes every novel
		// one: only the warm outputs' fill on the device shows it.
		{"cuda-adversary", "warm_skip", add, "timed_output_mismatch: set 0 output C element 0"},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			t.Setenv("TILEPIPE_TEST_GPU_ADVERSARY", tc.variant)
			code, doc, errs := gpuChain(t, tc.route, tc.caseJSON, "", tc.route, 1)
			if len(doc.Visits) != 1 {
				t.Fatalf("replay = exit %d, %d visits\n%s", code, len(doc.Visits), errs)
			}
			v := doc.Visits[0]
			if code != exitFailure || v.Status != "failed" || !strings.HasPrefix(v.Reason, tc.want) {
				t.Errorf("replay = exit %d, visit %s %q; want exit 1, failed %q...", code, v.Status, v.Reason, tc.want)
			}
			t.Logf("%s: %s", tc.variant, v.Reason)
		})
	}
}

// TestGPUSideStream (on a GPU with cuBLAS): an object entry that runs its
// gemm on a stream of its own and returns with the work still running
// (routes/testdata/cublas-adversary) passes validation, as it computes the
// right answer, and is timed at the gemm's time, because the CUDA timer
// synchronises the whole device before its closing event. A timer that
// waited on its own stream only would time the launches: a 2048^3 strict
// f32 gemm takes about 340 us on an H200, its launch a few; the test asks
// for at least 0.8 of the honest cublas route's time.
func TestGPUSideStream(t *testing.T) {
	_, ratio := besideCublas(t, t.TempDir(), "side_stream", `{"op": "gemm", "dims": {"M": 2048, "N": 2048, "K": 2048}, "seed": 8, "device": "cuda"}`)
	if !(ratio >= 0.8) {
		t.Errorf("the side-stream entry timed at %.3f of the honest route's time: its work escaped the span", ratio)
	}
}

// besideCublas runs routes/testdata/cublas-adversary's variant beside the
// honest cublas route on one case through capture, prepare and replay (two
// rounds, stages in dir; skipped without a GPU and cuBLAS), requires both
// rows to pass, and returns the replay document and the adversary's
// median time per call over the honest route's.
func besideCublas(t *testing.T, dir, variant, caseJSON string) (artifacts.ReplayDoc, float64) {
	t.Helper()
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no GPU here")
	}
	if _, err := os.Stat("/usr/local/cuda/include/cublas_v2.h"); err != nil && os.Getenv("CUDA_HOME") == "" {
		t.Skip("no CUDA toolkit with cuBLAS here")
	}
	t.Setenv("TILEPIPE_TEST_GPU_ADVERSARY", variant)
	code, doc, errs := gpuChainIn(t, dir, "cublas-adversary", caseJSON, "cublas", "cublas", 2)
	if code != exitOK {
		t.Fatalf("replay = exit %d, want 0 (both routes compute the gemm)\n%s", code, errs)
	}
	med := map[string]float64{}
	for _, s := range doc.Summary {
		if s.Status != artifacts.StatusPassed {
			t.Fatalf("row %s %s = %s %q, want passed", s.Case, s.Route, s.Status, s.Reason)
		}
		med[s.Route] = s.MedianNs
	}
	ratio := med["cublas-adversary"] / med["cublas"]
	t.Logf("median per call: cublas %.0f ns, cublas-adversary (%s) %.0f ns, ratio %.3f", med["cublas"], variant, med["cublas-adversary"], ratio)
	return doc, ratio
}

// cublasVisit runs routes/testdata/cublas-adversary's variant on one case
// through capture, prepare and replay (one round, skipped without a GPU
// and cuBLAS) and returns replay's exit code and its one visit.
func cublasVisit(t *testing.T, variant, caseJSON string) (int, artifacts.VisitResult) {
	t.Helper()
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no GPU here")
	}
	if _, err := os.Stat("/usr/local/cuda/include/cublas_v2.h"); err != nil && os.Getenv("CUDA_HOME") == "" {
		t.Skip("no CUDA toolkit with cuBLAS here")
	}
	t.Setenv("TILEPIPE_TEST_GPU_ADVERSARY", variant)
	code, doc, errs := gpuChain(t, "cublas-adversary", caseJSON, "", "cublas-adversary", 1)
	if len(doc.Visits) != 1 {
		t.Fatalf("replay = exit %d, %d visits\n%s", code, len(doc.Visits), errs)
	}
	return code, doc.Visits[0]
}

// TestGPUTF32AsStrict (on a GPU with cuBLAS): an entry that runs a strict
// f32 gemm on TF32 tensor cores (routes/testdata/cublas-adversary tf32)
// at K = 2048, where on `normal` inputs the strict bound let TF32 through
// (issue 27). A strict f32 gemm case takes the `exact` pattern (bound 0),
// so its first validation call fails the oracle.
func TestGPUTF32AsStrict(t *testing.T) {
	code, v := cublasVisit(t, "tf32", `{"op": "gemm", "dims": {"M": 256, "N": 256, "K": 2048}, "seed": 8, "device": "cuda"}`)
	if code != exitFailure || v.Status != "failed" || !strings.HasPrefix(v.Reason, "oracle: warm set 0: bound: C[") || !strings.Contains(v.Reason, " ± 0 (") {
		t.Errorf("replay = exit %d, visit %s %q; want exit 1, failed by the oracle's bound 0", code, v.Status, v.Reason)
	}
	t.Logf("tf32: %s", v.Reason)
}

// TestGPUBackgroundWork (on a GPU with cuBLAS): an entry that computes
// every call and keeps a thread of its own running gemms on its own stream
// (routes/testdata/cublas-adversary background), GPU work of the visit
// outside its samples. The timer's spans are honest; the telemetry
// monitor's idle probe before the first command waits for the GPU's time
// slice and fails the visit.
func TestGPUBackgroundWork(t *testing.T) {
	code, v := cublasVisit(t, "background", `{"op": "gemm", "dims": {"M": 256, "N": 256, "K": 256}, "seed": 8, "device": "cuda"}`)
	if code != exitFailure || v.Status != "failed" || !strings.HasPrefix(v.Reason, "gpu_busy: replay's empty kernel took ") || v.GPUIdle == nil || v.GPUIdle.WorstNs <= telemetry.BusyNs {
		t.Errorf("replay = exit %d, visit %s %q, probes %+v; want exit 1, failed gpu_busy", code, v.Status, v.Reason, v.GPUIdle)
	}
	t.Logf("background: %s (probes %+v)", v.Reason, v.GPUIdle)
}

// TestGPUShavedEvents (on a GPU with cuBLAS): an entry that computes every
// call and rewrites the timer's pointer to cuEventElapsedTime, found by
// value in the timer's data, with one that reports 30% less
// (routes/testdata/cublas-adversary shave). The batch samples' median gap
// between replay's span and the events is bounded by the visit's own
// empty samples (visit.CheckGap), not by 5 ms + 25%: clock_mismatch.
func TestGPUShavedEvents(t *testing.T) {
	code, v := cublasVisit(t, "shave", `{"op": "gemm", "dims": {"M": 256, "N": 256, "K": 256}, "seed": 8, "device": "cuda"}`)
	if code != exitFailure || v.Status != "failed" || !strings.HasPrefix(v.Reason, "clock_mismatch: batch samples: replay measured a median span of ") || !strings.Contains(v.Reason, " ns, the CUDA events a median ") {
		t.Errorf("replay = exit %d, visit %s %q; want exit 1, failed clock_mismatch on the batch samples", code, v.Status, v.Reason)
	}
	t.Logf("shave: %s", v.Reason)
}

// TestGPUShavedNovelEvents (on a GPU with cuBLAS): an entry that shaves
// the timer's events by 30% on its novel samples only
// (routes/testdata/cublas-adversary shave_novel), beside the honest
// cublas route. Its batch samples are honest, so the gap check passes it;
// under novel rule 3 its novel samples (the claim) are staged and timed by
// replay's span, so the shave moves neither its time nor its ratio: the
// events it shaved are in the timer column, 0.7 of the span or less.
func TestGPUShavedNovelEvents(t *testing.T) {
	dir := t.TempDir()
	doc, ratio := besideCublas(t, dir, "shave_novel", `{"op": "gemm", "dims": {"M": 1024, "N": 1024, "K": 1024}, "seed": 8, "device": "cuda"}`)
	if !(ratio >= 0.9) {
		t.Errorf("the novel-shaving entry timed at %.3f of the honest route's time: the shave reached the claim", ratio)
	}
	st, err := artifacts.OpenStage(filepath.Join(dir, "replay"), artifacts.ReplayType, nil)
	if err != nil {
		t.Fatal(err)
	}
	shaved := 0
	for _, v := range doc.Visits {
		if v.Route != "cublas-adversary" {
			continue
		}
		rows, err := samples.ReadFile(st.Store.Path(v.Samples), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Kind == samples.KindNovel && r.Clock == samples.ClockReplay && float64(r.TimerNs) <= 0.72*float64(r.TotalNs) {
				shaved++
			}
		}
	}
	if shaved == 0 {
		t.Error("no novel sample of the adversary shows its shaved events beside replay's span: the adversary did not shave")
	}
}

// TestGPUSyncShave (on a GPU with cuBLAS): an entry that, on novel calls,
// runs its gemm on a stream of its own and turns the timer's device
// synchronisation and unmap into no-ops (routes/testdata/cublas-adversary
// sync_shave), so the timer answers with the gemms still running. A
// staged sample's span ends only after the monitor's idle probe, taken
// once the visit is frozen: it finds the GPU busy and fails the visit.
func TestGPUSyncShave(t *testing.T) {
	code, v := cublasVisit(t, "sync_shave", `{"op": "gemm", "dims": {"M": 1024, "N": 1024, "K": 1024}, "seed": 8, "device": "cuda"}`)
	if code != exitFailure || v.Status != "failed" || !strings.HasPrefix(v.Reason, "gpu_busy: replay's empty kernel took ") || v.GPUIdle == nil || v.GPUIdle.WorstNs <= telemetry.BusyNs {
		t.Errorf("replay = exit %d, visit %s %q, probes %+v; want exit 1, failed gpu_busy", code, v.Status, v.Reason, v.GPUIdle)
	}
	t.Logf("sync_shave: %s (probes %+v)", v.Reason, v.GPUIdle)
}

// TestGPUHealthCheck (on a GPU): a kernel that stores far outside any
// allocation fails its visits with the driver's error (CUDA error 700);
// before the next GPU visit replay checks the GPU in a fresh process,
// which passes (the error poisoned that visit's context alone), so the
// honest triton visits that follow run and pass, graph samples included.
func TestGPUHealthCheck(t *testing.T) {
	// With graph samples, which follow the novel samples: a replay that
	// left the visit frozen after them hung the honest visits until their
	// deadline (docs/results/2026-12-03-gpu-novel).
	code, doc, errs := gpuAdversary(t, "illegal_address", "triton", 2, "--graph-batch", "4")
	if code != exitFailure || len(doc.Visits) != 4 {
		t.Fatalf("replay = exit %d, %d visits, want 1 and 4\n%s", code, len(doc.Visits), errs)
	}
	for _, v := range doc.Visits {
		t.Logf("visit %d %s: %s %s", v.Index, v.Route, v.Status, v.Reason)
		switch {
		case v.Route == "triton" && v.Status != "passed":
			t.Errorf("honest visit %d = %s %q, want passed (the GPU passed its health check)", v.Index, v.Status, v.Reason)
		case v.Route == "triton-adversary" && (v.Status != "failed" || !strings.HasPrefix(v.Reason, "cuda_error: ")):
			t.Errorf("adversary visit %d = %s %q, want failed with the driver's error", v.Index, v.Status, v.Reason)
		}
	}
	if !strings.Contains(errs, "replay: the GPU passed its health check after the CUDA error of visit ") {
		t.Errorf("replay's progress does not say the health check ran:\n%s", errs)
	}
}

// gpuCeilings is a `cuda-timer --ceilings` answer of the H200's order.
const gpuCeilings = `{"device": "NVIDIA H200", "l2_bytes": 62914560, "copy_bytes": 2147483648, "copy_reps": 40, "copy_ns": 20000000, "copy_worst_ns": 20200000, "copy_bandwidth": 4.294967e+12, "gemm": [` +
	`{"dtype": "f32", "policy": "strict", "n": 8192, "reps": 1, "ns": 22000000, "worst_ns": 22330000, "flops": 4.997780e+13}, ` +
	`{"dtype": "f32", "policy": "tf32", "n": 8192, "reps": 6, "ns": 21000000, "worst_ns": 21200000, "flops": 3.141462e+14}, ` +
	`{"dtype": "f16", "policy": "", "n": 8192, "reps": 14, "ns": 20000000, "worst_ns": 20400000, "flops": 7.696581e+14}, ` +
	`{"dtype": "bf16", "policy": "", "n": 8192, "reps": 14, "ns": 20000000, "worst_ns": 20600000, "flops": 7.696581e+14}], "gemm_error": ""}`

// TestGPUFloorsAudited gives the committed GPU checkpoint (made before
// replay measured GPU ceilings) the ceilings and GPU floors a replay
// would record, and forges them one way at a time: the audit re-derives
// every GPU floor from its session's ceilings, refuses ceilings that
// disagree with themselves or exceed any GPU, and fails a row faster
// than its GPU floor, each with the reason. Without ceilings, a timed GPU
// row is a warning naming why none were measured.
func TestGPUFloorsAudited(t *testing.T) {
	long(t)
	g, err := floors.ParseCeilings([]byte(gpuCeilings))
	if err != nil {
		t.Fatal(err)
	}
	// sessions edits the replay's sessions in the document, the journal
	// and the results table, as a replay that measured them would have.
	sessions := func(t *testing.T, dir string, edit func(d *artifacts.ReplayDoc)) {
		forgeStage(t, filepath.Join(dir, "replay"), artifacts.ReplayType, nil, func(st *artifacts.Stage, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {
			edit(d)
			rejournal(t, st, func(l *artifacts.JournalLine) {
				if l.Session != nil {
					*l.Session = d.Sessions[l.Session.Index]
				}
			})
			if old, err := readLayer(st, "results.md"); err != nil {
				t.Fatal(err)
			} else if table := report.Table(*d); table != string(old) {
				relayer(t, st, "results.md", func([]byte) []byte { return []byte(table) })
			}
		})
	}
	// cpuFloors drops the GPU floors the H200 replay measured (the
	// committed checkpoint has them), so each case below sets its own.
	cpuFloors := func(d *artifacts.ReplayDoc) {
		for i := range d.Sessions {
			d.Sessions[i].Floors = slices.DeleteFunc(d.Sessions[i].Floors, func(f artifacts.CaseFloor) bool { return f.Device == oracle.DeviceCUDA })
		}
	}
	withCeilings := func(t *testing.T, dir string, edit func(d *artifacts.ReplayDoc)) {
		caps := map[string]artifacts.CapturedCase{}
		for _, c := range readCapture(t, filepath.Join(dir, "capture")).Cases {
			caps[c.Case.ID] = c
		}
		sessions(t, dir, func(d *artifacts.ReplayDoc) {
			cpuFloors(d)
			for i := range d.Sessions {
				gc := *g
				gc.Gemm = slices.Clone(g.Gemm) // each forgery edits its own
				d.Sessions[i].GPU = &gc
				for _, id := range d.Cases {
					c := caps[id]
					d.Sessions[i].Floors = append(d.Sessions[i].Floors, floors.GPUCase(c.Case, c.Signature, d.Config.Sets, &gc))
				}
			}
			if edit != nil {
				edit(d)
			}
		})
	}
	gemm := func(d *artifacts.ReplayDoc) int {
		for i, f := range d.Sessions[0].Floors {
			if strings.HasPrefix(f.Case, "gemm-") {
				return i
			}
		}
		t.Fatal("no gemm floor")
		return -1
	}
	for _, tc := range []struct {
		name         string
		forge        func(t *testing.T, dir string)
		status, want string
	}{
		{"no ceilings", func(t *testing.T, dir string) {
			sessions(t, dir, func(d *artifacts.ReplayDoc) {
				cpuFloors(d)
				d.Sessions[0].GPU = nil
				d.Sessions[0].GPUError = "cuda-timer --ceilings: exit status 2: harness: error: dlopen libcuda.so.1"
			})
		}, "WARNED", "add-2x64-cuda/triton: timed on the GPU without a GPU floor: cuda-timer --ceilings: exit status 2: harness: error: dlopen libcuda.so.1"},
		// PASSED, or WARNED where this CPU lacks the H200 host's vector
		// flags (the CPU rows' check, not the GPU's).
		{"honest ceilings", func(t *testing.T, dir string) { withCeilings(t, dir, nil) },
			"", "GPU ceilings as recorded (not measured here): NVIDIA H200 copies 4.29 TB/s"},
		{"bandwidth forged", func(t *testing.T, dir string) {
			withCeilings(t, dir, func(d *artifacts.ReplayDoc) {
				d.Sessions[0].GPU.CopyReps *= 10
				d.Sessions[0].GPU.CopyBandwidth *= 10
			})
		}, "FAILED", "session 0 GPU ceilings: copy bandwidth 42.9 TB/s, above what any GPU delivers (30 TB/s)"},
		{"rate raised", func(t *testing.T, dir string) {
			withCeilings(t, dir, func(d *artifacts.ReplayDoc) { d.Sessions[0].GPU.Gemm[3].Flops *= 2 })
		}, "FAILED", "session 0 GPU ceilings: gemm bf16 : 1.5393162e+15 flop/s, but 8192^3 x 14 in 2e+07 ns is "},
		{"floor lowered", func(t *testing.T, dir string) {
			withCeilings(t, dir, func(d *artifacts.ReplayDoc) {
				f := &d.Sessions[0].Floors[gemm(d)]
				f.PeakFlops *= 10
				f.ComputeNs /= 10
			})
		}, "FAILED", "session 0 floor of gemm-4x8x6-bf16-cuda: compute floor "},
		{"floor without ceilings", func(t *testing.T, dir string) {
			withCeilings(t, dir, func(d *artifacts.ReplayDoc) { d.Sessions[0].GPU = nil })
		}, "FAILED", "session 0 floor of add-2x64-cuda: a GPU case's floor, but the session recorded no GPU ceilings"},
		{"faster than the GPU allows", func(t *testing.T, dir string) {
			withCeilings(t, dir, func(d *artifacts.ReplayDoc) {
				for i := range d.Summary {
					if d.Summary[i].Case == "gemm-4x8x6-bf16-cuda" {
						d.Summary[i].MinNs = 1e-6
					}
				}
			})
		}, "FAILED", "gemm-4x8x6-bf16-cuda/triton passed in replay, but below_physical_floor: fastest sample 0 ns per call, compute floor 0 ns (384 flop at 769658 GFLOP/s cuBLAS GemmEx bf16 8192^3 on NVIDIA H200, slack 1.133)"},
		{"slack raised", func(t *testing.T, dir string) {
			withCeilings(t, dir, func(d *artifacts.ReplayDoc) {
				f := &d.Sessions[0].Floors[gemm(d)]
				f.ComputeSlack = 2
				f.ComputeNs = f.Flops / f.PeakFlops * 1e9 / 2
			})
		}, "FAILED", "session 0 floor of gemm-4x8x6-bf16-cuda: L2 62914560 bytes, slacks 1.111 (memory) and 2 (compute); the session's GPU ceilings give 62914560 bytes, 1.111 and 1.133"},
		{"spread forged apart from its floors", func(t *testing.T, dir string) {
			withCeilings(t, dir, func(d *artifacts.ReplayDoc) { d.Sessions[0].GPU.Gemm[3].WorstNs = 3e7 })
		}, "FAILED", "session 0 floor of gemm-4x8x6-bf16-cuda: L2 62914560 bytes, slacks 1.111 (memory) and 1.133 (compute); the session's GPU ceilings give 62914560 bytes, 1.111 and 1.65"},
		// Ceilings recorded before they kept their spread: every byte at
		// slack 2, as replays made then recorded their floors.
		{"ceilings without spread", func(t *testing.T, dir string) {
			withCeilings(t, dir, func(d *artifacts.ReplayDoc) {
				g := d.Sessions[0].GPU
				g.CopyWorstNs = 0
				for i := range g.Gemm {
					g.Gemm[i].WorstNs = 0
				}
				caps := map[string]artifacts.CapturedCase{}
				for _, c := range readCapture(t, filepath.Join(dir, "capture")).Cases {
					caps[c.Case.ID] = c
				}
				cpuFloors(d)
				for _, id := range d.Cases {
					d.Sessions[0].Floors = append(d.Sessions[0].Floors, floors.GPUCase(caps[id].Case, caps[id].Signature, d.Config.Sets, g))
				}
				for i := range d.Summary {
					if d.Summary[i].Case == "add-2x64-cuda" {
						d.Summary[i].MinNs = 0.01
					}
				}
			})
		}, "FAILED", "add-2x64-cuda/triton passed in replay, but below_physical_floor: fastest sample 0 ns per call, memory floor 0 ns (1536 bytes at 4295.0 GB/s for a "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyCheckpoint(t)
			tc.forge(t, dir)
			code, out, _ := tp(t, auditArgs(dir)...)
			row := "| physical floor | " + tc.status + " |"
			if tc.status == "" && strings.Contains(out, "| physical floor | WARNED |") {
				row = "| physical floor | WARNED |"
			} else if tc.status == "" {
				row = "| physical floor | PASSED |"
			}
			if !strings.Contains(out, row) || !strings.Contains(out, tc.want) {
				t.Errorf("audit after %s = exit %d, want row %q with evidence %q:\n%s", tc.name, code, row, tc.want, out)
			}
			if (tc.status == "FAILED") != (code == exitFailure) {
				t.Errorf("audit after %s = exit %d", tc.name, code)
			}
		})
	}
}

// TestGPUPipeline (on a GPU with nvcc): a split-K GEMM as a pipeline of
// two launches of one nvcc-built module, sharing a buffer
// (routes/testdata/cuda-pipeline, docs/gpu.md "Pipelines"), goes through
// capture, prepare, replay and the audit: honest, every output is judged
// and the row passes, its time the two launches'; with the reduce told to
// add only the first slice, the oracle names the first element.
func TestGPUPipeline(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no GPU here")
	}
	if _, err := os.Stat("/usr/local/cuda/bin/nvcc"); err != nil && os.Getenv("CUDA_HOME") == "" {
		t.Skip("no CUDA toolkit here")
	}
	gemm := `{"op": "gemm", "dims": {"M": 256, "N": 256, "K": 1024}, "seed": 9, "device": "cuda"}`
	for _, tc := range []struct{ variant, want string }{
		{"honest", ""},
		{"one_slice", "oracle: warm set 0: bound: C[0] = "},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			t.Setenv("TILEPIPE_TEST_GPU_PIPELINE", tc.variant)
			dir := t.TempDir()
			code, doc, errs := gpuChainIn(t, dir, "cuda-pipeline", gemm, "", "cuda-pipeline", 1)
			if len(doc.Visits) != 1 {
				t.Fatalf("replay = exit %d, %d visits\n%s", code, len(doc.Visits), errs)
			}
			v := doc.Visits[0]
			if tc.want == "" {
				if code != exitOK || v.Status != "passed" {
					t.Fatalf("replay = exit %d, visit %s %q; want it passed", code, v.Status, v.Reason)
				}
				if acode, _, aerrs := tp(t, auditArgs(dir)...); acode != exitOK {
					t.Errorf("audit = exit %d\n%s", acode, aerrs)
				}
			} else if code != exitFailure || v.Status != "failed" || !strings.HasPrefix(v.Reason, tc.want) {
				t.Errorf("replay = exit %d, visit %s %q; want exit 1, failed %q...", code, v.Status, v.Reason, tc.want)
			}
			t.Logf("%s: %s %s", tc.variant, v.Status, v.Reason)
		})
	}
}
