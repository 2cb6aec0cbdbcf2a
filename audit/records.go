package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/record"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/oracle"
)

// recordsCheck checks what the replay recorded in more than one place: its
// configuration and plan in the document, in plan.json and (the
// configuration) in the receipt; every passed visit's record against its
// own sample table; and the batch samples against config.sampleMs
// (internal/record).
func recordsCheck(cp *checkpoint, f *facts) finding {
	var p []string
	if b, err := readLayer(cp.rep, "plan.json"); err != nil {
		p = append(p, err.Error())
	} else {
		p = append(p, planAgrees(b, cp.rdoc)...)
	}
	if b, err := cp.rep.Statement(); err != nil {
		p = append(p, err.Error())
	} else {
		p = append(p, receiptConfigAgrees(b, cp.rdoc.Config)...)
	}
	visits, rows, unread := f.passedRows()
	p = append(p, unread...)
	rule, err := sets.RuleOf(cp.rdoc.Config.NovelRule)
	if err != nil {
		p = append(p, err.Error())
		visits = nil // no rule to hold them to
	}
	for i, v := range visits {
		device, limit := oracle.DeviceCPU, int64(sets.NovelChecks)
		if c := cp.capturedCase(v.Case); c != nil { // a case not captured is the outputs check's
			device, limit = c.Case.DeviceOf(), rule.Checks(c.Case, c.Signature)
		}
		own := "" // an entry the stage does not have fails elsewhere
		if e := cp.entry(v.Case, v.Route); e != nil {
			own = e.OwnGraphs
		}
		p = append(p, record.Visit(v, rows[i], cp.rdoc.Config, device, own, limit)...)
	}
	// Calibration is judged on timings, which a loaded machine bends:
	// an honest replay under a parallel make test missed it. A warning,
	// not a failure (docs/threat-model.md).
	w := record.Calibration(cp.rdoc.Config, visits, rows)
	return finding{problems: p, warnings: w, summary: fmt.Sprintf("configuration and plan in the document, plan.json and the receipt; %d passed visits' records against their sample tables; batch samples against sampleMs %g ms (warmupMs leaves no trace)",
		len(visits), cp.rdoc.Config.SampleMs)}
}

// planAgrees compares plan.json (b, an [artifacts.PlanRecord], written
// before the first visit and kept as a layer) with the document, field by
// field.
func planAgrees(b []byte, d artifacts.ReplayDoc) []string {
	var pr artifacts.PlanRecord
	if err := strictJSON(b, &pr); err != nil {
		return []string{fmt.Sprintf("plan.json: %v", err)}
	}
	var p []string
	if pr.Prepared != d.Prepared || pr.Capture != d.Capture {
		p = append(p, fmt.Sprintf("plan.json prepared %s capture %s, the document %s and %s", pr.Prepared, pr.Capture, d.Prepared, d.Capture))
	}
	p = append(p, configDiff("plan.json config", pr.Config, d.Config)...)
	if !slices.Equal(pr.Routes, d.Routes) {
		p = append(p, fmt.Sprintf("plan.json routes %v, the document %v", pr.Routes, d.Routes))
	}
	if !slices.Equal(pr.Cases, d.Cases) {
		p = append(p, fmt.Sprintf("plan.json cases %v, the document %v", pr.Cases, d.Cases))
	}
	if d.Config.Target > 0 && len(pr.Plan) <= len(d.Plan) {
		// An adaptive replay's plan.json holds its fixed rounds; the
		// document's plan goes on with the rounds the stopping rule gave
		// (the stopping rule check re-derives them).
		for i := range pr.Plan {
			if pr.Plan[i] != d.Plan[i] {
				p = append(p, fmt.Sprintf("plan.json plan[%d] %+v, the document %+v", i, pr.Plan[i], d.Plan[i]))
				break
			}
		}
		for _, v := range d.Plan[len(pr.Plan):] {
			if v.Round < d.Config.Rounds {
				p = append(p, fmt.Sprintf("plan entry %d is in fixed round %d, after plan.json's %d visits", v.Index, v.Round+1, len(pr.Plan)))
				break
			}
		}
	} else if len(pr.Plan) != len(d.Plan) {
		p = append(p, fmt.Sprintf("plan.json plan: %d visits, the document %d", len(pr.Plan), len(d.Plan)))
	} else {
		for i := range pr.Plan {
			if pr.Plan[i] != d.Plan[i] {
				p = append(p, fmt.Sprintf("plan.json plan[%d] %+v, the document %+v", i, pr.Plan[i], d.Plan[i]))
				break
			}
		}
	}
	if !reflect.DeepEqual(pr.Inputs, d.Inputs) {
		p = append(p, fmt.Sprintf("plan.json inputs %+v, the document %+v", pr.Inputs, d.Inputs))
	}
	return p
}

// receiptConfigAgrees compares the configuration the replay receipt (b)
// records in parameters.config with the document's.
func receiptConfigAgrees(b []byte, cfg artifacts.ReplayConfig) []string {
	var st struct {
		Predicate struct {
			Parameters struct {
				Config json.RawMessage `json:"config"`
			} `json:"parameters"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return []string{fmt.Sprintf("receipt: %v", err)}
	}
	raw := st.Predicate.Parameters.Config
	if len(raw) == 0 || string(raw) == "null" {
		return []string{"receipt parameters.config: missing"}
	}
	var rc artifacts.ReplayConfig
	if err := strictJSON(raw, &rc); err != nil {
		return []string{fmt.Sprintf("receipt parameters.config: %v", err)}
	}
	return configDiff("receipt parameters.config", rc, cfg)
}

// configDiff names every field of got that differs from the document's
// want, as "WHERE.FIELD: GOT, the document says WANT".
func configDiff(where string, got, want artifacts.ReplayConfig) []string {
	var p []string
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		if gv, wv := g.Field(i).Interface(), w.Field(i).Interface(); gv != wv {
			p = append(p, fmt.Sprintf("%s.%s: %v, the document says %v", where, jsonName(g.Type().Field(i)), gv, wv))
		}
	}
	return p
}

// fieldDiff names the fields (JSON names, embedded structs flattened) in
// which two values of one struct type differ.
func fieldDiff(x, y any) []string {
	var out []string
	var walk func(a, b reflect.Value)
	walk = func(a, b reflect.Value) {
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(a.Field(i), b.Field(i))
				continue
			}
			if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
				out = append(out, jsonName(f))
			}
		}
	}
	walk(reflect.ValueOf(x), reflect.ValueOf(y))
	return out
}

func jsonName(f reflect.StructField) string {
	if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n != "" {
		return n
	}
	return f.Name
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
