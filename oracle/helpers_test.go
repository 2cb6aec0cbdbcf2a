package oracle

// Adapters between the float32-slice form the older tests were written in
// and the Tensor API.

func f32s(in []Tensor) [][]float32 {
	out := make([][]float32, len(in))
	for i, t := range in {
		out[i] = t.F
	}
	return out
}

func tensors(x [][]float32) []Tensor {
	out := make([]Tensor, len(x))
	for i, v := range x {
		out[i] = F32(v)
	}
	return out
}

func exps(want, bound [][]float64) []Expected {
	out := make([]Expected, len(want))
	for i := range want {
		out[i].Want = want[i]
		if i < len(bound) {
			out[i].Bound = bound[i]
		}
	}
	return out
}

func splitExp(e []Expected) (want, bound [][]float64) {
	for _, x := range e {
		want, bound = append(want, x.Want), append(bound, x.Bound)
	}
	return want, bound
}

// refF is Reference on f32 inputs, split into values and bounds.
func refF(c Case, in [][]float32) ([][]float64, [][]float64, error) {
	e, err := Reference(c, tensors(in))
	if err != nil {
		return nil, nil, err
	}
	w, b := splitExp(e)
	return w, b, nil
}

// cmpF is Compare on f32 outputs with split values and bounds.
func cmpF(c Case, want, bound [][]float64, out [][]float32) Verdict {
	return Compare(c, exps(want, bound), tensors(out))
}

func checkF(c Case, out [][]float32) (Verdict, error) { return Check(c, tensors(out)) }
