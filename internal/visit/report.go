package visit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Report types a timer writes on fd 4.
const (
	TypeValidated = "validated"
	TypeSample    = "sample"
	TypeFinal     = "final"
	// TypeFault: the C harness caught a write to an input or into a guard
	// reservation; it may arrive instead of any other report.
	TypeFault = "fault"
)

// FaultReasons are the prefixes a fault report's reason may have.
var FaultReasons = []string{"input_written: ", "guard_fault: "}

// Report is one line a timer writes on fd 4 (docs/protocol.md).
type Report struct {
	Type         string            `json:"type"`
	Status       string            `json:"status,omitempty"`
	Reason       string            `json:"reason,omitempty"`
	Checks       map[string]string `json:"checks,omitempty"`
	Threads      int               `json:"threads,omitempty"`
	OutputPolicy string            `json:"output_policy,omitempty"`
	Seq          int64             `json:"seq,omitempty"`
	Calls        int64             `json:"calls,omitempty"`
	Ns           int64             `json:"ns,omitempty"`
	// ColdNs (validated) is the visit's first call timed on its own: the
	// one that pays any lazy initialisation (docs/protocol.md).
	ColdNs int64 `json:"cold_ns,omitempty"`
}

// keys are the exact keys of each report type: a report with a key more
// or less is unexpected, so a timer cannot add a field that replay would
// silently ignore.
var keys = map[string][]string{
	TypeValidated: {"checks", "cold_ns", "output_policy", "reason", "status", "threads", "type"},
	TypeSample:    {"calls", "ns", "seq", "type"},
	TypeFinal:     {"checks", "reason", "status", "type"},
	TypeFault:     {"reason", "type"},
}

// Checks are the four check names every validated and final report lists.
var Checks = []string{"guards", "poison", "inputs", "repeat"}

var checkStates = []string{"pass", "fail", "not_run"}

// ParseReport decodes one report line strictly: one JSON object, exactly
// the keys of its type, known check names and states.
func ParseReport(line []byte) (Report, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&raw); err != nil {
		return Report{}, fmt.Errorf("want one JSON object: %v", err)
	}
	if dec.More() {
		return Report{}, fmt.Errorf("more than one JSON value on a line")
	}
	var r Report
	if err := json.Unmarshal(raw["type"], &r.Type); err != nil {
		return Report{}, fmt.Errorf("type: want a string")
	}
	want, ok := keys[r.Type]
	if !ok {
		return Report{}, fmt.Errorf("type %q: want validated, sample, final or fault", r.Type)
	}
	got := make([]string, 0, len(raw))
	for k := range raw {
		got = append(got, k)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		return Report{}, fmt.Errorf("%s report keys %v, want %v", r.Type, got, want)
	}
	strict := json.NewDecoder(bytes.NewReader(line))
	strict.DisallowUnknownFields()
	if err := strict.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("%s report: %v", r.Type, err)
	}
	if r.Type == TypeSample {
		return r, nil
	}
	if r.Type == TypeFault {
		if !slices.ContainsFunc(FaultReasons, func(p string) bool { return strings.HasPrefix(r.Reason, p) && len(r.Reason) > len(p) }) {
			return Report{}, fmt.Errorf("fault report reason %q: want one starting with one of %q", r.Reason, FaultReasons)
		}
		return r, nil
	}
	if r.ColdNs < 0 {
		return Report{}, fmt.Errorf("%s report cold_ns %d: want >= 0", r.Type, r.ColdNs)
	}
	if r.Status != "ok" && r.Status != "failed" {
		return Report{}, fmt.Errorf("%s report status %q: want ok or failed", r.Type, r.Status)
	}
	if r.Status == "failed" && r.Reason == "" {
		return Report{}, fmt.Errorf("%s report: status failed without a reason", r.Type)
	}
	for k, v := range r.Checks {
		if !slices.Contains(Checks, k) || !slices.Contains(checkStates, v) {
			return Report{}, fmt.Errorf("%s report checks[%q] = %q: want one of %v with one of %v", r.Type, k, v, Checks, checkStates)
		}
	}
	if len(r.Checks) != len(Checks) {
		return Report{}, fmt.Errorf("%s report checks: want all of %v", r.Type, Checks)
	}
	return r, nil
}
