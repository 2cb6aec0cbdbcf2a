package visit

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGPUDevices: the device nodes a GPU visit gets, found under a /dev;
// a machine without them, or with a regular file where a device should
// be, is refused naming it. The positive case needs mknod (root).
func TestGPUDevices(t *testing.T) {
	dev := t.TempDir()
	if _, err := GPUDevices(dev); err == nil || err.Error() != dev+": no NVIDIA GPU device (nvidia0, ...)" {
		t.Errorf("GPUDevices(an empty /dev) = %v", err)
	}
	mk := func(name string) {
		if err := unix.Mknod(filepath.Join(dev, name), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			if errors.Is(err, unix.EPERM) {
				t.Skipf("mknod: %v", err)
			}
			t.Fatal(err)
		}
	}
	mk("nvidia0")
	mk("nvidia1")
	os.WriteFile(filepath.Join(dev, "nvidia-modeset"), nil, 0o644) // not a GPU node: ignored
	mk("nvidiactl")
	mk("nvidia-uvm")
	if _, err := GPUDevices(dev); err == nil || err.Error() != "GPU device "+dev+"/nvidia-uvm-tools: stat "+dev+"/nvidia-uvm-tools: no such file or directory" {
		t.Errorf("GPUDevices(no nvidia-uvm-tools) = %v", err)
	}
	os.WriteFile(filepath.Join(dev, "nvidia-uvm-tools"), nil, 0o644)
	if _, err := GPUDevices(dev); err == nil || err.Error() != "GPU device "+dev+"/nvidia-uvm-tools: not a character device" {
		t.Errorf("GPUDevices(a regular file) = %v", err)
	}
	os.Remove(filepath.Join(dev, "nvidia-uvm-tools"))
	mk("nvidia-uvm-tools")
	got, err := GPUDevices(dev)
	want := []string{dev + "/nvidia0", dev + "/nvidia1", dev + "/nvidiactl", dev + "/nvidia-uvm", dev + "/nvidia-uvm-tools"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("GPUDevices = %v, %v; want %v", got, err, want)
	}
	s := &Sandbox{Program: "/usr/bin/bwrap"}
	argv := s.Argv(Mounts{Devices: got[:1]}, "/visit", []string{"timer"})
	if i := slices.Index(argv, "--dev-bind"); i < 0 || argv[i+1] != got[0] || argv[i+2] != got[0] || slices.Index(argv, "--dev") > i {
		t.Errorf("Argv with a GPU device = %v, want --dev-bind %s %s after the fresh --dev", argv, got[0], got[0])
	}
	if slices.Contains(s.Argv(Mounts{}, "/visit", []string{"timer"}), "--dev-bind") {
		t.Error("a visit without devices got --dev-bind")
	}
	// Route code of a case (builds, closure listings): the GPU's nodes for
	// a cuda case alone.
	cd := CaseDevices{Dev: dev}
	if n := cd.For(false); n != nil {
		t.Errorf("CaseDevices.For(a CPU case) = %v, want none", n)
	}
	if n := cd.For(true); !slices.Equal(n, want) {
		t.Errorf("CaseDevices.For(a cuda case) = %v, want %v", n, want)
	}
	w := s.Wrap(nil, nil, nil, cd.For(true), "/work", []string{"route", "build"})
	if n := strings.Count(strings.Join(w, " "), "--dev-bind "); n != len(want) {
		t.Errorf("Wrap with a cuda case's devices = %v: %d --dev-bind, want %d", w, n, len(want))
	}
	none := CaseDevices{Dev: t.TempDir()}
	if n := none.For(true); n != nil || none.err == nil {
		t.Errorf("CaseDevices.For(a cuda case, no GPU) = %v, %v; want none and why", n, none.err)
	}
}
