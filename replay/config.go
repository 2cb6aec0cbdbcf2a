package replay

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tilepipe/tilepipe/internal/plan"
	"github.com/tilepipe/tilepipe/oracle"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/cohort"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/internal/shard"
	"github.com/tilepipe/tilepipe/internal/visit"
)

// Limits of a replay (docs/limits.md gives the reason for each bound).
const (
	// MaxRounds bounds --rounds: a round draws its own input seeds and
	// re-hashes every closure before and after it.
	MaxRounds = 1000
	// MaxSamples and MaxSingles bound the samples of one visit, each a row
	// of the sample table.
	MaxSamples = 1000
	MaxSingles = 1000
	// MinSets and MaxSets bound the warm buffer sets a visit rotates over.
	MinSets, MaxSets = 2, 64
	// MinSampleMs and MaxSampleMs bound one batch sample's duration: below
	// MinSampleMs a sample is mostly the channel's round trip.
	MinSampleMs, MaxSampleMs float64 = 0.1, 60000
	MaxWarmupMs              float64 = 60000
	// MinTimeoutS and MaxTimeoutS bound the per-visit timeout, which covers
	// the whole visit: validation, warm-up, calibration, every sample and
	// the final report.
	MinTimeoutS, MaxTimeoutS float64 = 1, 86400
	// MaxThreads bounds the threads of a timed process; the compute floor
	// divides by them.
	MaxThreads = 1024
	// MaxVisits bounds the plan: rounds × prepared (case, route) pairs
	// (an adaptive replay's most rounds).
	MaxVisits = 100000
	// MinTargetPct and MaxTargetPct bound --target, the half-width of the
	// paired ratios' intervals an adaptive replay aims for, in percent of
	// the median; MinBudgetS and MaxBudgetS bound --budget-s, the visit
	// time a row may spend.
	MinTargetPct, MaxTargetPct float64 = cohort.MinTargetPct, cohort.MaxTargetPct
	MinBudgetS, MaxBudgetS     float64 = 1, 86400
	// MinTotalBudgetS and MaxTotalBudgetS bound --budget, the visit time
	// of the whole adaptive replay (0: none): a week, for a cluster's
	// shards.
	MinTotalBudgetS, MaxTotalBudgetS float64 = 1, 7 * 86400
)

// Validate checks every number of c that a flag sets against its range
// (docs/limits.md), before anything is read or written; the error names
// the flag, the range and the value given. Rounds 0 is the cohort's
// default. What depends on the prepared stage (the rounds that 0 resolves
// to, --baseline, the size of the plan) [Run] checks after reading the
// stage and before writing anything.
func (c Config) Validate() error {
	if c.Rounds < 0 || c.Rounds > MaxRounds {
		return fmt.Errorf("--rounds: want 1 to %d (or 0: the cohort's default), got %d", MaxRounds, c.Rounds)
	}
	for _, err := range []error{
		intIn("--samples", c.Samples, 1, MaxSamples),
		intIn("--singles", c.Singles, 0, MaxSingles),
		intIn("--sets", c.Sets, MinSets, MaxSets),
		floatIn("--sample-ms", c.SampleMs, MinSampleMs, MaxSampleMs),
		floatIn("--warmup-ms", c.WarmupMs, 0, MaxWarmupMs),
		floatIn("--timeout-s", c.TimeoutS, MinTimeoutS, MaxTimeoutS),
		intIn("--threads", c.Threads, 1, MaxThreads),
		intIn("--graph-batch", c.GraphBatch, 0, MaxGraphBatch),
	} {
		if err != nil {
			return err
		}
	}
	if c.Interval != artifacts.IntervalSign {
		return fmt.Errorf("interval %q: want %q: a new replay's intervals are exact", c.Interval, artifacts.IntervalSign)
	}
	if c.Target != 0 {
		for _, err := range []error{
			floatIn("--target", c.Target*100, MinTargetPct, MaxTargetPct),
			floatIn("--budget-s", c.BudgetS, MinBudgetS, MaxBudgetS),
		} {
			if err != nil {
				return err
			}
		}
		if c.TotalBudgetS != 0 {
			if err := floatIn("--budget (seconds)", c.TotalBudgetS, MinTotalBudgetS, MaxTotalBudgetS); err != nil {
				return err
			}
		}
	}
	if c.MaxRounds != 0 { // 0: DefaultMaxRounds, resolved with the rounds
		if err := intIn("--max-rounds", c.MaxRounds, max(c.Rounds, 1), MaxRounds); err != nil {
			return err
		}
	}
	if c.Load != artifacts.LoadExclude && c.Load != artifacts.LoadAllow {
		return fmt.Errorf("load %q: want %q (the default) or %q (--allow-load)", c.Load, artifacts.LoadExclude, artifacts.LoadAllow)
	}
	if c.NovelRule != int(sets.CurrentRule) {
		return fmt.Errorf("novelRule %d: replay times by rule %d", c.NovelRule, sets.CurrentRule)
	}
	if c.FreshMin != 0 && c.FreshMin != sets.MinFresh {
		return fmt.Errorf("freshMin %d: want %d (or 0 in a replay made before it)", c.FreshMin, sets.MinFresh)
	}
	if c.Pin != "" && c.Pin != artifacts.PinThreads {
		return fmt.Errorf("pin %q: want %q (or absent in a replay made before it)", c.Pin, artifacts.PinThreads)
	}
	if s := c.Shard; s != (artifacts.ShardSpec{}) && (s.Count < 1 || s.Count > shard.MaxCount || s.Index < 0 || s.Index >= s.Count) {
		return fmt.Errorf("--shard %s: want I/N, shard I (0 to N-1) of N (1 to %d)", s, shard.MaxCount)
	}
	if c.L2 != artifacts.L2Warm && c.L2 != artifacts.L2Flush {
		return fmt.Errorf("--l2: want %s or %s, got %q", artifacts.L2Warm, artifacts.L2Flush, c.L2)
	}
	return nil
}

// MaxGraphBatch is the most calls a CUDA graph of graph samples holds.
const MaxGraphBatch = 10000

func intIn(flag string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s: want %d to %d, got %d", flag, lo, hi, v)
	}
	return nil
}

// floatIn refuses NaN too.
func floatIn(flag string, v, lo, hi float64) error {
	if !(v >= lo && v <= hi) {
		return fmt.Errorf("%s: want %g to %g, got %g", flag, lo, hi, v)
	}
	return nil
}

// checkConfig checks r.cfg, its rounds resolved (the cohort's, else
// [DefaultRounds]), against its ranges and the prepared stage, before
// anything is written: --baseline must be a captured route and the plan at
// most [MaxVisits] visits.
func (r *replayer) checkConfig(routes []string) error {
	c := r.cfg
	if c.Rounds == r.cdoc.Rounds && (c.Rounds < 0 || c.Rounds > MaxRounds) {
		// A capture made before cohorts were bounded.
		return fmt.Errorf("cohort %s: rounds: want 1 to %d, got %d (the capture's cohort default; give --rounds)", r.cdoc.Cohort, MaxRounds, c.Rounds)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	pairs := 0
	for _, e := range r.entries {
		if e.Status == artifacts.StatusPrepared && slices.Contains(routes, e.Route) {
			pairs++
		}
	}
	if n := c.PlannedRounds() * pairs; n > MaxVisits {
		return fmt.Errorf("plan: %d rounds x %d prepared (case, route) pairs = %d visits, limit %d (give fewer --rounds or --max-rounds, cases or routes)", c.PlannedRounds(), pairs, n, MaxVisits)
	}
	// A visit keeps its outputs as one tensor per output and pool, the
	// warm sets stacked in one, the judged novel calls in the other (at
	// most --samples times visit.ChecksPerSample of the slots): more than
	// a tensor file holds fails before any timing.
	for _, id := range slices.Sorted(maps.Keys(r.cases)) {
		cc := r.cases[id]
		slots := sets.CurrentRule.Slots(cc.Case.DeviceOf(), cc.Signature)
		judged := int64(c.Samples) * visit.ChecksPerSample(c.Samples, int64(slots), sets.CurrentRule.Checks(cc.Case, cc.Signature))
		for _, p := range cc.Signature {
			if p.Role != oracle.RoleOutput {
				continue
			}
			switch n := int64(p.Elems()); {
			case int64(c.Sets)*n > tensor.MaxElems:
				return fmt.Errorf("case %s: output %s of %d elements in %d buffer sets is more than a tensor file holds (%d elements): give fewer --sets", id, p.Name, n, c.Sets, int64(tensor.MaxElems))
			case judged*n > tensor.MaxElems:
				return fmt.Errorf("case %s: output %s of %d elements in %d judged novel calls is more than a tensor file holds (%d elements): give fewer --samples", id, p.Name, n, judged, int64(tensor.MaxElems))
			}
		}
	}
	if c.Baseline != "" && !slices.Contains(routes, c.Baseline) {
		return fmt.Errorf("--baseline %q: not one of the captured routes %v", c.Baseline, routes)
	}
	if n := len(plan.Orders(len(routes))); c.Rounds%n != 0 {
		r.cfg.Progress.Printf("warning: %d rounds is not a multiple of the %d balanced orders: this run is a screen, not a balanced comparison", c.Rounds, n)
	}
	return nil
}
