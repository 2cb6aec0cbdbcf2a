package audit

import (
	"fmt"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/visit"
)

// Row marks.
const (
	// MarkNoSandbox: the row's visits ran without a sandbox (--no-sandbox),
	// so the containment of docs/threat-model.md does not back it.
	MarkNoSandbox = "no-sandbox"
)

// Row is one (case, route) claim of the replay with the audit's marks.
type Row struct {
	Case   string   `json:"case"`
	Route  string   `json:"route"`
	Status string   `json:"status"`
	Marks  []string `json:"marks,omitempty"`
}

// containment re-checks what replay's own clock and accounting recorded
// (docs/threat-model.md): the sandbox every visit ran in, each passed
// visit's CPU time against its wall time and threads, each sample's span
// against the timer's own number, and the empty samples that measure the
// channel. It marks every row of a replay that ran without a sandbox.
func (a *auditor) containment() []Row {
	var p, w []string
	d := a.rdoc
	switch {
	case d.Config.NoSandbox && d.Sandbox != nil:
		p = append(p, "config.noSandbox is set, yet a sandbox is recorded")
	case !d.Config.NoSandbox && d.Sandbox == nil:
		p = append(p, "no sandbox recorded, and config.noSandbox is not set")
	case d.Config.NoSandbox:
		w = append(w, "replay ran without a sandbox (--no-sandbox): every row is marked "+MarkNoSandbox)
	}
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
		if v.Throttled != 0 {
			p = append(p, fmt.Sprintf("visit %d: passed, yet hit its CPU quota in %d periods", v.Index, v.Throttled))
		}
		rows, err := readRows(a.rep, v.Samples)
		if err != nil {
			p = append(p, fmt.Sprintf("visit %d samples: %v", v.Index, err))
			continue
		}
		if got := countKind(rows, visit.KindEmpty); got != d.Config.Samples {
			p = append(p, fmt.Sprintf("visit %d: %d empty samples (the channel's overhead), config says %d", v.Index, got, d.Config.Samples))
		}
		var ss []visit.Sample
		for _, r := range rows {
			s := visit.Sample{Kind: r.Kind, Index: int(r.Index), Calls: r.Calls, SpanNs: r.TotalNs, TimerNs: r.TimerNs}
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
	a.add("containment", p, w, fmt.Sprintf("sandbox record, CPU accounting and replay's clock against the timer's for %d passed visits; CPU limit: %s", checked, limit))
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
