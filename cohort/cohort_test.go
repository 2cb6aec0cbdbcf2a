package cohort

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/oracle"
)

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestBuiltin(t *testing.T) {
	if got, want := Builtin(), []string{"cpu-default", "cpu-full", "gpu-default", "gpu-llm", "gpu-llm-quick", "gpu-quick", "llm-primitives", "quick"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Builtin() = %v, want %v", got, want)
	}
}

func TestLoadBuiltins(t *testing.T) {
	for _, name := range Builtin() {
		t.Run(name, func(t *testing.T) {
			c, raw, err := Load(name)
			if err != nil {
				t.Fatalf("Load(%s) = %v, want nil", name, err)
			}
			if c.Name != name || c.Schema != 1 || len(c.Cases) == 0 {
				t.Errorf("Load(%s) = name %q, schema %d, %d cases, want name %s, schema 1, cases", name, c.Name, c.Schema, len(c.Cases), name)
			}
			want, err := builtin.ReadFile("builtin/" + name + ".json")
			if err != nil || string(raw) != string(want) {
				t.Errorf("Load(%s) raw bytes differ from the embedded file", name)
			}
			for _, cs := range c.Cases {
				if err := cs.Validate(); err != nil {
					t.Errorf("Load(%s) case %s: Validate() = %v", name, cs.ID, err)
				}
				if cs.ID == "" {
					t.Errorf("Load(%s) case %+v has no id", name, cs)
				}
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mine.json")
	if err := os.WriteFile(good, []byte(`{"schema": 1, "name": "mine", "cases": [{"op": "sum", "dims": {"M": 2, "N": 3}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, err := Load(good)
	if err != nil || len(c.Cases) != 1 || c.Cases[0].ID != "sum-2x3" {
		t.Errorf("Load(%s) = %+v, %v, want one case sum-2x3", good, c, err)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\n\"schema\": 2}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load(bad)
	if want := bad + ":1: schema: want 1, got 2"; errString(err) != want {
		t.Errorf("Load(%s) = %v, want %s", bad, err, want)
	}

	missing := filepath.Join(dir, "nope.json")
	_, _, err = Load(missing)
	want := `cohort "` + missing + `": not a built-in cohort (cpu-default, cpu-full, gpu-default, gpu-llm, gpu-llm-quick, gpu-quick, llm-primitives, quick) and not a readable file: stat ` + missing + `: no such file or directory`
	if errString(err) != want {
		t.Errorf("Load(%s) = %v, want %s", missing, err, want)
	}

	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load(big)
	if want := "cohort " + big + ": 4194305 bytes, limit 4194304"; errString(err) != want {
		t.Errorf("Load(%s) = %v, want %s", big, err, want)
	}
}

func TestParseDefaults(t *testing.T) {
	in := `{"schema": 1, "name": "d", "cases": [
  {"op": "gemm", "dims": {"M": 64, "N": 64, "K": 64}, "seed": 1},
  {"op": "gemm", "dims": {"K": 64, "N": 64, "M": 64}, "pattern": "dyadic", "policy": "tf32"},
  {"op": "gemm", "dims": {"M": 64, "N": 64, "K": 64}, "dtype": "f16"},
  {"op": "add", "dims": {"M": 64, "N": 1000}},
  {"id": "mine", "op": "rmsnorm", "dims": {"M": 2, "N": 8}, "params": {"eps": 0.001}}
]}`
	c, err := Parse("d.json", []byte(in))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	want := []oracle.Case{
		// A strict f32 matrix case's default pattern is exact, and not named.
		{ID: "gemm-64x64x64", Op: "gemm", Dims: map[string]int{"M": 64, "N": 64, "K": 64}, Dtype: "f32", Pattern: "exact", Seed: 1, Policy: "strict"},
		{ID: "gemm-64x64x64-dyadic-tf32", Op: "gemm", Dims: map[string]int{"M": 64, "N": 64, "K": 64}, Dtype: "f32", Pattern: "dyadic", Policy: "tf32"},
		{ID: "gemm-64x64x64-f16", Op: "gemm", Dims: map[string]int{"M": 64, "N": 64, "K": 64}, Dtype: "f16", Pattern: "normal", Policy: "strict"},
		{ID: "add-64x1000", Op: "add", Dims: map[string]int{"M": 64, "N": 1000}, Dtype: "f32", Pattern: "normal", Policy: "strict"},
		{ID: "mine", Op: "rmsnorm", Dims: map[string]int{"M": 2, "N": 8}, Dtype: "f32", Pattern: "normal", Policy: "strict", Params: map[string]float64{"eps": 0.001}},
	}
	if !reflect.DeepEqual(c.Cases, want) {
		t.Errorf("Parse cases = %+v, want %+v", c.Cases, want)
	}
	if c.Name != "d" || c.Schema != 1 {
		t.Errorf("Parse = name %q, schema %d, want d, 1", c.Name, c.Schema)
	}
}

// TestRoundsRange: a cohort's rounds at both ends of their range parse.
func TestRoundsRange(t *testing.T) {
	for _, n := range []int{0, 1, MaxRounds} {
		in := fmt.Sprintf(`{"schema": 1, "rounds": %d, "cases": [{"op": "sum", "dims": {"M": 1, "N": 1}}]}`, n)
		if c, err := Parse("r.json", []byte(in)); err != nil || c.Rounds != n {
			t.Errorf("Parse(rounds %d) = %+v, %v, want rounds %d", n, c, err, n)
		}
	}
}

// TestTarget: a cohort's target is absent, 0 (fixed rounds) or within
// replay's --target range; anything else names the field and the range.
func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		target string
		want   *float64
		err    string
	}{
		{"", nil, ""},
		{`"target": 0,`, ptr(0), ""},
		{`"target": 0.1,`, ptr(0.1), ""},
		{`"target": 50,`, ptr(50), ""},
		{`"target": 0.05,`, nil, "t.json:1: target: want 0 (fixed rounds) or 0.1 to 50 percent (or absent: replay's default), got 0.05"},
		{`"target": -1,`, nil, "t.json:1: target: want 0 (fixed rounds) or 0.1 to 50 percent (or absent: replay's default), got -1"},
		{`"target": 51,`, nil, "t.json:1: target: want 0 (fixed rounds) or 0.1 to 50 percent (or absent: replay's default), got 51"},
		{`"target": "1.5",`, nil, "t.json:1: target: want float64"},
	} {
		c, err := Parse("t.json", []byte(`{"schema": 1, `+tc.target+` "cases": [{"op": "sum", "dims": {"M": 1, "N": 1}}]}`))
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("Parse(%s) = %v, want %s", tc.target, err, tc.err)
		case tc.err == "" && (err != nil || !reflect.DeepEqual(c.Target, tc.want)):
			t.Errorf("Parse(%s) = %+v, %v, want target %v", tc.target, c, err, tc.want)
		}
	}
}

func ptr(f float64) *float64 { return &f }

func TestDefaultID(t *testing.T) {
	tests := []struct {
		c    oracle.Case
		want string
	}{
		{oracle.Case{Op: "gemm", Dims: map[string]int{"K": 3, "N": 2, "M": 1}, Pattern: "normal"}, "gemm-1x2x3"},
		{oracle.Case{Op: "softmax", Dims: map[string]int{"M": 4, "N": 5}, Pattern: "dyadic"}, "softmax-4x5-dyadic"},
		{oracle.Case{Op: "gemm", Dims: map[string]int{"M": 1, "N": 2, "K": 3}, Pattern: "normal", Policy: "strict"}, "gemm-1x2x3"},
		{oracle.Case{Op: "gemm", Dims: map[string]int{"M": 1, "N": 2, "K": 3}, Pattern: "ties", Policy: "tf32"}, "gemm-1x2x3-ties-tf32"},
		{oracle.Case{Op: "add", Dims: map[string]int{"M": 4, "N": 10}, Pattern: "normal", Device: "cuda"}, "add-4x10-cuda"},
	}
	for _, tt := range tests {
		if got := DefaultID(tt.c); got != tt.want {
			t.Errorf("DefaultID(%s %v %s) = %s, want %s", tt.c.Op, tt.c.Dims, tt.c.Pattern, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	knownOps := fmt.Sprint(oracle.Ops())
	tests := []struct {
		name string
		in   string
		want string // after "c.json:"
	}{
		{
			name: "syntax error on line 3",
			in:   "{\n  \"schema\": 1,\n  \"name\": nope\n}",
			want: "3: invalid character 'o' in literal null (expecting 'u')",
		},
		{
			name: "truncated",
			in:   "{\n  \"schema\": 1,\n",
			want: "1: unexpected EOF",
		},
		{
			name: "wrong type on line 2",
			in:   "{\n  \"schema\": \"1\"\n}",
			want: "2: schema: want int",
		},
		{
			name: "unknown top-level field",
			in:   `{"schema": 1, "name": "x", "colour": "red", "cases": []}`,
			want: `1: json: unknown field "colour"`,
		},
		{
			name: "schema 2",
			in:   `{"schema": 2, "cases": [{"op": "sum", "dims": {"M": 1, "N": 1}}]}`,
			want: "1: schema: want 1, got 2",
		},
		{
			name: "schema missing",
			in:   `{"cases": [{"op": "sum", "dims": {"M": 1, "N": 1}}]}`,
			want: "1: schema: want 1, got 0",
		},
		{
			name: "no cases",
			in:   `{"schema": 1, "name": "x", "cases": []}`,
			want: "1: cases: want at least one case",
		},
		{
			name: "unknown field in a case",
			in:   "{\"schema\": 1, \"cases\": [\n  {\"op\": \"sum\", \"dims\": {\"M\": 1, \"N\": 1}},\n  {\"op\": \"sum\", \"dims\": {\"M\": 2, \"N\": 1}, \"colour\": 1}\n]}",
			want: `3: case: json: unknown field "colour"`,
		},
		{
			name: "unknown op on line 4",
			in:   "{\"schema\": 1,\n \"cases\": [\n  {\"op\": \"sum\", \"dims\": {\"M\": 1, \"N\": 1}},\n  {\"op\": \"conv\", \"dims\": {\"M\": 8, \"N\": 8}}\n]}",
			want: `4: case conv-8x8: op: unknown op "conv" (known: ` + knownOps + `)`,
		},
		{
			name: "dims out of range",
			in:   "{\"schema\": 1, \"cases\": [\n{\"op\": \"add\", \"dims\": {\"M\": 0, \"N\": 8}}]}",
			want: "2: case add-0x8: dims: M=0 outside [1, 16384]",
		},
		{
			name: "missing dim",
			in:   "{\"schema\": 1, \"cases\": [\n{\"op\": \"gemm\", \"dims\": {\"M\": 1, \"N\": 8, \"X\": 2}}]}",
			want: "2: case gemm-1x8: dims: missing K (op gemm wants [M N K])",
		},
		{
			name: "dtype f64",
			in:   "{\"schema\": 1, \"cases\": [\n{\"op\": \"sum\", \"dims\": {\"M\": 1, \"N\": 8}, \"dtype\": \"f64\"}]}",
			want: `2: case sum-1x8-f64: dtype: want f32, f16 or bf16, got "f64"`,
		},
		{
			name: "unknown pattern",
			in:   "{\"schema\": 1, \"cases\": [\n{\"op\": \"sum\", \"dims\": {\"M\": 1, \"N\": 8}, \"pattern\": \"ones\"}]}",
			want: `2: case sum-1x8-ones: pattern: unknown pattern "ones" (known: normal, dyadic, ties, adversarial, exact)`,
		},
		{
			// TF32 passes the strict bound on normal inputs (docs/inputs.md).
			name: "strict f32 gemm on normal inputs",
			in:   "{\"schema\": 1, \"cases\": [\n{\"op\": \"bmm\", \"dims\": {\"B\": 2, \"M\": 1, \"N\": 1, \"K\": 2048}, \"pattern\": \"normal\"}]}",
			want: `2: case bmm-2x1x1x2048: pattern: normal: a TF32 or BF16 evaluation of a strict f32 bmm can pass the strict bound on these inputs (a 1x1 gemm from K = 128, any gemm from K = 1536: docs/inputs.md, "exact"); give pattern exact (the default here) or policy tf32`,
		},
		{
			name: "exact pattern for softmax",
			in:   "{\"schema\": 1, \"cases\": [\n{\"op\": \"softmax\", \"dims\": {\"M\": 1, \"N\": 8}, \"pattern\": \"exact\"}]}",
			want: `2: case softmax-1x8-exact: pattern: exact is for gemm, gemm_relu, gemm_gelu, bmm and gemv in f32 storage, not softmax in f32`,
		},
		{
			name: "rounds negative",
			in:   `{"schema": 1, "rounds": -1, "cases": [{"op": "sum", "dims": {"M": 1, "N": 1}}]}`,
			want: "1: rounds: want 1 to 1000 (or absent: replay's default), got -1",
		},
		{
			name: "rounds over the limit",
			in:   `{"schema": 1, "rounds": 1001, "cases": [{"op": "sum", "dims": {"M": 1, "N": 1}}]}`,
			want: "1: rounds: want 1 to 1000 (or absent: replay's default), got 1001",
		},
		{
			name: "unknown param",
			in:   "{\"schema\": 1, \"cases\": [\n{\"op\": \"add\", \"dims\": {\"M\": 2, \"N\": 3}, \"params\": {\"alpha\": 2}}]}",
			want: "2: case add-2x3: params.alpha: op add takes no parameters",
		},
		{
			name: "unknown param on a norm",
			in:   "{\"schema\": 1, \"cases\": [\n{\"op\": \"rmsnorm\", \"dims\": {\"M\": 2, \"N\": 8}, \"params\": {\"eps\": 1e-6, \"alpha\": 2}}]}",
			want: "2: case rmsnorm-2x8: params.alpha: op rmsnorm takes only eps",
		},
		{
			name: "duplicate explicit id",
			in:   "{\"schema\": 1, \"cases\": [\n  {\"id\": \"x\", \"op\": \"sum\", \"dims\": {\"M\": 1, \"N\": 8}},\n  {\"op\": \"sum\", \"dims\": {\"M\": 2, \"N\": 8}},\n  {\"id\": \"x\", \"op\": \"add\", \"dims\": {\"M\": 1, \"N\": 8}}\n]}",
			want: `4: id: "x" already used at line 2`,
		},
		{
			name: "duplicate default id",
			in:   "{\"schema\": 1, \"cases\": [\n  {\"op\": \"gemm\", \"dims\": {\"M\": 64, \"N\": 64, \"K\": 64}, \"seed\": 1},\n  {\"op\": \"gemm\", \"dims\": {\"M\": 64, \"N\": 64, \"K\": 64}, \"seed\": 2}\n]}",
			want: `3: id: "gemm-64x64x64" already used at line 2`,
		},
		{
			// Byte-identical cases: the second must be reported at its own
			// line, not found again at the first one's.
			name: "identical cases",
			in:   "{\"schema\": 1, \"cases\": [\n  {\"op\": \"sum\", \"dims\": {\"M\": 1, \"N\": 8}},\n  {\"op\": \"sum\", \"dims\": {\"M\": 1, \"N\": 8}}\n]}",
			want: `3: id: "sum-1x8" already used at line 2`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("c.json", []byte(tt.in))
			if want := "c.json:" + tt.want; errString(err) != want {
				t.Errorf("Parse(%s) = %v, want %s", tt.name, err, want)
			}
			if c != nil {
				t.Errorf("Parse(%s) = %+v with an error, want nil", tt.name, c)
			}
			var se *SyntaxError
			if !errors.As(err, &se) || se.File != "c.json" {
				t.Errorf("Parse(%s) error %T, want *SyntaxError naming c.json", tt.name, err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range Builtin() {
		b, err := builtin.ReadFile("builtin/" + name + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("{\"schema\": 1, \"cases\": [\n  {\"op\": \"sum\", \"dims\": {\"M\": 1, \"N\": 8}},\n  {\"op\": \"sum\", \"dims\": {\"M\": 1, \"N\": 8}}\n]}"))
	f.Add([]byte(`{"schema": 1, "cases": [{"op": "rmsnorm", "dims": {"M": 1, "N": 8}, "params": {"eps": 2}}]}`))
	f.Add([]byte("{\n  \"schema\": 1,\n  \"name\": nope\n}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse("f.json", b)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse error %T %v, want *SyntaxError", err, err)
			}
			if se.Line < 1 || se.Line > strings.Count(string(b), "\n")+1 {
				t.Fatalf("Parse error line %d outside the %d-line input", se.Line, strings.Count(string(b), "\n")+1)
			}
			return
		}
		seen := map[string]bool{}
		for _, cs := range c.Cases {
			if err := cs.Validate(); err != nil {
				t.Fatalf("Parse accepted an invalid case: %v", err)
			}
			if seen[cs.ID] {
				t.Fatalf("Parse accepted duplicate id %s", cs.ID)
			}
			seen[cs.ID] = true
		}
	})
}

// TestRules: a capture made before cohort rules 2 recorded none and was
// parsed by rule 1, under which a strict f32 gemm's default pattern is
// normal and an explicit normal is accepted; rule 2 gives it exact and
// refuses normal; an unknown rules number is refused naming the field.
func TestRules(t *testing.T) {
	in := []byte(`{"schema": 1, "cases": [{"op": "gemm", "dims": {"M": 2, "N": 2, "K": 2}}, {"op": "gemv", "dims": {"M": 2, "K": 300}, "pattern": "normal"}]}`)
	for n, want := range map[int]int{0: 1, Rules: Rules} {
		if r, err := RulesOf(n); err != nil || r != want {
			t.Errorf("RulesOf(%d) = %d, %v, want %d", n, r, err, want)
		}
	}
	if _, err := RulesOf(3); err == nil || err.Error() != "capture document cohortRules 3: want 2 (or absent, in a capture made before it)" {
		t.Errorf("RulesOf(3) = %v", err)
	}
	c, err := ParseRules("c.json", in, 1)
	if err != nil || c.Cases[0].Pattern != "normal" || c.Cases[1].Pattern != "normal" || c.Cases[0].ID != "gemm-2x2x2" {
		t.Fatalf("ParseRules(rule 1) = %+v, %v, want both cases normal, gemm-2x2x2", c, err)
	}
	if _, err := ParseRules("c.json", in, Rules); err == nil || !strings.Contains(err.Error(), "c.json:1: case gemv-2x300: pattern: normal: a TF32 or BF16 evaluation of a strict f32 gemv can pass the strict bound") {
		t.Errorf("ParseRules(rule 2) = %v, want gemv's normal pattern refused", err)
	}
}
