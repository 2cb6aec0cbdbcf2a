// Command probe measures what a novel sample's freeze bracket is made of
// on a cgroup v1 machine (docs/results/2026-12-03-bracket): how long Go's
// sub-millisecond sleeps last, and what writing the v1 freezer's state
// costs with and without another cgroup kept FROZEN beside it. Run as
// root (it makes cgroups under /sys/fs/cgroup/freezer):
//
//	go run ./docs/results/2026-12-03-bracket/probe
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func median(xs []time.Duration) time.Duration {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func quantiles(xs []time.Duration) string {
	slices.Sort(xs)
	n := len(xs)
	return fmt.Sprintf("p10 %v p50 %v p90 %v", xs[n/10], xs[n/2], xs[9*n/10])
}

func main() {
	for _, d := range []time.Duration{10 * time.Microsecond, 50 * time.Microsecond, 200 * time.Microsecond} {
		var xs []time.Duration
		for range 200 {
			t := time.Now()
			time.Sleep(d)
			xs = append(xs, time.Since(t))
		}
		fmt.Printf("time.Sleep(%v): %s\n", d, quantiles(xs))
	}
	root := "/sys/fs/cgroup/freezer"
	visit := filepath.Join(root, fmt.Sprintf("probe-%d", os.Getpid()))
	keep := visit + "-keep"
	if err := os.Mkdir(visit, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.Remove(visit)
	// A process blocked in read, as a harness waiting for its next command.
	cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec cat`, visit)
	w, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	time.Sleep(100 * time.Millisecond)
	state := filepath.Join(visit, "freezer.state")
	cycle := func(label string) {
		var fw, seen, tw []time.Duration
		for range 300 {
			t := time.Now()
			os.WriteFile(state, []byte("FROZEN"), 0)
			fw = append(fw, time.Since(t))
			for {
				b, _ := os.ReadFile(state)
				if strings.TrimSpace(string(b)) == "FROZEN" {
					break
				}
			}
			seen = append(seen, time.Since(t))
			t = time.Now()
			os.WriteFile(state, []byte("THAWED"), 0)
			tw = append(tw, time.Since(t))
		}
		fmt.Printf("%s: write FROZEN %v, FROZEN read back %v, write THAWED %v (medians of 300)\n", label, median(fw), median(seen), median(tw))
	}
	cycle("freezer v1, alone")
	if err := os.Mkdir(keep, 0o755); err == nil {
		os.WriteFile(filepath.Join(keep, "freezer.state"), []byte("FROZEN"), 0)
		cycle("freezer v1, an empty sibling kept FROZEN")
		os.Remove(keep)
		// The kernel takes a removed cgroup offline (and drops its hold
		// on the key) a moment later, after an RCU grace period.
		time.Sleep(time.Second)
	}
	cycle("freezer v1, alone again")
	w.Close()
	cmd.Wait()
}
