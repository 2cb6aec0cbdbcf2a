// Package shard cuts a replay's plan into shards and puts the shards back
// together: which cases a shard times, and how a merged replay's lists
// follow from its shards' (docs/scale.md). Replay, merge and the audit
// all use it, as they use internal/plan.
//
// A shard is a set of cases, every visit of each: the cases whose place in
// the capture is I modulo N. So every paired ratio compares visits one
// machine made in one round, every shard's rounds use the balanced route
// orders of internal/plan as a whole replay's do, and an adaptive replay's
// stopping rule, which decides case by case, decides the same in a shard.
package shard

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
)

// MaxCount is the most shards a replay is cut into.
const MaxCount = 4096

// Parse reads --shard's I/N: 0 <= I < N <= MaxCount.
func Parse(s string) (artifacts.ShardSpec, error) {
	i, n, ok := strings.Cut(s, "/")
	a, err1 := strconv.Atoi(i)
	b, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || b < 1 || b > MaxCount || a < 0 || a >= b {
		return artifacts.ShardSpec{}, fmt.Errorf("--shard %q: want I/N, shard I (0 to N-1) of N (1 to %d)", s, MaxCount)
	}
	return artifacts.ShardSpec{Index: a, Count: b}, nil
}

// Cases is shard s's cases, in all's order: those whose index in all is
// s.Index modulo s.Count. A spec of no shards (Count 0) is all of them.
func Cases(all []string, s artifacts.ShardSpec) []string {
	if s.Count == 0 {
		return slices.Clone(all)
	}
	var out []string
	for i, c := range all {
		if i%s.Count == s.Index {
			out = append(out, c)
		}
	}
	return out
}

// Check refuses a spec that leaves a shard without cases: N above the
// cohort's cases.
func Check(s artifacts.ShardSpec, cases int) error {
	if s.Count > cases {
		return fmt.Errorf("--shard %s: the capture has %d cases, and a shard is a set of whole cases: want at most %d shards", s, cases, cases)
	}
	return nil
}

// Combined is what a merged replay's document holds of its shards.
type Combined struct {
	Plan     []artifacts.Visit
	Visits   []artifacts.VisitResult
	Sessions []artifacts.Session
	Closure  []artifacts.ClosureCheck
	Stops    []artifacts.CaseStop
	// Offsets are, per shard, where its visits and sessions begin.
	VisitOffset, SessionOffset []int
}

// Combine puts the shards' documents (docs[i] is shard i) one after
// another: visit and session indices renumbered from each shard's offset,
// everything else as the shard recorded it.
func Combine(docs []artifacts.ReplayDoc) Combined {
	var c Combined
	for _, d := range docs {
		vo, so := len(c.Plan), len(c.Sessions)
		c.VisitOffset, c.SessionOffset = append(c.VisitOffset, vo), append(c.SessionOffset, so)
		for _, v := range d.Plan {
			v.Index += vo
			c.Plan = append(c.Plan, v)
		}
		for _, v := range d.Visits {
			v.Index += vo
			v.Session += so
			c.Visits = append(c.Visits, v)
		}
		for _, s := range d.Sessions {
			s.Index += so
			c.Sessions = append(c.Sessions, s)
		}
		c.Closure = append(c.Closure, d.Closure...)
		c.Stops = append(c.Stops, d.Stops...)
	}
	return c
}

// Rows is one shard's sample rows with their visits renumbered from
// offset, as the merged sample table holds them.
func Rows(rows []samples.Row, offset int) []samples.Row {
	out := slices.Clone(rows)
	for i := range out {
		out[i].Visit += int32(offset)
	}
	return out
}

// Machine is what of a shard's machine decides whether its times compare
// with another shard's: CPU model, flags, cores and clock, GPU model,
// driver and clocks (from its receipt's environment fingerprint).
type Machine struct {
	Host      string
	CPUModel  string
	CPUFlags  []string
	CPUs      int
	CPUMHz    float64
	GPU       string
	GPUClocks string
}

// MachineOf reads a shard's machine from its receipt's fingerprint.
func MachineOf(e artifacts.Environment) Machine {
	return Machine{Host: e.Hostname, CPUModel: e.CPUModel, CPUFlags: e.CPUFlags, CPUs: e.CPUs, CPUMHz: e.CPUMHz, GPU: e.GPU, GPUClocks: e.GPUClocks}
}

// String names the machine for a row's mark and a table.
func (m Machine) String() string {
	s := fmt.Sprintf("%s: %s, %d cpus, %.0f MHz", m.Host, m.CPUModel, m.CPUs, m.CPUMHz)
	if m.GPU != "" {
		s += ", " + m.GPU
	}
	return s
}

// ClockTolerance is how far two machines' highest CPU clocks may differ
// (relative) and still compare: /proc/cpuinfo's MHz moves a little with
// frequency scaling on one machine.
const ClockTolerance = 0.02

// Differ lists how b differs from a in what makes their times comparable
// (none: comparable). Hosts may differ: that is what a cluster is.
func Differ(a, b Machine) []string {
	var d []string
	if a.CPUModel != b.CPUModel {
		d = append(d, fmt.Sprintf("CPU model %q, not %q", b.CPUModel, a.CPUModel))
	}
	if !slices.Equal(a.CPUFlags, b.CPUFlags) {
		var extra, missing []string
		for _, f := range b.CPUFlags {
			if !slices.Contains(a.CPUFlags, f) {
				extra = append(extra, f)
			}
		}
		for _, f := range a.CPUFlags {
			if !slices.Contains(b.CPUFlags, f) {
				missing = append(missing, f)
			}
		}
		d = append(d, fmt.Sprintf("CPU flags: has %v, lacks %v", extra, missing))
	}
	if a.CPUs != b.CPUs {
		d = append(d, fmt.Sprintf("%d cpus, not %d", b.CPUs, a.CPUs))
	}
	if a.CPUMHz > 0 && math.Abs(b.CPUMHz-a.CPUMHz) > ClockTolerance*a.CPUMHz || (a.CPUMHz == 0) != (b.CPUMHz == 0) {
		d = append(d, fmt.Sprintf("CPU clock %.0f MHz, not %.0f", b.CPUMHz, a.CPUMHz))
	}
	if a.GPU != b.GPU {
		d = append(d, fmt.Sprintf("GPU %q, not %q", b.GPU, a.GPU))
	}
	if a.GPUClocks != b.GPUClocks {
		d = append(d, fmt.Sprintf("GPU clocks %q, not %q", b.GPUClocks, a.GPUClocks))
	}
	return d
}

// Mixed compares every shard's machine with shard 0's and lists the
// differences, each naming its shard (none: every machine compares).
func Mixed(ms []Machine, specs []artifacts.ShardSpec) []string {
	var out []string
	for i := 1; i < len(ms); i++ {
		for _, d := range Differ(ms[0], ms[i]) {
			out = append(out, fmt.Sprintf("shard %s on %s: %s (shard %s ran on %s)", specs[i], ms[i].Host, d, specs[0], ms[0].Host))
		}
	}
	return out
}
