package halide_test

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/prepare/harness"
)

// TestCUDABuilds: the halide-cuda route (this source with -DTP_HALIDE_CUDA)
// builds every op it describes for a cuda case, in f32 and f16, into
// Halide CUDA objects and an entry of the CUDA timer's ABI that links with
// the CUDA timer, its runtime's constructor moved out of .init_array as
// prepare moves it (objcopy; prepare/policy.go). It refuses a CPU case, an
// op it does not schedule, and bf16 (Halide 14's NVPTX back end aborts on
// it), with the reasons. Nothing here runs on a GPU: the GPU machine has
// no Halide, so the objects are built here and carried there
// (docs/gpu.md, "halide-cuda").
func TestCUDABuilds(t *testing.T) {
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		t.Skip("no objcopy: ", err)
	}
	timerDir := t.TempDir()
	timerSrc, err := harness.WriteCUDA(timerDir, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []opTest{
		{op: "add", dims: dims("M", 37, "N", 1001)},
		{op: "add", dims: dims("M", 37, "N", 1001), dtype: "f16"},
		{op: "gelu_add", dims: dims("M", 3, "N", 70)},
		{op: "sigmoid_pair", dims: dims("M", 3, "N", 70)},
		{op: "gelu_pair", dims: dims("M", 3, "N", 70), dtype: "f16"},
		{op: "swiglu", dims: dims("M", 3, "N", 70)},
		{op: "sum", dims: dims("M", 5, "N", 1001)},
		{op: "max", dims: dims("M", 5, "N", 100)},
		{op: "softmax", dims: dims("M", 5, "N", 1001)},
		{op: "rmsnorm", dims: dims("M", 5, "N", 300), dtype: "f16"},
		{op: "layernorm", dims: dims("M", 5, "N", 300)},
		{op: "gemm", dims: dims("M", 100, "N", 300, "K", 200)},
	} {
		c := newCase(tc)
		c.Device = "cuda"
		t.Run(c.ID, func(t *testing.T) {
			resp, work := buildWith(t, routeCUDA, c)
			if resp.Status != "built" || resp.Kind != "object" || resp.Entry == nil || resp.Entry.Symbol != "tilepipe_entry" {
				t.Fatalf("build = %s %q (kind %s), want a built object with tilepipe_entry", resp.Status, resp.Reason, resp.Kind)
			}
			kernel := filepath.Join(work, "kernel.o")
			f, err := elf.Open(kernel)
			if err != nil {
				t.Fatal(err)
			}
			syms, _ := f.Symbols()
			f.Close()
			if !slices.ContainsFunc(syms, func(s elf.Symbol) bool { return s.Name == "halide_cuda_device_interface" }) {
				t.Errorf("kernel.o defines no halide_cuda_device_interface: not a CUDA target object")
			}
			moved := filepath.Join(work, "kernel.deferred.o")
			if out, err := exec.Command(objcopy, "--rename-section", ".init_array=tilepipe_init", kernel, moved).CombinedOutput(); err != nil {
				t.Fatalf("objcopy: %v\n%s", err, out)
			}
			exe := filepath.Join(work, "cuda-timer")
			argv := []string{"-std=gnu11", "-O1", "-DTILEPIPE_CUDA", "-o", exe, timerSrc, filepath.Join(work, "entry.o"), moved}
			argv = append(argv, resp.Link...)
			if out, err := exec.Command("cc", argv...).CombinedOutput(); err != nil {
				t.Fatalf("link with the CUDA timer: %v\n%s", err, out)
			}
			e, err := elf.Open(exe)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if s := e.Section("tilepipe_init"); s == nil || s.Size == 0 {
				t.Errorf("the linked timer has no tilepipe_init: Halide's runtime constructor would not run")
			}
		})
	}
	for _, tc := range []struct {
		c    opTest
		cpu  bool
		want string
	}{
		{opTest{op: "add", dims: dims("M", 2, "N", 8)}, true, "halide-cuda builds for cuda, the case runs on cpu"},
		{opTest{op: "rope", dims: dims("M", 2, "N", 8, "R", 4)}, false, `op "rope" is not implemented by the halide-cuda route (ops: gemm, add, gelu_add, sigmoid_pair, gelu_pair, swiglu, sum, max, softmax, rmsnorm, layernorm)`},
		{opTest{op: "gemm", dims: dims("M", 8, "N", 8, "K", 8), dtype: "bf16"}, false, `dtype "bf16": Halide 14's CUDA back end (LLVM 14 NVPTX) cannot compile bf16 loads`},
	} {
		c := newCase(tc.c)
		if !tc.cpu {
			c.Device = "cuda"
		}
		resp, _ := buildWith(t, routeCUDA, c)
		if resp.Status != "unsupported" || resp.Reason != tc.want {
			t.Errorf("build %s = %s %q, want unsupported %q", c.ID, resp.Status, resp.Reason, tc.want)
		}
	}
	out, err := exec.Command(routeCUDA, "describe").Output()
	if err != nil || !strings.Contains(string(out), `"name": "halide-cuda"`) || !strings.Contains(string(out), `"devices": ["cuda"]`) {
		t.Errorf("describe = %s (%v), want name halide-cuda, devices [cuda]", out, err)
	}
}
