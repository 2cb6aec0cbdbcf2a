package audit

import (
	"reflect"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
)

func TestCohortAgrees(t *testing.T) {
	const file = `{"schema": 1, "name": "small", "rounds": 2, "cases": [
  {"op": "gemm", "dims": {"M": 16, "N": 16, "K": 16}, "seed": 1},
  {"op": "add", "dims": {"M": 4, "N": 10}, "seed": 9}]}`
	gemm := oracle.Case{ID: "gemm-16x16x16", Op: "gemm", Dims: map[string]int{"M": 16, "N": 16, "K": 16}, Dtype: "f32", Pattern: "normal", Seed: 1, Policy: "strict"}
	add := oracle.Case{ID: "add-4x10", Op: "add", Dims: map[string]int{"M": 4, "N": 10}, Dtype: "f32", Pattern: "normal", Seed: 9, Policy: "strict"}
	capture := func(cases ...oracle.Case) artifacts.CaptureDoc {
		d := artifacts.CaptureDoc{Cohort: "small", Rounds: 2}
		for _, c := range cases {
			d.Cases = append(d.Cases, artifacts.CapturedCase{Case: c})
		}
		return d
	}
	zero := 0.0
	seeded := add
	seeded.Seed = 10
	bigger := gemm
	bigger.Dims = map[string]int{"M": 32, "N": 16, "K": 16}
	tests := []struct {
		name string
		d    artifacts.CaptureDoc
		want []string
	}{
		{"the same", capture(gemm, add), nil},
		{"a seed", capture(gemm, seeded), []string{
			`case 1: cohort.json has {"id":"add-4x10","op":"add","dims":{"M":4,"N":10},"dtype":"f32","pattern":"normal","seed":9,"policy":"strict"}, the capture document {"id":"add-4x10","op":"add","dims":{"M":4,"N":10},"dtype":"f32","pattern":"normal","seed":10,"policy":"strict"}`}},
		{"a dimension, the id kept", capture(bigger, add), []string{
			`case 0: cohort.json has {"id":"gemm-16x16x16","op":"gemm","dims":{"K":16,"M":16,"N":16},"dtype":"f32","pattern":"normal","seed":1,"policy":"strict"}, the capture document {"id":"gemm-16x16x16","op":"gemm","dims":{"K":16,"M":32,"N":16},"dtype":"f32","pattern":"normal","seed":1,"policy":"strict"}`}},
		{"reordered", capture(add, gemm), []string{
			`case 0: cohort.json has {"id":"gemm-16x16x16","op":"gemm","dims":{"K":16,"M":16,"N":16},"dtype":"f32","pattern":"normal","seed":1,"policy":"strict"}, the capture document {"id":"add-4x10","op":"add","dims":{"M":4,"N":10},"dtype":"f32","pattern":"normal","seed":9,"policy":"strict"}`,
			`case 1: cohort.json has {"id":"add-4x10","op":"add","dims":{"M":4,"N":10},"dtype":"f32","pattern":"normal","seed":9,"policy":"strict"}, the capture document {"id":"gemm-16x16x16","op":"gemm","dims":{"K":16,"M":16,"N":16},"dtype":"f32","pattern":"normal","seed":1,"policy":"strict"}`}},
		{"a case dropped", capture(gemm), []string{"cohort.json has 2 cases, the capture document 1"}},
		{"name and rounds", artifacts.CaptureDoc{Cohort: "quick", Rounds: 1, Cases: capture(gemm, add).Cases}, []string{`cohort.json name "small", the capture document "quick"`, "cohort.json rounds 2, the capture document 1"}},
		// A forger who makes the replay adaptive's default fixed, or the
		// reverse, must change the cohort the audit parses.
		{"a target added", artifacts.CaptureDoc{Cohort: "small", Rounds: 2, Target: &zero, Cases: capture(gemm, add).Cases}, []string{"cohort.json target absent, the capture document 0"}},
	}
	// Cohort rules 2 (captures since the exact pattern): the same file
	// gives the strict f32 gemm the exact pattern; a capture document that
	// records rule 2 beside a normal gemm (a rule-1 capture relabelled) is
	// named, and a rules number this tilepipe does not know is refused.
	exact := gemm
	exact.Pattern = oracle.PatternExact
	rule2 := func(n int, cases ...oracle.Case) artifacts.CaptureDoc {
		d := capture(cases...)
		d.CohortRules = n
		return d
	}
	tests = append(tests, []struct {
		name string
		d    artifacts.CaptureDoc
		want []string
	}{
		{"rule 2, the same", rule2(2, exact, add), nil},
		{"rule 2 beside a normal gemm", rule2(2, gemm, add), []string{
			`case 0: cohort.json has {"id":"gemm-16x16x16","op":"gemm","dims":{"K":16,"M":16,"N":16},"dtype":"f32","pattern":"exact","seed":1,"policy":"strict"}, the capture document {"id":"gemm-16x16x16","op":"gemm","dims":{"K":16,"M":16,"N":16},"dtype":"f32","pattern":"normal","seed":1,"policy":"strict"}`}},
		{"rules unknown", rule2(3, exact, add), []string{"capture document cohortRules 3: want 2 (or absent, in a capture made before it)"}},
	}...)
	for _, tt := range tests {
		if got := cohortAgrees([]byte(file), tt.d); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("cohortAgrees(%s) =\n%q\nwant\n%q", tt.name, got, tt.want)
		}
	}
	if got, want := cohortAgrees([]byte(`{"schema": 2, "cases": []}`), capture(gemm)), []string{"cohort.json:1: schema: want 1, got 2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("cohortAgrees(schema 2) = %q, want %q", got, want)
	}
}
