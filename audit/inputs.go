package audit

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/oracle"
)

// inputsCheck regenerates every case's inputs and compares them, byte for byte,
// with the capture packet and the prepared raw inputs.
func inputsCheck(cp *checkpoint, f *facts) finding {
	var p []string
	raw := map[string][]artifacts.TensorRef{}
	for _, e := range cp.pdoc.Entries {
		if len(e.Inputs) > 0 {
			raw[e.Case] = e.Inputs
			for _, other := range cp.pdoc.Entries {
				if other.Case == e.Case && len(other.Inputs) > 0 && !slices.EqualFunc(other.Inputs, e.Inputs, func(x, y artifacts.TensorRef) bool { return x.Digest == y.Digest }) {
					p = append(p, fmt.Sprintf("case %s: routes %s and %s were prepared with different inputs", e.Case, e.Route, other.Route))
				}
			}
		}
	}
	n := 0
	for _, c := range cp.cdoc.Cases {
		gen, err := f.refs[c.Case.ID].in, f.refs[c.Case.ID].inErr
		if err != nil {
			p = append(p, fmt.Sprintf("case %s: regenerate: %v", c.Case.ID, err))
			continue
		}
		if c.Generator != oracle.Generator {
			p = append(p, fmt.Sprintf("case %s: generator %q, this auditor regenerates with %q", c.Case.ID, c.Generator, oracle.Generator))
		}
		if len(gen) != len(c.Packet.Inputs) {
			p = append(p, fmt.Sprintf("case %s: %d inputs, the generator makes %d", c.Case.ID, len(c.Packet.Inputs), len(gen)))
			continue
		}
		for i, ref := range c.Packet.Inputs {
			want := oracle.Encode(gen[i])
			if err := cp.sameTensor(cp.cap, ref, want); err != nil {
				p = append(p, fmt.Sprintf("case %s input %s: %v", c.Case.ID, ref.Name, err))
			}
			if r, ok := raw[c.Case.ID]; ok {
				b, err := cp.prep.Store.ReadVerified(r[i].Digest, "raw input", int64(len(want))+1)
				if err != nil || !bytes.Equal(b, want) {
					p = append(p, fmt.Sprintf("case %s prepared raw input %s (%s): bytes differ from the regenerated input (%v)", c.Case.ID, r[i].Name, artifacts.Short(r[i].Digest), err))
				}
			}
			n++
		}
	}
	return finding{problems: p, summary: fmt.Sprintf("regenerated %d input tensors from generator and seed; capture and prepared bytes match", n)}
}

func (cp *checkpoint) sameTensor(st *artifacts.Stage, ref artifacts.TensorRef, want []byte) error {
	if !st.Has(ref.Digest) {
		return fmt.Errorf("blob %s is not a layer of its stage", artifacts.Short(ref.Digest))
	}
	t, err := tensor.ReadFile(st.Store.Path(ref.Digest), nil)
	if err != nil {
		return err
	}
	defer t.Release()
	if !slices.Equal(t.Meta.Shape, ref.Shape) || t.Meta.Dtype != ref.Dtype {
		return fmt.Errorf("tensor %s %v, document says %s %v", t.Meta.Dtype, t.Meta.Shape, ref.Dtype, ref.Shape)
	}
	if !bytes.Equal(t.Bytes(), want) {
		for i := range want {
			if t.Bytes()[i] != want[i] {
				return fmt.Errorf("stored bytes differ from the recomputed ones at byte %d", i)
			}
		}
	}
	return nil
}
