package visit

import (
	"testing"
	"time"
)

// TestCalibratePreempted: a kernel of 25 ns a call behind a 20 µs channel,
// calibrated to 1 ms. One sample preempted for 2 ms must not end the
// doubling at a handful of calls (the old rule stopped at 2); an honest
// visit calibrates to the same calls with the retake rule or without it,
// and a sample preempted at the last step does not cost a retake that
// changes the answer.
func TestCalibratePreempted(t *testing.T) {
	const target = time.Millisecond
	kernel := func(n int64) time.Duration { return 20*time.Microsecond + time.Duration(n)*25*time.Nanosecond }
	run := func(preemptAt int64) (int64, int) {
		takes, preempted := 0, false
		n, err := CalibrateCalls(func(n int64) (time.Duration, error) {
			takes++
			d := kernel(n)
			if n == preemptAt && !preempted {
				preempted = true
				d += 2 * time.Millisecond
			}
			return d, nil
		}, target, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		return n, takes
	}
	honest, honestTakes := run(0)
	if want := int64(65536); honest != want { // 20 µs + 65536·25 ns ≥ 1 ms, 32768 calls are not
		t.Fatalf("honest calibration: %d calls, want %d", honest, want)
	}
	for _, at := range []int64{1, 2, 8, 1024} {
		if n, takes := run(at); n != honest || takes != honestTakes+1 {
			t.Errorf("preempted at %d calls: calibrated to %d calls in %d samples, want %d (the honest answer) in %d", at, n, takes, honest, honestTakes+1)
		}
	}
	if n, _ := CalibrateCalls(func(n int64) (time.Duration, error) { return kernel(n), nil }, target, 8); n != 8 {
		t.Errorf("max calls 8: calibrated to %d", n)
	}
}
