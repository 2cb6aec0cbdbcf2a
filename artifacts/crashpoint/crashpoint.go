// Package crashpoint lets a test kill tilepipe at an exact point of its
// work, as kill -9 or a power cut would, to prove that every such point
// can be resumed or restarted.
//
// TILEPIPE_CRASH_AT=NAME:N makes the N-th call of Hit(NAME) (counting
// from 1) send SIGKILL to this process. Unset, Hit does nothing. The
// points are named where they are called: "plan" (the plan is written),
// "journal" (a journal line is synced), "finish" (every blob of the
// stage is stored, before the commit), "commit" (index.json is written,
// before the lock file is removed).
package crashpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var (
	once   sync.Once
	target string
	at     int
	mu     sync.Mutex
	counts = map[string]int{}
)

// Hit counts one pass through point name and kills this process when the
// environment asks for it there.
func Hit(name string) {
	once.Do(func() {
		v := os.Getenv("TILEPIPE_CRASH_AT")
		i := strings.LastIndexByte(v, ':')
		if i < 0 {
			return
		}
		n, err := strconv.Atoi(v[i+1:])
		if err != nil || n < 1 {
			return
		}
		target, at = v[:i], n
	})
	if target != name {
		return
	}
	mu.Lock()
	counts[name]++
	n := counts[name]
	mu.Unlock()
	if n == at {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL cannot be caught; wait for it to land
	}
}
