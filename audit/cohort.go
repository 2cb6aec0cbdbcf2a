package audit

import (
	"encoding/json"
	"fmt"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/cohort"
)

// cohortCheck checks the capture's cohort.json layer against its document.
func cohortCheck(cp *checkpoint, f *facts) finding {
	var p []string
	if b, err := readLayer(cp.cap, "cohort.json"); err != nil {
		p = append(p, err.Error())
	} else {
		p = cohortAgrees(b, cp.cdoc)
	}
	return finding{problems: p, summary: fmt.Sprintf("cohort.json parsed again: its name, rounds, target and %d cases are the capture document's", len(cp.cdoc.Cases))}
}

// cohortAgrees parses the cohort as capture was given it (b), by the
// cohort rules the capture recorded, and compares
// it with the capture document: the cohort's name, rounds and target, and every
// case, field for field and in order (the JSON of each, so an absent map
// and an empty one are the same, as they are on disk).
func cohortAgrees(b []byte, d artifacts.CaptureDoc) []string {
	rules, err := cohort.RulesOf(d.CohortRules)
	if err != nil {
		return []string{err.Error()}
	}
	co, err := cohort.ParseRules("cohort.json", b, rules)
	if err != nil {
		return []string{err.Error()}
	}
	var p []string
	if co.Name != d.Cohort {
		p = append(p, fmt.Sprintf("cohort.json name %q, the capture document %q", co.Name, d.Cohort))
	}
	if co.Rounds != d.Rounds {
		p = append(p, fmt.Sprintf("cohort.json rounds %d, the capture document %d", co.Rounds, d.Rounds))
	}
	if show := func(t *float64) string {
		if t == nil {
			return "absent"
		}
		return fmt.Sprint(*t)
	}; show(co.Target) != show(d.Target) {
		p = append(p, fmt.Sprintf("cohort.json target %s, the capture document %s", show(co.Target), show(d.Target)))
	}
	if len(co.Cases) != len(d.Cases) {
		return append(p, fmt.Sprintf("cohort.json has %d cases, the capture document %d", len(co.Cases), len(d.Cases)))
	}
	for i, c := range co.Cases {
		got, _ := json.Marshal(c)
		want, _ := json.Marshal(d.Cases[i].Case)
		if string(got) != string(want) {
			p = append(p, fmt.Sprintf("case %d: cohort.json has %s, the capture document %s", i, got, want))
		}
	}
	return p
}
