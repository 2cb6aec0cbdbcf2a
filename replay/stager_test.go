package replay

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tilepipe/tilepipe/internal/fakecuda"
	"github.com/tilepipe/tilepipe/internal/telemetry"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/prepare/harness"
)

// stagerOn starts the real monitor (the CUDA timer's --telemetry) on the
// fake driver (internal/fakecuda), extra in its environment, and a
// visit's fresh files: inputs A and B, output C, 4 slots of 64 bytes.
func stagerOn(t *testing.T, extra ...string) (*stager, *buffers) {
	t.Helper()
	dir := t.TempDir()
	src, err := harness.WriteCUDA(dir, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "cuda-timer")
	if out, err := exec.Command("cc", "-O2", "-DTILEPIPE_CUDA", "-o", exe, src, "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build the CUDA timer: %v\n%s", err, out)
	}
	m, err := telemetry.Start([]string{exe, "--telemetry"}, fakecuda.Env(fakecuda.Lib(t), extra...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	b := &buffers{}
	for _, name := range []string{"A", "B"} {
		f, err := visit.NewNovelInput(name, visit.NewLayout(visit.PoolFresh, 4, 64))
		if err != nil {
			t.Fatal(err)
		}
		b.novelIn = append(b.novelIn, f)
	}
	c, err := visit.NewOutput("C", visit.NewLayout(visit.PoolFresh, 4, 64))
	if err != nil {
		t.Fatal(err)
	}
	b.freshOut = append(b.freshOut, c)
	t.Cleanup(b.close)
	return &stager{m: m, probes: &telemetry.Probes{}}, b
}

// sample is one staged sample as the session takes it: the slots mapped
// by "the visit" (here: this process), which runs calls on them, then
// the probe and the unstaging; it returns the stager's verdict.
func sample(t *testing.T, st *stager, i, n int64, calls func(dev []byte)) error {
	t.Helper()
	sg, err := st.stage(i, n)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := unix.Mmap(int(sg.Slots.Fd()), 0, 2<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	calls(dev)
	unix.Munmap(dev)
	sg.Slots.Close()
	if err := sg.Probe(); err != nil {
		t.Fatal(err)
	}
	if err := sg.Unstage(); err != nil {
		t.Fatal(err)
	}
	return st.verdict()
}

// TestStager: replay's side of the stager on the real monitor. The files
// go in the visit file's order (inputs, then outputs); an honest sample
// brings C's outputs into its file and counts its in-span probe; the
// monitor's reason fails the visit; a probe that finds the GPU busy fails
// it first, whatever came down; and close releases a sample never
// unstaged, so the next visit opens its files on the same monitor.
func TestStager(t *testing.T) {
	st, b := stagerOn(t)
	if err := st.open(b); err != nil {
		t.Fatal(err)
	}
	size := b.novelIn[0].Layout.Size()
	cOff := 2 * size // A, B, then C
	if err := sample(t, st, 0, 2, func(dev []byte) {
		copy(dev[cOff+b.freshOut[0].Layout.Offset(1):], bytes.Repeat([]byte{7}, 64))
	}); err != nil || st.probes.N != 1 {
		t.Fatalf("an honest sample: %v, %d probes; want none, 1", err, st.probes.N)
	}
	if !bytes.Equal(b.freshOut[0].Set(1), bytes.Repeat([]byte{7}, 64)) {
		t.Error("C's set 1 did not come back into its file")
	}
	err := sample(t, st, 1, 2, func(dev []byte) { dev[size+b.novelIn[1].Layout.Offset(0)] ^= 1 })
	if want := "input_written: B fresh byte 64 (device) (novel sample 1)"; err == nil || err.Error() != want {
		t.Errorf("B written on the device: %v, want %s", err, want)
	}
	if _, err := st.stage(2, 2); err != nil { // a sample the visit failed: never unstaged
		t.Fatal(err)
	}
	if err := st.close(); err != nil {
		t.Fatal(err)
	}
	if err := st.open(b); err != nil {
		t.Errorf("the next visit's open after a failed sample: %v", err)
	}

	busy, b2 := stagerOn(t, "FAKECUDA_LAUNCH_NS=600000")
	if err := busy.open(b2); err != nil {
		t.Fatal(err)
	}
	err = sample(t, busy, 0, 1, func(dev []byte) { dev[0] ^= 1 })
	if err == nil || !strings.HasPrefix(err.Error(), "gpu_busy: replay's empty kernel took ") || !strings.HasSuffix(err.Error(), "GPU work of the visit ran outside its samples") {
		t.Errorf("a busy GPU at the end of the span, and an input written: %v, want gpu_busy first", err)
	}
	if busy.probes.N != 1 || busy.probes.WorstNs < 600000 {
		t.Errorf("probes %+v, want the slow one counted", *busy.probes)
	}
}
