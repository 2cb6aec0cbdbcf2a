package oracle

import (
	"fmt"
	"math"
	"slices"
)

// Discriminates reports whether every output of c is really checked for
// these inputs: with every other output exactly right (the reference
// rounded to the output's storage), no trivial fill of one output may pass
// the case's bound. The fills are all zeros, all ones, one constant (the
// reference's median), the timers' first poison NaN, and a copy of each
// input of the same size and kind. A case that fails this cannot tell a
// kernel that computes from one that does not, so capture refuses it
// (docs/threat-model.md, "non-discriminating cases").
func Discriminates(c Case, inputs []Tensor, exp []Expected) error {
	sig, err := Signature(c)
	if err != nil {
		return err
	}
	var outs, ins []Param
	for _, p := range sig {
		if p.Role == RoleOutput {
			outs = append(outs, p)
		} else {
			ins = append(ins, p)
		}
	}
	if len(outs) != len(exp) || len(ins) != len(inputs) {
		return fmt.Errorf("case %s: %d outputs and %d inputs, want %d and %d", c.ID, len(exp), len(inputs), len(outs), len(ins))
	}
	right := make([]Tensor, len(outs))
	for k, p := range outs {
		if p.Dtype == "i64" {
			right[k] = I64(exp[k].WantI)
			continue
		}
		f := make([]float32, len(exp[k].Want))
		for i, w := range exp[k].Want {
			f[i] = toStorage(p.Dtype, float32(w))
		}
		right[k] = Tensor{Dtype: p.Dtype, F: f}
	}
	gen := func() []Tensor { return inputs }
	if v := compare(c, gen, exp, right); !v.Pass {
		return fmt.Errorf("case %s: the reference rounded to storage fails its own bound: %s", c.ID, v.Reason)
	}
	for k, p := range outs {
		type fill struct {
			what string
			t    Tensor
		}
		var fills []fill
		n := p.Elems()
		if p.Dtype == "i64" {
			med := slices.Clone(exp[k].WantI)
			slices.Sort(med)
			fills = append(fills, fill{"all zeros", I64(make([]int64, n))}, fill{"all ones", I64(constI(n, 1))},
				fill{fmt.Sprintf("the constant %d", med[n/2]), I64(constI(n, med[n/2]))},
				fill{"the poison", I64(constI(n, 0x7FF8DEADDEADDEAD))})
		} else {
			med := slices.Clone(exp[k].Want)
			slices.Sort(med)
			m := toStorage(p.Dtype, float32(med[n/2]))
			fills = append(fills, fill{"all zeros", Tensor{Dtype: p.Dtype, F: make([]float32, n)}}, fill{"all ones", Tensor{Dtype: p.Dtype, F: constF(n, 1)}},
				fill{fmt.Sprintf("the constant %s", fmtGot(m)), Tensor{Dtype: p.Dtype, F: constF(n, m)}},
				fill{"the poison", Tensor{Dtype: p.Dtype, F: constF(n, math.Float32frombits(0x7FC0DEAD))}})
		}
		for i, q := range ins {
			if q.Elems() == n && (q.Dtype == "i64") == (p.Dtype == "i64") {
				fills = append(fills, fill{"a copy of input " + q.Name, inputs[i]})
			}
		}
		for _, f := range fills {
			got := slices.Clone(right)
			got[k] = f.t
			if v := compare(c, gen, exp, got); v.Pass {
				return fmt.Errorf("non_discriminating: case %s: output %s filled with %s passes its bound (the other outputs right); choose another pattern, size or seed", c.ID, p.Name, f.what)
			}
		}
	}
	return nil
}

func constF(n int, v float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = v
	}
	return x
}

func constI(n int, v int64) []int64 {
	x := make([]int64, n)
	for i := range x {
		x[i] = v
	}
	return x
}
