// Package cohort loads cohorts: JSON lists of cases, built in or from a file.
//
// # Format
//
//	{"schema": 1, "name": "quick", "rounds": 1, "target": 0, "cases": [
//	  {"op": "gemm", "dims": {"M": 64, "N": 64, "K": 64}, "seed": 1}]}
//
// Per case, dtype defaults to f32, pattern to normal, policy to strict and
// id to op-dims-pattern (e.g. gemm-64x64x64); ids must be unique. A case's
// params are only those its op uses (eps, for the norms). The range of
// every number is in docs/limits.md.
package cohort

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/tilepipe/tilepipe/oracle"
)

//go:embed builtin/*.json
var builtin embed.FS

// Cohort is a named list of cases.
type Cohort struct {
	Schema      int    `json:"schema"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Rounds, when set, is the replay's default number of rounds for this
	// cohort (the --rounds flag still wins); a smoke cohort uses it to
	// run as a labelled screen. 0 (absent) or 1 to [MaxRounds].
	Rounds int `json:"rounds,omitempty"`
	// Target, when set, is the replay's default precision target for this
	// cohort, in percent (the --target flag still wins): 0 asks for fixed
	// rounds (a screen, or a cohort sized for a time), else
	// [MinTargetPct] to [MaxTargetPct] makes the replay adaptive to it.
	Target *float64      `json:"target,omitempty"`
	Cases  []oracle.Case `json:"cases"`
}

// MinTargetPct and MaxTargetPct bound a cohort's target, as they bound
// replay's --target (docs/limits.md).
const MinTargetPct, MaxTargetPct = 0.1, 50.0

// MaxFileBytes bounds a cohort file.
const MaxFileBytes = 4 << 20

// MaxRounds bounds a cohort's rounds: replay's own limit on --rounds
// (docs/limits.md), so a cohort cannot ask for a replay that would refuse.
const MaxRounds = 1000

// Builtin lists the names of the built-in cohorts.
func Builtin() []string {
	ents, _ := builtin.ReadDir("builtin")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(names)
	return names
}

// Load loads a built-in cohort by name, or else the file at nameOrPath.
// It also returns the raw bytes it parsed, for the capture record.
func Load(nameOrPath string) (*Cohort, []byte, error) {
	file := nameOrPath
	b, err := builtin.ReadFile(path.Join("builtin", nameOrPath+".json"))
	if err == nil {
		file = nameOrPath + ".json (built in)"
	} else {
		fi, serr := os.Stat(nameOrPath)
		if serr != nil {
			return nil, nil, fmt.Errorf("cohort %q: not a built-in cohort (%s) and not a readable file: %w", nameOrPath, strings.Join(Builtin(), ", "), serr)
		}
		if fi.Size() > MaxFileBytes {
			return nil, nil, fmt.Errorf("cohort %s: %d bytes, limit %d", nameOrPath, fi.Size(), MaxFileBytes)
		}
		if b, err = os.ReadFile(nameOrPath); err != nil {
			return nil, nil, fmt.Errorf("cohort %s: %w", nameOrPath, err)
		}
	}
	c, err := Parse(file, b)
	return c, b, err
}

// SyntaxError is a cohort error at a line of its file.
type SyntaxError struct {
	File string
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

func lineOf(b []byte, off int64) int {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	return bytes.Count(b[:off], []byte("\n")) + 1
}

// Parse decodes and validates a cohort. Errors name file and line.
func Parse(file string, b []byte) (*Cohort, error) { return ParseRules(file, b, Rules) }

// Rules is the cohort rules Parse applies, recorded in the capture
// document (artifacts.CaptureDoc.CohortRules): under 2, a strict f32
// matrix case (oracle.StrictMatrix) takes the exact pattern, by default
// and refusing any other; under 1 (captures made before rule 2) every
// case's default pattern is normal and any pattern the oracle knows is
// accepted.
const Rules = 2

// RulesOf is the cohort rules a capture document that recorded n was
// parsed by: 0 (absent) is 1; anything but 0 and Rules is refused.
func RulesOf(n int) (int, error) {
	switch n {
	case 0:
		return 1, nil
	case Rules:
		return Rules, nil
	}
	return 0, fmt.Errorf("capture document cohortRules %d: want %d (or absent, in a capture made before it)", n, Rules)
}

// ParseRules is Parse under the given cohort rules (1 or Rules).
func ParseRules(file string, b []byte, rules int) (*Cohort, error) {
	var raw struct {
		Schema      int               `json:"schema"`
		Name        string            `json:"name"`
		Description string            `json:"description"`
		Rounds      int               `json:"rounds"`
		Target      *float64          `json:"target"`
		Cases       []json.RawMessage `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, &SyntaxError{file, lineOf(b, se.Offset), se.Error()}
		case errors.As(err, &te):
			return nil, &SyntaxError{file, lineOf(b, te.Offset), fmt.Sprintf("%s: want %s", te.Field, te.Type)}
		}
		return nil, &SyntaxError{file, 1, err.Error()}
	}
	if raw.Schema != 1 {
		return nil, &SyntaxError{file, 1, fmt.Sprintf("schema: want 1, got %d", raw.Schema)}
	}
	if len(raw.Cases) == 0 {
		return nil, &SyntaxError{file, 1, "cases: want at least one case"}
	}
	if raw.Rounds < 0 || raw.Rounds > MaxRounds {
		return nil, &SyntaxError{file, 1, fmt.Sprintf("rounds: want 1 to %d (or absent: replay's default), got %d", MaxRounds, raw.Rounds)}
	}
	if t := raw.Target; t != nil && *t != 0 && !(*t >= MinTargetPct && *t <= MaxTargetPct) {
		return nil, &SyntaxError{file, 1, fmt.Sprintf("target: want 0 (fixed rounds) or %g to %g percent (or absent: replay's default), got %g", MinTargetPct, MaxTargetPct, *t)}
	}
	c := &Cohort{Schema: 1, Name: raw.Name, Description: raw.Description, Rounds: raw.Rounds, Target: raw.Target}
	seen := map[string]int{}
	// Cases appear in order, so search each after the previous one: a
	// byte-identical duplicate must get its own line, not the first's.
	from := 0
	for _, rc := range raw.Cases {
		at := from
		if i := bytes.Index(b[from:], rc); i >= 0 {
			at = from + i
			from = at + len(rc)
		}
		line := lineOf(b, int64(at))
		var cs oracle.Case
		d := json.NewDecoder(bytes.NewReader(rc))
		d.DisallowUnknownFields()
		if err := d.Decode(&cs); err != nil {
			return nil, &SyntaxError{file, line, "case: " + err.Error()}
		}
		if cs.Dtype == "" {
			cs.Dtype = "f32"
		}
		if cs.Policy == "" {
			cs.Policy = "strict"
		}
		explicit := cs.Pattern
		if cs.Pattern == "" {
			cs.Pattern = defaultPattern(cs, rules)
		}
		if cs.ID == "" {
			cs.ID = DefaultID(cs)
		}
		if err := cs.Validate(); err != nil {
			return nil, &SyntaxError{file, line, err.Error()}
		}
		if rules >= 2 && oracle.StrictMatrix(cs) && cs.Pattern != oracle.PatternExact {
			return nil, &SyntaxError{file, line, fmt.Sprintf("case %s: pattern: %s: a TF32 or BF16 evaluation of a strict f32 %s can pass the strict bound on these inputs (a 1x1 gemm from K = 128, any gemm from K = 1536: docs/inputs.md, \"exact\"); give pattern exact (the default here) or policy tf32", cs.ID, explicit, cs.Op)}
		}
		if prev, dup := seen[cs.ID]; dup {
			return nil, &SyntaxError{file, line, fmt.Sprintf("id: %q already used at line %d", cs.ID, prev)}
		}
		seen[cs.ID] = line
		c.Cases = append(c.Cases, cs)
	}
	return c, nil
}

// defaultPattern is a case's pattern when the cohort gives none: under
// rules 2, exact for a strict f32 matrix case (oracle.StrictMatrix);
// normal otherwise.
func defaultPattern(c oracle.Case, rules int) string {
	if rules >= 2 && oracle.StrictMatrix(c) {
		return oracle.PatternExact
	}
	return "normal"
}

// DefaultID names a case op-AxBx…[-dtype][-ranking][-pattern][-policy][-device],
// dims in the op's canonical order (oracle.Dims), e.g. gemm-64x64x64,
// topk-17x1000x8-stable-ties, gemm-64x64x64-f16, add-1024x1024-cuda.
func DefaultID(c oracle.Case) string {
	var dims []string
	order := oracle.Dims(c.Op)
	if order == nil { // an unknown op: its dims in name order, for the message
		for k := range c.Dims {
			order = append(order, k)
		}
		sort.Strings(order)
	}
	for _, k := range order {
		if v, ok := c.Dims[k]; ok {
			dims = append(dims, strconv.Itoa(v))
		}
	}
	id := c.Op + "-" + strings.Join(dims, "x")
	pattern := c.Pattern
	if pattern == defaultPattern(c, Rules) {
		pattern = "" // the default pattern for the case is not named
	}
	for _, s := range []string{c.Dtype, c.Ranking, pattern, c.Policy, c.Device} {
		if s != "" && s != "f32" && s != "normal" && s != oracle.PolicyStrict {
			id += "-" + s
		}
	}
	return id
}
