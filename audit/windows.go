package audit

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// timeWindowsCheck checks that verification came before timing and that every
// visit lies inside its round's closure checks and the replay's run.
func timeWindowsCheck(cp *checkpoint, f *facts) finding {
	var p []string
	capR, err1 := cp.cap.Receipt()
	prepR, err2 := cp.prep.Receipt()
	repR, err3 := cp.rep.Receipt()
	if err := errorsJoin(err1, err2, err3); err != nil {
		return finding{problems: []string{err.Error()}, summary: "could not read receipts"}
	}
	if prepR.Predicate.StartedOn.Before(capR.Predicate.FinishedOn) {
		p = append(p, "prepare started before capture finished")
	}
	if repR.Predicate.StartedOn.Before(prepR.Predicate.FinishedOn) {
		p = append(p, "replay started before prepare finished")
	}
	// Each replay session (the first run, then every --resume) re-hashed
	// what it consumed before timing; the receipt holds the last one's.
	sessions := cp.rdoc.Sessions
	var lastVerified time.Time
	for _, d := range repR.Predicate.ResolvedDependencies {
		if d.VerifiedAt.After(lastVerified) {
			lastVerified = d.VerifiedAt
		}
	}
	if len(sessions) == 0 {
		p = append(p, "replay records no sessions")
	} else if !sessions[len(sessions)-1].Verified.Equal(lastVerified) {
		p = append(p, fmt.Sprintf("last replay session verified at %s, the receipt's last verification is %s", sessions[len(sessions)-1].Verified.Format(time.RFC3339Nano), lastVerified.Format(time.RFC3339Nano)))
	}
	for i, s := range sessions {
		if s.Index != i || s.Verified.Before(s.Started) || (i > 0 && s.Started.Before(sessions[i-1].Verified)) {
			p = append(p, fmt.Sprintf("replay session %d: started %s, verified %s: out of order", i, s.Started.Format(time.RFC3339Nano), s.Verified.Format(time.RFC3339Nano)))
		}
	}
	before, after := map[int][]time.Time{}, map[int][]time.Time{}
	for _, c := range cp.rdoc.Closure {
		if c.When == "before" {
			before[c.Round] = append(before[c.Round], c.At)
		} else {
			after[c.Round] = append(after[c.Round], c.At)
		}
	}
	for _, v := range cp.rdoc.Visits {
		if v.Start.IsZero() {
			continue
		}
		if v.Session < 0 || v.Session >= len(sessions) {
			p = append(p, fmt.Sprintf("visit %d: session %d is not recorded", v.Index, v.Session))
		} else if v.Start.Before(sessions[v.Session].Verified) {
			p = append(p, fmt.Sprintf("visit %d started %s, before its session's verification finished %s", v.Index, v.Start.Format(time.RFC3339Nano), sessions[v.Session].Verified.Format(time.RFC3339Nano)))
		}
		if v.End.Before(v.Start) || v.End.After(repR.Predicate.FinishedOn) {
			p = append(p, fmt.Sprintf("visit %d: window %s..%s outside the replay's run", v.Index, v.Start, v.End))
		}
		if !slices.ContainsFunc(before[v.Round], func(t time.Time) bool { return !t.After(v.Start) }) {
			p = append(p, fmt.Sprintf("visit %d: no binary closure check of round %d before it", v.Index, v.Round+1))
		}
		if !slices.ContainsFunc(after[v.Round], func(t time.Time) bool { return !t.Before(v.End) }) {
			p = append(p, fmt.Sprintf("visit %d: no binary closure check of round %d after it", v.Index, v.Round+1))
		}
	}
	return finding{problems: p, summary: "verification before timing, every visit inside its round's closure checks and the replay's run"}
}

func errorsJoin(errs ...error) error {
	var s []string
	for _, e := range errs {
		if e != nil {
			s = append(s, e.Error())
		}
	}
	if len(s) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(s, "; "))
}
