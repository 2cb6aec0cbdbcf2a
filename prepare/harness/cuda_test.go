package harness

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCudaProbeBuilds: the CUDA launch path (cuda/probe.c, the core of
// the CUDA timer to come, docs/gpu.md) compiles on a machine with no CUDA
// at all, warnings as errors, since it loads the driver at run time; run
// without a driver it says so and exits 2.
func TestCudaProbeBuilds(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "probe")
	cc(t, "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe, "cuda/probe.c", "-ldl", "-lm")
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("a GPU driver is here: the probe needs a cubin to run")
	}
	out, err := exec.Command(exe, t.TempDir()).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || !strings.HasPrefix(string(out), "dlopen libcuda.so.1: ") {
		t.Errorf("probe without a driver = %v %q, want exit 2 and dlopen libcuda.so.1: ...", err, out)
	}
}
