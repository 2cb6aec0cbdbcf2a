package audit

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
)

// journaled is a replay document of one session, one round of two
// visits between two closure checks, and the journal replay wrote for it.
func journaled() (artifacts.ReplayDoc, []artifacts.JournalLine) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	d := planned()
	d.Sessions = []artifacts.Session{{Index: 0, Started: t0, Verified: t0.Add(time.Second), ColdBandwidth: 1e10, ClockHz: 3e9}}
	d.Closure = []artifacts.ClosureCheck{{Round: 0, When: "before", At: t0.Add(2 * time.Second), Files: 3, Status: artifacts.StatusPassed},
		{Round: 0, When: "after", At: t0.Add(9 * time.Second), Files: 3, Status: artifacts.StatusPassed}}
	d.Visits = []artifacts.VisitResult{
		{Visit: d.Plan[0], Status: artifacts.StatusPassed, CallsPerSample: 64, Threads: 2, Sets: 2, MaxErrRatio: 0.5, CPUNs: 1e6, WallNs: 2e6, Start: t0.Add(3 * time.Second), End: t0.Add(4 * time.Second)},
		{Visit: d.Plan[1], Status: artifacts.StatusFailed, Reason: "timed_out: after 1s", Threads: 2, Start: t0.Add(5 * time.Second), End: t0.Add(6 * time.Second)},
	}
	lines := []artifacts.JournalLine{{Session: &d.Sessions[0]}, {Closure: &d.Closure[0]}, {Visit: &d.Visits[0]}, {Visit: &d.Visits[1]}, {Closure: &d.Closure[1]}}
	// What the audit reads went through JSON, as the document did.
	var out []artifacts.JournalLine
	for _, l := range lines {
		b, _ := json.Marshal(l)
		var back artifacts.JournalLine
		json.Unmarshal(b, &back)
		out = append(out, back)
	}
	return d, out
}

func TestJournalAgrees(t *testing.T) {
	tests := []struct {
		name string
		edit func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine
		want []string
	}{
		{"as written", nil, nil},
		{"a visit's number", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			d.Visits[0].CallsPerSample, d.Visits[0].CPUNs = 128, 1
			return lines
		}, []string{"visit 0: the document's record differs from its last journal line (journal.jsonl:3) in callsPerSample, cpuNs"}},
		{"a failed visit passed", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			d.Visits[1].Status, d.Visits[1].Reason = artifacts.StatusPassed, ""
			return lines
		}, []string{"visit 1: the document's record differs from its last journal line (journal.jsonl:4) in status, reason"}},
		{"the last line of a visit counts", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			first := *lines[2].Visit
			first.CPUNs = 5
			return append([]artifacts.JournalLine{{Visit: &first}}, lines...)
		}, nil},
		{"a visit never journaled", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			return append(lines[:3:3], lines[4])
		}, []string{"visit 1: failed in the document, but no journal line records it: only a visit a failed closure check kept from running (not_run) has none"}},
		{"a journaled visit not in the document", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			extra := *lines[2].Visit
			extra.Index = 7
			return append(lines, artifacts.JournalLine{Visit: &extra})
		}, []string{"journal.jsonl:6: visit 7 is not in the document"}},
		{"not run after a failed closure check", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			d.Closure[1].Status, d.Closure[1].Reason = artifacts.StatusFailed, "changed"
			lines[4].Closure.Status, lines[4].Closure.Reason = artifacts.StatusFailed, "changed"
			d.Visits[1] = artifacts.VisitResult{Visit: d.Plan[1], Status: artifacts.StatusFailed, Reason: "not_run: replay stopped after a binary closure check failed"}
			return lines[:3]
		}, []string{"journal.jsonl: 1 closure checks, the document 2"}},
		{"not run with every closure check passed", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			d.Visits[1] = artifacts.VisitResult{Visit: d.Plan[1], Status: artifacts.StatusFailed, Reason: "not_run: replay stopped after a binary closure check failed"}
			return append(lines[:3:3], lines[4])
		}, []string{"visit 1: not_run: replay stopped after a binary closure check failed, yet every binary closure check passed"}},
		// A GPU that failed its health check: later GPU visits are not run,
		// journaled, and name the visit whose CUDA error came first.
		{"not run after a CUDA error", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			d.Visits[0].Status, d.Visits[0].Reason = artifacts.StatusFailed, "cuda_error: cuLaunchKernel: CUDA error 700: an illegal memory access was encountered"
			d.Visits[1].Reason = artifacts.NotRunGPU + "visit 0: --health: exit status 2: harness: error: cuda_error: cuInit: CUDA error 999: unknown error"
			*lines[2].Visit, *lines[3].Visit = d.Visits[0], d.Visits[1]
			return lines
		}, nil},
		{"not run without a CUDA error", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			d.Visits[1].Reason = artifacts.NotRunGPU + "visit 0: --health: exit status 2"
			*lines[3].Visit = d.Visits[1]
			return lines
		}, []string{`visit 1: "not_run: the GPU failed its health check after the CUDA error of visit 0: --health: exit status 2", but no earlier visit 0 failed with a CUDA error`}},
		{"a session", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			d.Sessions[0].ClockHz = 6e9
			return lines
		}, []string{"session 0: the document's record differs from the journal's in clockHz"}},
		{"a session dropped", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine { return lines[1:] },
			[]string{"journal.jsonl: 0 sessions, the document 1"}},
		{"a closure check", func(d *artifacts.ReplayDoc, lines []artifacts.JournalLine) []artifacts.JournalLine {
			d.Closure[0].Files = 2
			return lines
		}, []string{"closure check 0 (round 1, before): the document's record differs from the journal's in files"}},
	}
	for _, tt := range tests {
		d, lines := journaled()
		if tt.edit != nil {
			lines = tt.edit(&d, lines)
		}
		if got := journalAgrees(lines, d); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("journalAgrees(%s) =\n%q\nwant\n%q", tt.name, got, tt.want)
		}
	}
}

func TestParseJournal(t *testing.T) {
	d, lines := journaled()
	var b strings.Builder
	for _, l := range lines {
		j, _ := json.Marshal(l)
		b.Write(append(j, '\n'))
	}
	got, p := parseJournal([]byte(b.String()))
	if p != nil || journalAgrees(got, d) != nil {
		t.Errorf("parseJournal(as written) = %d lines, %q; disagrees: %q", len(got), p, journalAgrees(got, d))
	}
	tests := []struct {
		name, in string
		want     []string
	}{
		{"a partial last line", b.String() + `{"visit": {"index"`, []string{"journal.jsonl:6: no newline at its end: a partial line", "journal.jsonl:6: unexpected EOF"}},
		{"two kinds on a line", `{"session": {"index": 0}, "closure": {"round": 0}}` + "\n", []string{"journal.jsonl:1: want exactly one of session, visit and closure, got 2"}},
		{"an empty line", "{}\n", []string{"journal.jsonl:1: want exactly one of session, visit and closure, got 0"}},
		{"an unknown field", `{"visit": {"index": 0, "bonus": 1}}` + "\n", []string{`journal.jsonl:1: json: unknown field "bonus"`}},
	}
	for _, tt := range tests {
		if _, p := parseJournal([]byte(tt.in)); !reflect.DeepEqual(p, tt.want) {
			t.Errorf("parseJournal(%s) = %q, want %q", tt.name, p, tt.want)
		}
	}
}
