package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
)

// Real GPU checkpoints committed as archives (capture, prepared, replay,
// results.md and audit.md of one `tilepipe run` on an H100), audited here
// without a GPU. Archived, not as directories: their blobs (Arrow outputs,
// a torch closure) are three times their xz size, and the working tree
// travels to the GPU machine under a size limit.
const (
	// gpu-llm-ci: docs/results/2026-12-07-gpu-llm/ci.sh, triton, cublas
	// and torch-eager on one tiny case of each kernel issue 30 added.
	llmCheckpoint = "../../testdata/gpu-checkpoint-llm.tar.xz"
	// gpu-quick with torch-compile (max-autotune) and torch-eager:
	// docs/results/2026-12-07-torch-compile/tc.sh.
	compileCheckpoint = "../../testdata/torch-compile-checkpoint.tar.xz"
)

// unpackCheckpoint extracts a committed checkpoint archive into a new
// directory, writable, so a test can change a byte.
func unpackCheckpoint(t *testing.T, archive string) string {
	t.Helper()
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("no xz here to unpack the checkpoint (make deps installs xz-utils)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xJf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xJf %s: %v\n%s", archive, err, out)
	}
	return dir
}

// auditOf audits the checkpoint in dir: its exit code and everything it
// printed.
func auditOf(t *testing.T, dir string) (int, string) {
	t.Helper()
	code, stdout, errs := tp(t, append(auditArgs(dir), "--output", filepath.Join(t.TempDir(), "audit.json"))...)
	return code, stdout + errs
}

// blobOf is the path of the capture blob of the build file path of
// case id's build by route.
func blobOf(t *testing.T, dir, id, route, path string) (string, artifacts.Digest) {
	t.Helper()
	for _, c := range readCapture(t, filepath.Join(dir, "capture")).Cases {
		for _, b := range c.Builds {
			for _, f := range b.Files {
				if c.Case.ID == id && b.Route == route && f.Path == path {
					return filepath.Join(dir, "capture", "blobs", "sha256", f.Digest.Encoded()), f.Digest
				}
			}
		}
	}
	t.Fatalf("no file %s in the build of %s by %s", path, id, route)
	return "", ""
}

// TestLLMCheckpointAudits: the gpu-llm-ci checkpoint (triton's new
// kernels in half storage, the split decode attention as a pipeline of two
// launches, cuBLAS gemv and the cuBLASLt GELU epilogue, torch-eager; an
// H100, docs/results/2026-12-07-gpu-llm/h100-ci2) audits intact with its
// failures kept: torch-eager's f16 scan and bf16 gemm_gelu outside the
// strict bound, and four visits failed gpu_busy. One byte of the cuBLAS
// gemv entry object flipped, the audit names the blob.
func TestLLMCheckpointAudits(t *testing.T) {
	dir := unpackCheckpoint(t, llmCheckpoint)
	code, got := auditOf(t, dir)
	for _, want := range []string{
		"audit verdict: PASS (checkpoint intact; 6 of 24 claims supported;",
		"| 11 | 1 | scan-ci-f16 | torch-eager | oracle: warm set 0: bound: Y[7] = 5.828125, want 5.83129883 ± 0.00291 (194 of 420 elements outside) |",
		"| 5 | 1 | gemm_gelu-ci-bf16 | torch-eager | oracle: warm set 0: bound: C[4] = 0.09375, want 0.094245948 ± 0.00037 (79 of 384 elements outside) |",
		"audit: PASSED outputs: ",
	} {
		if code != 0 || !strings.Contains(got, want) {
			t.Errorf("audit of the gpu-llm-ci checkpoint = exit %d, want 0 and %q\n%s", code, want, got)
		}
	}
	for _, want := range []string{
		"| gemv-ci-f16 | cublas | passed | 306 µs |",
		"| gemm_gelu-ci-bf16 | cublas | passed | 290 µs |",
		"| attn-decode-ci-bf16 | triton | passed | 16.1 µs |",
		"| attn-decode-split-ci-f16 | triton | passed | 31.1 µs |",
	} {
		if b, err := os.ReadFile(filepath.Join(dir, "results.md")); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("results.md of the gpu-llm-ci checkpoint lacks %q (%v)", want, err)
		}
	}
	// The split decode is a pipeline: the split pass over (S, B·Hq)
	// programs, then the merge over (1, B·Hq), one scratch buffer between.
	lp, _ := blobOf(t, dir, "attn-decode-split-ci-f16", "triton", "launch.json")
	var pipe struct {
		Buffers  []struct{ Bytes int64 }
		Launches []struct {
			Kernel string
			Grid   [3]int
		}
	}
	if b, err := os.ReadFile(lp); err != nil || json.Unmarshal(b, &pipe) != nil || len(pipe.Launches) != 2 ||
		pipe.Launches[0].Grid != [3]int{4, 2, 1} || pipe.Launches[1].Grid != [3]int{1, 2, 1} || pipe.Buffers[0].Bytes != 9216 {
		t.Errorf("the split decode's launch manifest = %+v (%v), want two launches, grids [4 2 1] and [1 2 1], a 9216-byte buffer", pipe, err)
	}
	path, digest := blobOf(t, dir, "gemv-ci-f16", "cublas", "entry.o")
	flip(t, path)
	code, got = auditOf(t, dir)
	want := "blob cases/gemv-ci-f16/cublas/entry.o (" + path + "): digest mismatch: expected " + string(digest)
	if code != 1 || !strings.Contains(got, "checkpoint BROKEN") || !strings.Contains(got, want) {
		t.Errorf("audit with one byte of the cuBLAS gemv object flipped = exit %d, want 1, the checkpoint broken and\n%s\n%s", code, want, got)
	}
}

// flip changes the middle byte of the file at path.
func flip(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	overwrite(t, path, b)
}

// overwrite replaces the file at path (a stored blob, read-only) with b.
func overwrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// addCubin and softmaxCubin are the Triton kernels Inductor generated
// for add-2x64-cuda and softmax-3x33-cuda in the torch-compile checkpoint.
const (
	addCubin     = "cache/triton/3YAJMTENSPZMVDL2EFJAAPB5SEFHCHU3RBGDXWRQ7SNXL57IVG4A/triton_poi_fused_add_0.cubin"
	softmaxCubin = "cache/triton/4T3AP6LJMGI3D7LPASH5IUZ5U4RAGXY53C7WQY5MD3CLA6GLWTXQ/triton_per_fused__softmax_exp_prepare_softmax_online_sub_0.cubin"
	compileRoute = "torch-compile"
)

// TestTorchCompileCheckpointAudits: the torch-compile checkpoint (gpu-quick
// under max-autotune beside torch-eager, on an H100) audits intact, every
// claim supported, its cold costs shown apart from the timed rows, and
// compare recomputes its ratios against torch-compile as the baseline. Two
// attackers on its stored cache: add's generated kernel overwritten in
// the store by the bytes of another real kernel (softmax's cubin), which
// the audit names by digest; and the prepared stage forged, re-hashed
// consistently, so add's visits are given softmax's cache, which the audit
// finds is not add's build's.
func TestTorchCompileCheckpointAudits(t *testing.T) {
	dir := unpackCheckpoint(t, compileCheckpoint)
	code, got := auditOf(t, dir)
	if want := "audit verdict: PASS (checkpoint intact; 10 of 10 claims supported;"; code != 0 || !strings.Contains(got, want) {
		t.Fatalf("audit of the torch-compile checkpoint = exit %d, want 0 and %q\n%s", code, want, got)
	}
	table, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "| add-2x64-cuda | torch-compile | 4.68 s | 2.38 s | 251 µs |"; !strings.Contains(string(table), "\nCold costs (JIT routes)") || !strings.Contains(string(table), want) {
		t.Errorf("results.md of the torch-compile checkpoint lacks the cold costs row %q", want)
	}

	// The compiled route as the baseline, recomputed from the stored
	// samples: the table says which baseline each ratio is against.
	code, out, errs := tp(t, "compare", "--prepared", filepath.Join(dir, "prepared"), "--replay", filepath.Join(dir, "replay"), "--baseline", compileRoute)
	for _, want := range []string{"| ratio vs torch-compile [min – max] |", "| add-2x64-cuda | torch-compile | passed | 251 µs | 182 µs – 282 µs | 319 µs | baseline |",
		"| add-2x64-cuda | torch-eager | passed | 15 µs | 14 µs – 20.4 µs | 443 µs | 0.070 [0.056 – 0.083] |"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("compare --baseline torch-compile = exit %d, want 0 and %q\n%s%s", code, want, out, errs)
		}
	}

	swapped := unpackCheckpoint(t, compileCheckpoint)
	path, digest := blobOf(t, swapped, "add-2x64-cuda", compileRoute, addCubin)
	other, _ := blobOf(t, swapped, "softmax-3x33-cuda", compileRoute, softmaxCubin)
	b, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	overwrite(t, path, b)
	code, got = auditOf(t, swapped)
	want := "blob cases/add-2x64-cuda/torch-compile/" + addCubin + " (" + path + "): digest mismatch: expected " + string(digest)
	if code != 1 || !strings.Contains(got, "checkpoint BROKEN") || !strings.Contains(got, want) {
		t.Errorf("audit with add's kernel replaced by softmax's = exit %d, want 1, the checkpoint broken and\n%s\n%s", code, want, got)
	}

	forged := unpackCheckpoint(t, compileCheckpoint)
	forgeStage(t, filepath.Join(forged, "prepared"), artifacts.PreparedType, nil, func(_ *artifacts.Stage, d *artifacts.PreparedDoc, _ *artifacts.Receipt) {
		data := map[string][]artifacts.FileRef{}
		for _, e := range d.Entries {
			data[e.Case+"/"+e.Route] = e.Data
		}
		for i, e := range d.Entries {
			if e.Case+"/"+e.Route == "add-2x64-cuda/"+compileRoute {
				d.Entries[i].Data = data["softmax-3x33-cuda/"+compileRoute]
			}
		}
	})
	code, got = auditOf(t, forged)
	if want := "entry add-2x64-cuda/torch-compile: data "; code != 1 || !strings.Contains(got, want) || !strings.Contains(got, "its capture build's cache files are ") || !strings.Contains(got, "triton_poi_fused_add_0.cubin") {
		t.Errorf("audit of a prepared stage giving add softmax's cache = exit %d, want 1 and %q ... its capture build's cache files are ... add's kernel\n%s", code, want, got)
	}
}
