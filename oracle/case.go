package oracle

import (
	"fmt"
	"sort"
)

// Case is one operator at one size with one input recipe. It is the unit
// every stage and route agrees on; its JSON form is what routes receive.
type Case struct {
	ID      string             `json:"id"`
	Op      string             `json:"op"`
	Dims    map[string]int     `json:"dims"`
	Dtype   string             `json:"dtype"`
	Pattern string             `json:"pattern"`
	Seed    uint64             `json:"seed"`
	Policy  string             `json:"policy"`
	Params  map[string]float64 `json:"params,omitempty"`
}

// Param is one tensor of a case's signature, in the order routes take them.
type Param struct {
	Name  string `json:"name"`
	Role  string `json:"role"` // "input" or "output"
	Dtype string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// Elems is the number of elements of p.
func (p Param) Elems() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Bytes is the size of p's dense buffer.
func (p Param) Bytes() int { return p.Elems() * DtypeSize(p.Dtype) }

// DtypeSize is the element size of a storage dtype, 0 for unknown ones.
func DtypeSize(dtype string) int {
	switch dtype {
	case "f32":
		return 4
	case "f64", "i64":
		return 8
	}
	return 0
}

// Limits on case sizes; every dimension and tensor must stay inside them.
const (
	MaxDim   = 16384
	MaxElems = 1 << 24
)

// opDims lists the dimension names each op requires.
var opDims = map[string][]string{
	"gemm":      {"M", "N", "K"},
	"add":       {"M", "N"},
	"sum":       {"M", "N"},
	"softmax":   {"M", "N"},
	"rmsnorm":   {"M", "N"},
	"layernorm": {"M", "N"},
}

// Ops lists the operators the oracle knows, sorted.
func Ops() []string {
	ops := make([]string, 0, len(opDims))
	for op := range opDims {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}

// Eps is the case's epsilon for the norms (params.eps, default 1e-5).
func (c Case) Eps() float64 {
	if e, ok := c.Params["eps"]; ok {
		return e
	}
	return 1e-5
}

// Validate checks the case's op, dims, dtype and limits.
func (c Case) Validate() error {
	if c.ID == "" {
		return fmt.Errorf("case: id: want a non-empty id")
	}
	names, ok := opDims[c.Op]
	if !ok {
		return fmt.Errorf("case %s: op: unknown op %q (known: %v)", c.ID, c.Op, Ops())
	}
	if len(c.Dims) != len(names) {
		return fmt.Errorf("case %s: dims: op %s wants exactly %v, got %v", c.ID, c.Op, names, c.Dims)
	}
	for _, n := range names {
		d, ok := c.Dims[n]
		if !ok {
			return fmt.Errorf("case %s: dims: missing %s (op %s wants %v)", c.ID, n, c.Op, names)
		}
		if d < 1 || d > MaxDim {
			return fmt.Errorf("case %s: dims: %s=%d outside [1, %d]", c.ID, n, d, MaxDim)
		}
	}
	if c.Dtype != "f32" {
		return fmt.Errorf("case %s: dtype: want f32, got %q", c.ID, c.Dtype)
	}
	if c.Policy != "strict" {
		return fmt.Errorf("case %s: policy: want strict, got %q", c.ID, c.Policy)
	}
	if !knownPattern(c.Pattern) {
		return fmt.Errorf("case %s: pattern: unknown pattern %q", c.ID, c.Pattern)
	}
	if e := c.Eps(); !(e > 0 && e < 1) {
		return fmt.Errorf("case %s: params.eps: want 0 < eps < 1, got %g", c.ID, e)
	}
	for _, p := range signature(c) {
		if p.Elems() > MaxElems {
			return fmt.Errorf("case %s: tensor %s has %d elements, limit %d", c.ID, p.Name, p.Elems(), MaxElems)
		}
	}
	return nil
}

// Signature is the ordered tensor list of c (see docs/protocol.md).
func Signature(c Case) ([]Param, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return signature(c), nil
}

func signature(c Case) []Param {
	M, N, K := c.Dims["M"], c.Dims["N"], c.Dims["K"]
	in := func(name string, shape ...int) Param { return Param{name, "input", "f32", shape} }
	out := func(name string, shape ...int) Param { return Param{name, "output", "f32", shape} }
	switch c.Op {
	case "gemm":
		return []Param{in("A", M, K), in("B", K, N), out("C", M, N)}
	case "add":
		return []Param{in("A", M, N), in("B", M, N), out("C", M, N)}
	case "sum":
		return []Param{in("X", M, N), out("Y", M)}
	case "softmax":
		return []Param{in("X", M, N), out("Y", M, N)}
	case "rmsnorm":
		return []Param{in("X", M, N), in("W", N), out("Y", M, N)}
	case "layernorm":
		return []Param{in("X", M, N), in("W", N), in("B", N), out("Y", M, N)}
	}
	return nil
}
