package audit

import (
	"fmt"
	"slices"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/affinity"
	"github.com/tilepipe/tilepipe/internal/load"
	"github.com/tilepipe/tilepipe/internal/visit"
)

// Row marks.
const (
	// MarkNoSandbox: the row's visits ran without a sandbox (--no-sandbox),
	// so the containment of docs/threat-model.md does not back it.
	MarkNoSandbox = "no-sandbox"
)

// Row is one (case, route) claim of the replay with the audit's marks.
// Supported: the checkpoint is intact, every visit of the row passed every
// check, no visit of its baseline row failed, and it ran in a sandbox; Why
// says otherwise. Ratio, against the baseline, only for a supported row
// whose baseline was timed.
type Row struct {
	Case      string    `json:"case"`
	Route     string    `json:"route"`
	Status    string    `json:"status"`
	Marks     []string  `json:"marks,omitempty"`
	Supported bool      `json:"supported"`
	Why       string    `json:"why,omitempty"`
	Ratio     *RowRatio `json:"ratio,omitempty"`
}

// Pair is the row's (case, route).
func (r Row) Pair() artifacts.Pair { return artifacts.Pair{Case: r.Case, Route: r.Route} }

// RowRatio is a supported row's paired ratio against the baseline.
type RowRatio struct {
	Baseline string  `json:"baseline"`
	Median   float64 `json:"median"`
	Lo       float64 `json:"lo"`
	Hi       float64 `json:"hi"`
	Verdict  string  `json:"verdict"`
}

// claims decides, row by row, whether the audit supports the row's claim.
func claims(d artifacts.ReplayDoc, rep *Report) {
	status := map[artifacts.Pair]artifacts.Summary{}
	for _, s := range d.Summary {
		status[s.Pair()] = s
	}
	base := d.Config.Baseline
	for i := range rep.Rows {
		r := &rep.Rows[i]
		s := status[r.Pair()]
		b, hasBase := status[artifacts.Pair{Case: r.Case, Route: base}]
		switch {
		case rep.Integrity != "intact":
			r.Why = "the checkpoint is not intact"
		case s.Status != artifacts.StatusPassed:
			r.Why = s.Reason
		case slices.Contains(r.Marks, MarkNoSandbox):
			r.Why = "timed without a sandbox"
		case r.Route != base && hasBase && b.Status == artifacts.StatusFailed:
			r.Why = "its baseline " + base + " failed: " + b.Reason
		default:
			// Its own time is supported; a ratio only where the baseline
			// was timed too (a route may not support a case at all).
			r.Supported = true
			if s.RatioPairs > 0 {
				r.Ratio = &RowRatio{Baseline: base, Median: s.Ratio, Lo: s.RatioLo, Hi: s.RatioHi, Verdict: s.Verdict}
			} else if r.Route != base && hasBase {
				r.Why = "no ratio: " + base + " was not timed (" + b.Status + ")"
			}
		}
		if r.Supported {
			rep.Claims.Supported++
		} else {
			rep.Claims.Unsupported++
		}
	}
}

// containmentCheck re-checks what replay's own clock and accounting recorded
// (docs/threat-model.md): the sandbox every visit ran in, each passed
// visit's CPU time against its wall time and threads, each sample's span
// against the timer's own number, and the empty samples that measure the
// channel. (rowsOf marks every row of a replay that ran without a
// sandbox.)
func containmentCheck(cp *checkpoint, f *facts) finding {
	var p, w []string
	d := cp.rdoc
	switch {
	case d.Config.NoSandbox && d.Sandbox != nil:
		p = append(p, "config.noSandbox is set, yet a sandbox is recorded")
	case !d.Config.NoSandbox && d.Sandbox == nil:
		p = append(p, "no sandbox recorded, and config.noSandbox is not set")
	case d.Config.NoSandbox:
		w = append(w, "replay ran without a sandbox (--no-sandbox): every row is marked "+MarkNoSandbox)
	}
	p = append(p, coresOf(d)...)
	checked := 0
	for _, v := range d.Visits {
		if v.Status != artifacts.StatusPassed {
			continue
		}
		checked++
		if d.Sandbox != nil && (len(v.Argv) == 0 || v.Argv[0] != d.Sandbox.Program) {
			p = append(p, fmt.Sprintf("visit %d: argv does not start with the recorded sandbox %s", v.Index, d.Sandbox.Program))
		}
		wall, cpu := time.Duration(v.WallNs), time.Duration(v.CPUNs)
		limit := time.Duration(float64(wall)*float64(v.Threads)*visit.CPUFactor) + visit.CPUSlack
		if wall <= 0 || cpu < 0 || cpu > limit {
			p = append(p, fmt.Sprintf("visit %d: %d ns of CPU in %d ns of wall time with %d threads (limit %d ns)", v.Index, v.CPUNs, v.WallNs, v.Threads, limit.Nanoseconds()))
		}
		if l := v.Load; l != nil && (l.OtherNs < 0 || l.StealNs < 0 || l.Loaded != load.Loaded(l.OtherNs, l.StealNs, v.WallNs)) {
			p = append(p, fmt.Sprintf("visit %d: load other %d ns steal %d ns in %d ns: loaded %v, its numbers give %v", v.Index, l.OtherNs, l.StealNs, v.WallNs, l.Loaded, load.Loaded(l.OtherNs, l.StealNs, v.WallNs)))
		}
		if v.Throttled != 0 {
			p = append(p, fmt.Sprintf("visit %d: passed, yet hit its CPU quota in %d periods", v.Index, v.Throttled))
		}
		rows, err := readRows(cp.rep, v.Samples)
		if err != nil {
			p = append(p, fmt.Sprintf("visit %d samples: %v", v.Index, err))
			continue
		}
		if got := countKind(rows, samples.KindEmpty); got != d.Config.Samples {
			p = append(p, fmt.Sprintf("visit %d: %d empty samples (the channel's overhead), config says %d", v.Index, got, d.Config.Samples))
		}
		var ss []visit.Sample
		for _, r := range rows {
			s := visit.Sample{Kind: r.Kind, Index: int(r.Index), Calls: r.Calls, SpanNs: r.TotalNs, TimerNs: r.TimerNs, Clock: r.Clock}
			if err := visit.CheckClock(s); err != nil {
				p = append(p, fmt.Sprintf("visit %d: %v", v.Index, err))
			}
			ss = append(ss, s)
		}
		if err := visit.CheckGap(ss); err != nil {
			p = append(p, fmt.Sprintf("visit %d: %v", v.Index, err))
		}
	}
	limit := d.CPULimit
	if limit == "" {
		limit = "not recorded"
	}
	return finding{problems: p, warnings: w, summary: fmt.Sprintf("sandbox record, CPU accounting and replay's clock against the timer's for %d passed visits; CPU limit: %s", checked, limit)}
}

// rowsOf is one row per summary of the replay, for the claims table; every
// row of a replay that ran without a sandbox is marked MarkNoSandbox.
func rowsOf(d artifacts.ReplayDoc) []Row {
	var out []Row
	for _, s := range d.Summary {
		r := Row{Case: s.Case, Route: s.Route, Status: s.Status}
		if d.Config.NoSandbox || d.Sandbox == nil {
			r.Marks = append(r.Marks, MarkNoSandbox)
		}
		out = append(out, r)
	}
	return out
}

// coresOf checks each session's split of the cores (internal/affinity)
// against the rule that makes it, and each passed visit's mask, read back
// as it started, against its session's share for visits: a visit that
// ran on replay's cores, or a split that claims to keep replay off cores
// it shared, is named.
func coresOf(d artifacts.ReplayDoc) []string {
	var p []string
	for _, s := range d.Sessions {
		c := s.Cores
		if c == nil {
			continue
		}
		all := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(c.Visit), c.Replay...))))
		want := affinity.Choose(all, d.Config.Threads)
		if !slices.Equal(c.Visit, want.Visit) || !slices.Equal(c.Replay, want.Replay) || c.Shared != want.Shared || c.Why != want.Why {
			p = append(p, fmt.Sprintf("session %d: cores %+v, the rule gives %+v for cores %s and %d threads", s.Index, *c, want, affinity.List(all), d.Config.Threads))
		}
	}
	for _, v := range d.Visits {
		if v.Status != artifacts.StatusPassed || v.Cores == nil || v.Session < 0 || v.Session >= len(d.Sessions) || d.Sessions[v.Session].Cores == nil {
			continue
		}
		c := d.Sessions[v.Session].Cores
		if !c.Shared && !slices.Equal(v.Cores, c.Visit) {
			p = append(p, fmt.Sprintf("visit %d: ran on cores %s, its session's visits were to run on %s (replay on %s)", v.Index, affinity.List(v.Cores), affinity.List(c.Visit), affinity.List(c.Replay)))
		}
	}
	return append(p, pinsOf(d)...)
}

// pinsOf checks, in a replay that pins threads (config.pin), that every
// passed visit read its threads back and that each of them was on one
// core of the visit's mask; a replay with another rule is named.
func pinsOf(d artifacts.ReplayDoc) []string {
	switch d.Config.Pin {
	case "":
		return nil // made before threads were pinned
	case artifacts.PinThreads:
	default:
		return []string{fmt.Sprintf("config.pin %q: want %q (or absent, in a replay made before it)", d.Config.Pin, artifacts.PinThreads)}
	}
	var p []string
	for _, v := range d.Visits {
		if v.Status != artifacts.StatusPassed {
			continue
		}
		if len(v.Pins) == 0 {
			p = append(p, fmt.Sprintf("visit %d: no thread read back, though config.pin is %q", v.Index, d.Config.Pin))
			continue
		}
	pins:
		for _, t := range v.Pins {
			for i, core := range t.Cores {
				if !slices.Contains(v.Cores, core) {
					p = append(p, fmt.Sprintf("visit %d: thread %d of %s on core %d, not one of the visit's cores %s", v.Index, i, t.Comm, core, affinity.List(v.Cores)))
					break pins
				}
			}
		}
	}
	return p
}
