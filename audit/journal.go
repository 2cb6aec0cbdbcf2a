package audit

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/visit"
)

// journalCheck checks the journal.jsonl layer against the document.
func journalCheck(cp *checkpoint, f *facts) finding {
	var p []string
	lines := 0
	if b, err := readLayer(cp.rep, "journal.jsonl"); err != nil {
		p = append(p, err.Error())
	} else {
		ls, perr := parseJournal(b)
		lines = len(ls)
		p = append(perr, journalAgrees(ls, cp.rdoc)...)
	}
	return finding{problems: p, summary: fmt.Sprintf("%d journal.jsonl lines against the document's sessions, visits and closure checks", lines)}
}

// parseJournal reads journal.jsonl: one [artifacts.JournalLine] per line,
// each exactly one of a session, a visit or a closure check, each line
// whole (replay writes and syncs a line at a time; --resume drops a
// partial last one before it appends).
func parseJournal(b []byte) ([]artifacts.JournalLine, []string) {
	var out []artifacts.JournalLine
	var p []string
	for n := 1; len(b) > 0; n++ {
		line, rest, whole := bytes.Cut(b, []byte("\n"))
		b = rest
		if !whole {
			p = append(p, fmt.Sprintf("journal.jsonl:%d: no newline at its end: a partial line", n))
		}
		var l artifacts.JournalLine
		if err := strictJSON(line, &l); err != nil {
			p = append(p, fmt.Sprintf("journal.jsonl:%d: %v", n, err))
			continue
		}
		set := 0
		for _, x := range []bool{l.Session != nil, l.Visit != nil, l.Closure != nil} {
			if x {
				set++
			}
		}
		if set != 1 {
			p = append(p, fmt.Sprintf("journal.jsonl:%d: want exactly one of session, visit and closure, got %d", n, set))
			continue
		}
		out = append(out, l)
	}
	return out, p
}

// notRun is the reason of a planned visit that a failed binary closure
// check kept from running: it has no journal line.
const notRun = artifacts.NotRunClosure

// journalAgrees checks the journal (lines, in order) against the document
// it was finished into: the journal's sessions are the document's, in
// order, and so are its closure checks; the last journal line of each
// visit is the document's record of it, field for field; a visit the
// journal never saw is one a failed closure check kept from running
// (not_run), and there is none where every closure check passed.
func journalAgrees(lines []artifacts.JournalLine, d artifacts.ReplayDoc) []string {
	var p []string
	var sessions []artifacts.Session
	var closures []artifacts.ClosureCheck
	last, lineOf := map[int]artifacts.VisitResult{}, map[int]int{}
	for i, l := range lines {
		switch {
		case l.Session != nil:
			sessions = append(sessions, *l.Session)
		case l.Closure != nil:
			closures = append(closures, *l.Closure)
		case l.Visit != nil:
			last[l.Visit.Index], lineOf[l.Visit.Index] = *l.Visit, i+1
		}
	}
	if len(sessions) != len(d.Sessions) {
		p = append(p, fmt.Sprintf("journal.jsonl: %d sessions, the document %d", len(sessions), len(d.Sessions)))
	} else {
		for i := range sessions {
			if !reflect.DeepEqual(sessions[i], d.Sessions[i]) {
				p = append(p, fmt.Sprintf("session %d: the document's record differs from the journal's in %s", i, strings.Join(fieldDiff(d.Sessions[i], sessions[i]), ", ")))
			}
		}
	}
	if len(closures) != len(d.Closure) {
		p = append(p, fmt.Sprintf("journal.jsonl: %d closure checks, the document %d", len(closures), len(d.Closure)))
	} else {
		for i := range closures {
			if !reflect.DeepEqual(closures[i], d.Closure[i]) {
				p = append(p, fmt.Sprintf("closure check %d (round %d, %s): the document's record differs from the journal's in %s", i, d.Closure[i].Round+1, d.Closure[i].When, strings.Join(fieldDiff(d.Closure[i], closures[i]), ", ")))
			}
		}
	}
	failedClosure := slices.ContainsFunc(d.Closure, func(c artifacts.ClosureCheck) bool { return c.Status != artifacts.StatusPassed })
	inDoc := map[int]bool{}
	cudaError := map[string]bool{} // "visit N" of visits that failed with a CUDA error, so far
	for _, v := range d.Visits {
		inDoc[v.Index] = true
		if v.Reason == notRun && !failedClosure {
			p = append(p, fmt.Sprintf("visit %d: %s, yet every binary closure check passed", v.Index, v.Reason))
		}
		if after, ok := strings.CutPrefix(v.Reason, artifacts.NotRunGPU); ok {
			if which, _, _ := strings.Cut(after, ":"); !cudaError[which] {
				p = append(p, fmt.Sprintf("visit %d: %q, but no earlier %s failed with a CUDA error", v.Index, v.Reason, which))
			}
		}
		if visit.PoisonsGPU(v.Reason) {
			cudaError[fmt.Sprintf("visit %d", v.Index)] = true
		}
		j, ok := last[v.Index]
		switch {
		case !ok && v.Reason != notRun:
			p = append(p, fmt.Sprintf("visit %d: %s in the document, but no journal line records it: only a visit a failed closure check kept from running (not_run) has none", v.Index, v.Status))
		case ok && !reflect.DeepEqual(j, v):
			p = append(p, fmt.Sprintf("visit %d: the document's record differs from its last journal line (journal.jsonl:%d) in %s", v.Index, lineOf[v.Index], strings.Join(fieldDiff(v, j), ", ")))
		}
	}
	for _, idx := range slices.Sorted(maps.Keys(lineOf)) {
		if !inDoc[idx] {
			p = append(p, fmt.Sprintf("journal.jsonl:%d: visit %d is not in the document", lineOf[idx], idx))
		}
	}
	return p
}
