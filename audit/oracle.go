package audit

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/oracle"
)

// oracleCheck recomputes the FP64 reference and bound of every case and compares
// them with the capture packet: bit for bit, except the references and
// bounds of the gemm family, which come from a BLAS whose summation order
// differs between builds (gonum in a CGO_ENABLED=0 build, OpenBLAS's
// CPU-chosen kernels in a cgo one) and are accepted within the FP64
// rounding of two evaluations (oracle.SamePacket; docs/oracle.md,
// "Recomputation on another BLAS").
func oracleCheck(cp *checkpoint, f *facts) finding {
	var p []string
	sameVersion := cp.cdoc.Oracle == oracle.Version
	if !sameVersion {
		// The outputs check still judges the stored outputs with this
		// auditor's oracle; only the packet bytes are not comparable.
		p = append(p, fmt.Sprintf("capture: oracle %q, this auditor computes %q: references and bounds are compared only within one oracle version; audit with the tilepipe that made the capture", cp.cdoc.Oracle, oracle.Version))
	}
	exact, rounded := 0, 0
	for _, c := range cp.cdoc.Cases {
		ref := f.refs[c.Case.ID]
		if ref.err != nil {
			p = append(p, fmt.Sprintf("case %s: %v", c.Case.ID, ref.err))
			continue
		}
		if !sameVersion {
			continue
		}
		pp, match := comparePacket(cp.cap, c, ref.in, ref.exp)
		p = append(p, pp...)
		switch match {
		case packetExact:
			exact++
		case packetRounded:
			rounded++
		}
	}
	return finding{problems: p, summary: fmt.Sprintf("recomputed the FP64 reference and bound of %d cases: %d packets match bit for bit, %d gemm-family packets within the FP64 rounding of two BLAS evaluations (2·γ_K(2^-53)·s per element)", len(cp.cdoc.Cases), exact, rounded)}
}

// How a stored packet matches the recomputed one.
const (
	packetDiffers = iota
	packetExact   // bit for bit
	packetRounded // a gemm-family packet within the FP64 rounding of two BLAS evaluations
)

// comparePacket compares case c's stored packet (expected tensors and
// bounds, layers of the capture) with the reference recomputed from its
// inputs in: the problems, and how it matched.
func comparePacket(capture *artifacts.Stage, c artifacts.CapturedCase, in []oracle.Tensor, exp []oracle.Expected) (p []string, match int) {
	if len(c.Packet.Expected) != len(exp) {
		p = append(p, fmt.Sprintf("case %s: %d expected tensors, the oracle makes %d", c.Case.ID, len(c.Packet.Expected), len(exp)))
		return p, packetDiffers
	}
	// The stored packet, decoded, beside its bytes: expected tensors
	// in output order, bounds (float outputs only) matched by name.
	stored := make([]oracle.Expected, len(exp))
	raw := map[tensorKey][]byte{}
	byName := map[string]int{}
	whole, same := true, true
	for i, ref := range c.Packet.Expected {
		want := tensor.Float64Bytes(exp[i].Want)
		isInt := exp[i].WantI != nil || ref.Dtype == "i64"
		if isInt {
			want = oracle.Encode(oracle.I64(exp[i].WantI))
		} else {
			byName[ref.Name] = i
		}
		b, err := readSized(capture, ref, len(want))
		if err != nil {
			p = append(p, fmt.Sprintf("case %s expected %s: %v", c.Case.ID, ref.Name, err))
			whole = false
			continue
		}
		raw[tensorKey{"expected", ref.Name}], same = b, same && bytes.Equal(b, want)
		for j := 0; j < len(b)/8; j++ {
			if isInt {
				stored[i].WantI = append(stored[i].WantI, int64(word(b, j)))
			} else {
				stored[i].Want = append(stored[i].Want, math.Float64frombits(word(b, j)))
			}
		}
	}
	if len(c.Packet.Bound) != len(byName) {
		p = append(p, fmt.Sprintf("case %s: %d bound tensors, the oracle makes %d", c.Case.ID, len(c.Packet.Bound), len(byName)))
		whole = false
	}
	for _, ref := range c.Packet.Bound {
		i, ok := byName[ref.Name]
		if !ok {
			p = append(p, fmt.Sprintf("case %s bound %s: no float output of that name", c.Case.ID, ref.Name))
			whole = false
			continue
		}
		want := tensor.Float64Bytes(exp[i].Bound)
		b, err := readSized(capture, ref, len(want))
		if err != nil {
			p = append(p, fmt.Sprintf("case %s bound %s: %v", c.Case.ID, ref.Name, err))
			whole = false
			continue
		}
		raw[tensorKey{"bound", ref.Name}], same = b, same && bytes.Equal(b, want)
		for j := 0; j < len(b)/8; j++ {
			stored[i].Bound = append(stored[i].Bound, math.Float64frombits(word(b, j)))
		}
	}
	switch {
	case !whole:
	case same:
		match = packetExact
	default:
		err := oracle.SamePacket(c.Case, in, stored, exp)
		pe, ok := err.(*oracle.PacketError)
		switch {
		case err == nil:
			match = packetRounded
		case ok:
			p = append(p, differsAt(c, exp, raw, pe))
		default:
			p = append(p, err.Error())
		}
	}
	return p, match
}

// differsAt names the byte where the stored element first differs from
// the recomputed one, as a byte comparison of the tensors would.
func differsAt(c artifacts.CapturedCase, exp []oracle.Expected, raw map[tensorKey][]byte, pe *oracle.PacketError) string {
	var w uint64
	for i, ref := range c.Packet.Expected {
		switch {
		case ref.Name != pe.Output:
		case pe.Tensor == "bound":
			w = math.Float64bits(exp[i].Bound[pe.Index])
		case exp[i].WantI != nil:
			w = uint64(exp[i].WantI[pe.Index])
		default:
			w = math.Float64bits(exp[i].Want[pe.Index])
		}
	}
	b, k := raw[tensorKey{pe.Tensor, pe.Output}], 0
	for k < 7 && b[8*pe.Index+k] == byte(w>>(8*k)) {
		k++
	}
	return fmt.Sprintf("case %s %s %s: stored bytes differ from the recomputed ones at byte %d: %s", c.Case.ID, pe.Tensor, pe.Output, 8*pe.Index+k, pe.Detail())
}

// readSized is readPacketTensor, failing unless the tensor has n bytes.
func readSized(capture *artifacts.Stage, ref artifacts.TensorRef, n int) ([]byte, error) {
	b, err := readPacketTensor(capture, ref)
	if err == nil && len(b) != n {
		err = fmt.Errorf("%d bytes, the recomputed tensor has %d", len(b), n)
	}
	return b, err
}

// readPacketTensor returns a packet tensor's bytes, from a layer of the
// capture with the shape and dtype its document gives.
func readPacketTensor(capture *artifacts.Stage, ref artifacts.TensorRef) ([]byte, error) {
	if !capture.Has(ref.Digest) {
		return nil, fmt.Errorf("blob %s is not a layer of its stage", artifacts.Short(ref.Digest))
	}
	t, err := tensor.ReadFile(capture.Store.Path(ref.Digest), nil)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	if !slices.Equal(t.Meta.Shape, ref.Shape) || t.Meta.Dtype != ref.Dtype {
		return nil, fmt.Errorf("tensor %s %v, document says %s %v", t.Meta.Dtype, t.Meta.Shape, ref.Dtype, ref.Shape)
	}
	return bytes.Clone(t.Bytes()), nil
}

// word is the little-endian 8-byte element i of b.
func word(b []byte, i int) uint64 {
	var w uint64
	for j := 7; j >= 0; j-- {
		w = w<<8 | uint64(b[8*i+j])
	}
	return w
}

// tensorKey names one tensor of an oracle packet: its part ("expected" or
// "bound") and its output's name.
type tensorKey struct{ part, name string }
