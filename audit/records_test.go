package audit

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
)

// planRecordOf is the plan.json the replay of doc() wrote.
func planRecordOf(d artifacts.ReplayDoc) artifacts.PlanRecord {
	return artifacts.PlanRecord{Prepared: d.Prepared, Capture: d.Capture, Config: d.Config, Routes: d.Routes, Cases: d.Cases, Plan: d.Plan, Inputs: d.Inputs}
}

func planned() artifacts.ReplayDoc {
	d := doc()
	d.Prepared, d.Capture = artifacts.Digest("sha256:"+hex64('1')), artifacts.Digest("sha256:"+hex64('2'))
	d.Plan = []artifacts.Visit{{Index: 0, Round: 0, Position: 0, Case: "c", Route: "a"}, {Index: 1, Round: 0, Position: 1, Case: "c", Route: "b"}}
	d.Inputs = artifacts.InputSeeds{Replay: 7, Rounds: []uint64{8, 9}}
	return d
}

func hex64(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func TestPlanAgrees(t *testing.T) {
	tests := []struct {
		name string
		edit func(pr *artifacts.PlanRecord)
		want []string
	}{
		{"the same", func(*artifacts.PlanRecord) {}, nil},
		{"sampleMs", func(pr *artifacts.PlanRecord) { pr.Config.SampleMs = 20 }, []string{"plan.json config.sampleMs: 20, the document says 1"}},
		{"threads and warm-up", func(pr *artifacts.PlanRecord) { pr.Config.Threads, pr.Config.WarmupMs = 4, 50 },
			[]string{"plan.json config.warmupMs: 50, the document says 0", "plan.json config.threads: 4, the document says 2"}},
		{"prepared", func(pr *artifacts.PlanRecord) { pr.Prepared = artifacts.Digest("sha256:" + hex64('3')) },
			[]string{"plan.json prepared sha256:" + hex64('3') + " capture sha256:" + hex64('2') + ", the document sha256:" + hex64('1') + " and sha256:" + hex64('2')}},
		{"routes", func(pr *artifacts.PlanRecord) { pr.Routes = []string{"b", "a"} }, []string{"plan.json routes [b a], the document [a b]"}},
		{"cases", func(pr *artifacts.PlanRecord) { pr.Cases = nil }, []string{"plan.json cases [], the document [c]"}},
		{"a visit moved", func(pr *artifacts.PlanRecord) {
			pr.Plan = []artifacts.Visit{pr.Plan[0], {Index: 1, Round: 0, Position: 0, Case: "c", Route: "b"}}
		},
			[]string{"plan.json plan[1] {Index:1 Round:0 Position:0 Case:c Route:b}, the document {Index:1 Round:0 Position:1 Case:c Route:b}"}},
		{"a visit dropped", func(pr *artifacts.PlanRecord) { pr.Plan = pr.Plan[:1] }, []string{"plan.json plan: 1 visits, the document 2"}},
		{"seeds", func(pr *artifacts.PlanRecord) { pr.Inputs.Rounds = []uint64{8, 10} },
			[]string{"plan.json inputs {Replay:7 Rounds:[8 10]}, the document {Replay:7 Rounds:[8 9]}"}},
	}
	for _, tt := range tests {
		d := planned()
		pr := planRecordOf(planned())
		tt.edit(&pr)
		b, _ := json.Marshal(pr)
		if got := planAgrees(b, d); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("planAgrees(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got, want := planAgrees([]byte(`{"prepared": "x", "extra": 1}`), planned()), []string{`plan.json: json: unknown field "extra"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("planAgrees(an unknown field) = %q, want %q", got, want)
	}
}

func TestReceiptConfigAgrees(t *testing.T) {
	d := doc()
	receipt := func(params map[string]any) []byte {
		b, _ := json.Marshal(artifacts.Statement[artifacts.Receipt]{Type: artifacts.StatementType, Predicate: artifacts.Receipt{Stage: "replay", Parameters: params}})
		return b
	}
	other := d.Config
	other.Seed, other.Sets = 1<<60+1, 3 // past float64's integers: read as JSON numbers, not floats
	tests := []struct {
		name    string
		receipt []byte
		want    []string
	}{
		{"the same", receipt(map[string]any{"config": d.Config, "resume": false}), nil},
		{"seed and sets", receipt(map[string]any{"config": other}), []string{"receipt parameters.config.seed: 1152921504606846977, the document says 1", "receipt parameters.config.sets: 3, the document says 2"}},
		{"no config", receipt(map[string]any{"resume": false}), []string{"receipt parameters.config: missing"}},
		{"an unknown field", receipt(map[string]any{"config": map[string]any{"rounds": 2, "burst": 1}}), []string{`receipt parameters.config: json: unknown field "burst"`}},
	}
	for _, tt := range tests {
		if got := receiptConfigAgrees(tt.receipt, d.Config); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("receiptConfigAgrees(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestMaxErrRatioAgrees(t *testing.T) {
	v := artifacts.VisitResult{Visit: artifacts.Visit{Index: 4}, MaxErrRatio: 0.25}
	if got := maxErrRatioAgrees(v, 0.25); got != nil {
		t.Errorf("maxErrRatioAgrees(the same) = %q, want none", got)
	}
	if got, want := maxErrRatioAgrees(v, 0.5), []string{"visit 4: maxErrRatio 0.25 recorded, its stored outputs give 0.5"}; !reflect.DeepEqual(got, want) {
		t.Errorf("maxErrRatioAgrees(0.5) = %q, want %q", got, want)
	}
	// Another BLAS's references move the ratio by ~2^-26: within 2^-20
	// it agrees, beyond it does not.
	if got := maxErrRatioAgrees(v, 0.25+0x1p-22); got != nil {
		t.Errorf("maxErrRatioAgrees(0.25 + 2^-22) = %q, want none (another BLAS's rounding)", got)
	}
	if got := maxErrRatioAgrees(v, 0.25+0x1p-18); got == nil {
		t.Error("maxErrRatioAgrees(0.25 + 2^-18) agrees, want it named")
	}
}
