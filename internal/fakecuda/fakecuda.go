// Package fakecuda builds, for tests on a machine without a GPU, a
// libcuda.so.1 and libnvidia-ml.so.1 whose device memory is host memory
// (fakecuda.c says what each call does), so the CUDA timer's and the
// telemetry monitor's own code runs in CI: their command and request
// channels, the descriptors they pass, and the staged novel slots' layout,
// uploads, downloads and checks (docs/gpu-clock.md). It stands in for the
// driver only: the tests that use it test tilepipe's C, never a GPU, and
// every GPU claim rests on runs on the H200 (docs/results).
package fakecuda

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

//go:embed fakecuda.c
var source []byte

// Lib builds the fake driver into a directory of the test's and returns
// it, for LD_LIBRARY_PATH: libcuda.so.1, and libnvidia-ml.so.1 the same
// file under NVML's name.
func Lib(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "fakecuda.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libcuda.so.1")
	if out, err := exec.Command("cc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("build fakecuda: %v\n%s", err, out)
	}
	if err := os.Symlink("libcuda.so.1", filepath.Join(dir, "libnvidia-ml.so.1")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Env is the environment a process started by a test needs to load the
// fake driver from dir (Lib's), with extra KEY=VALUE entries after it.
func Env(dir string, extra ...string) []string {
	return append([]string{"LD_LIBRARY_PATH=" + dir, "PATH=/usr/bin:/bin"}, extra...)
}
