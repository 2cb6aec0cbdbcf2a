package visit

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestLeftoverStop: the timer a killed replay left running (recorded by
// pid and start time) is killed with its process group before a resumed
// replay times anything; a record whose pid now names another process
// (a different start time) kills nothing.
func TestLeftoverStop(t *testing.T) {
	start := func() *exec.Cmd {
		c := exec.Command("/bin/sh", "-c", "sleep 30 & sleep 30")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		go c.Wait() // reap it as init would
		t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL) })
		return c
	}
	c := start()
	time.Sleep(50 * time.Millisecond)
	p, _ := readProc(c.Process.Pid)
	l := Leftover{PID: c.Process.Pid, Start: p.start}

	other := Leftover{PID: l.PID, Start: l.Start + 1}
	if stopped, err := other.Stop(time.Second); stopped || err != nil {
		t.Errorf("Stop of a record whose pid names another process = %v, %v; want false, nil", stopped, err)
	}
	if syscall.Kill(-l.PID, 0) != nil {
		t.Fatal("Stop killed a process the record does not name")
	}
	stopped, err := l.Stop(5 * time.Second)
	if !stopped || err != nil {
		t.Fatalf("Stop = %v, %v; want true, nil", stopped, err)
	}
	if syscall.Kill(-l.PID, 0) == nil {
		t.Error("the leftover's process group is still there after Stop")
	}
	if stopped, err := l.Stop(time.Second); stopped || err != nil {
		t.Errorf("Stop of a gone process = %v, %v; want false, nil", stopped, err)
	}
}
