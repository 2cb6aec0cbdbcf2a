package visit

import (
	"encoding/binary"
	"fmt"
)

// NovelCalls is the calls of each novel sample of a visit whose warm
// samples were calibrated to calls per sample, with slots novel sets.
func NovelCalls(calls int64, slots int) int64 {
	return max(1, min(calls, int64(slots)))
}

// ChecksPerSample is how many calls of each of samples novel samples of
// calls calls replay judges in full, for a visit that may judge limit
// calls (sets.Rule.Checks): limit spread evenly, at least one a sample,
// every call where a sample has fewer.
func ChecksPerSample(samples int, calls, limit int64) int64 {
	s := int64(max(samples, 1))
	return min(calls, max(1, (limit+s-1)/s))
}

// FirstEqual is the first element of set s equal to pattern (one
// element's bytes), or -1: a novel call's output slot still holding the
// fill replay wrote before the sample.
func (m *MemFile) FirstEqual(s int, pattern []byte) int {
	d := m.Set(s)
	switch len(pattern) {
	case 2:
		p := binary.LittleEndian.Uint16(pattern)
		for i := 0; i+2 <= len(d); i += 2 {
			if binary.LittleEndian.Uint16(d[i:]) == p {
				return i / 2
			}
		}
	case 4:
		p := binary.LittleEndian.Uint32(pattern)
		for i := 0; i+4 <= len(d); i += 4 {
			if binary.LittleEndian.Uint32(d[i:]) == p {
				return i / 4
			}
		}
	case 8:
		p := binary.LittleEndian.Uint64(pattern)
		for i := 0; i+8 <= len(d); i += 8 {
			if binary.LittleEndian.Uint64(d[i:]) == p {
				return i / 8
			}
		}
	default:
		panic(fmt.Sprintf("visit: a %d-byte element", len(pattern)))
	}
	return -1
}

// FillSets writes pattern over every element of sets 0 to n-1.
func (m *MemFile) FillSets(n int, pattern []byte) {
	for s := range n {
		d := m.Set(s)
		copy(d, pattern)
		repeat(d, len(pattern))
	}
}
