package replay

import (
	"fmt"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
)

// checkCPU refuses a replay when a built (case, route) needs CPU features
// (the build's requires_cpu, docs/protocol.md) that this machine's
// /proc/cpuinfo flags lack: such code would die of an illegal instruction
// or, worse, time a fallback path. flags is only read when some build
// requires a feature, and a failure to read it refuses the replay.
func checkCPU(doc artifacts.CaptureDoc, flags func() ([]string, error)) error {
	var have []string
	read := false
	var bad []string
	for _, c := range doc.Cases {
		for _, b := range c.Builds {
			if b.Status != artifacts.StatusBuilt || len(b.RequiresCPU) == 0 {
				continue
			}
			if !read {
				var err error
				if have, err = flags(); err != nil {
					return fmt.Errorf("replay: case %s route %s: built for CPU features %v, but this CPU's flags cannot be read: %w", c.Case.ID, b.Route, b.RequiresCPU, err)
				}
				read = true
			}
			var missing []string
			for _, f := range b.RequiresCPU {
				if !slices.Contains(have, f) && !slices.Contains(missing, f) {
					missing = append(missing, f)
				}
			}
			if len(missing) > 0 {
				bad = append(bad, fmt.Sprintf("case %s route %s: built for CPU features %v that this CPU lacks (%s flags)", c.Case.ID, b.Route, missing, artifacts.CPUInfoPath))
			}
		}
	}
	switch len(bad) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("replay: %s", bad[0])
	}
	return fmt.Errorf("replay: %s (and %d more builds)", bad[0], len(bad)-1)
}
