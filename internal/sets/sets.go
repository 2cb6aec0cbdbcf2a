// Package sets draws the inputs a replay times and checks: the buffer
// sets of docs/protocol.md ("Buffer sets and memory files"). Replay draws
// the seeds (crypto/rand, recorded in the replay document), so no route
// knows its inputs before its visit; the audit regenerates every set from
// the same seeds and recomputes its oracle.
package sets

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/oracle"
)

// Pools.
const (
	Warm = "warm"
	// Novel is visit protocol 4's pool (docs/protocol4-design.md): set g
	// is the inputs of a visit's novel call g (call j of novel sample i is
	// call i*N+j), written into the visit's novel slots while it is frozen.
	Novel = "novel"
)

// DefaultWarm is the warm sets per visit unless replay is told otherwise.
const DefaultWarm = 2

// MinFresh is the config.freshMin a replay records: visit protocol 3
// drew at least that many fresh sets for a case, one per fresh sample
// (docs/results/2026-12-01-fresh-floor). Protocol 4 draws its novel slots
// by [NovelSlots] and takes no fresh samples; replay still records the
// value and the audit checks it, so a document keeps one meaning.
const MinFresh = 3

// Seeds are a replay's seeds: one for warm set 0 of every case (the same
// in every round, so visits can be compared), one per round for the rest.
type Seeds artifacts.InputSeeds

// Draw draws seeds for rounds rounds from the operating system's random source.
func Draw(rounds int) (Seeds, error) {
	b := make([]byte, 8*(rounds+1))
	if _, err := rand.Read(b); err != nil {
		return Seeds{}, fmt.Errorf("draw input seeds: %w", err)
	}
	s := Seeds{Replay: binary.LittleEndian.Uint64(b)}
	for r := range rounds {
		s.Rounds = append(s.Rounds, binary.LittleEndian.Uint64(b[8*(r+1):]))
	}
	return s, nil
}

// Seed is the generator seed of set s of pool in round for the case id:
// the first 8 bytes (little-endian) of SHA-256 over
// "tilepipe-set/1\x00" + id + "\x00" + pool + "\x00" + s + "\x00" + base
// (decimal), with base the replay seed for warm set 0 and the round's seed
// otherwise.
func (sd Seeds) Seed(id, pool string, round, s int) (uint64, error) {
	base := sd.Replay
	if pool != Warm || s != 0 {
		if round < 0 || round >= len(sd.Rounds) {
			return 0, fmt.Errorf("sets: round %d: the replay drew seeds for %d rounds", round, len(sd.Rounds))
		}
		base = sd.Rounds[round]
	}
	h := sha256.Sum256(fmt.Appendf(nil, "tilepipe-set/1\x00%s\x00%s\x00%d\x00%d", id, pool, s, base))
	return binary.LittleEndian.Uint64(h[:8]), nil
}

// NovelBytes bounds the bytes (inputs and outputs) of one novel sample's
// sets, MaxNovel their number: a sample of more calls than that is cut to
// as many calls as there are slots.
const (
	NovelBytes = 8 << 20
	MaxNovel   = 1 << 15
)

// NovelSlots is how many novel sets one sample of a case holds: as many as
// NovelBytes holds, at least 1, at most MaxNovel.
func NovelSlots(sig []oracle.Param) int {
	n := 0
	for _, p := range sig {
		n += p.Bytes()
	}
	return max(1, min(MaxNovel, NovelBytes/max(n, 1)))
}

// Set is one buffer set's inputs and, once asked for, their oracle.
type Set struct {
	Case   oracle.Case // the case with this set's seed
	Inputs []oracle.Tensor
	exp    []oracle.Expected
}

// NewSet generates the set's inputs.
func NewSet(c oracle.Case, seed uint64) (*Set, error) {
	c.Seed = seed
	in, err := oracle.Generate(c)
	if err != nil {
		return nil, err
	}
	return &Set{Case: c, Inputs: in}, nil
}

// Expected is the set's FP64 reference and bounds, computed once.
func (s *Set) Expected() ([]oracle.Expected, error) {
	if s.exp != nil {
		return s.exp, nil
	}
	exp, err := oracle.Reference(s.Case, s.Inputs)
	if err != nil {
		return nil, err
	}
	s.exp = exp
	return exp, nil
}

// Pool generates the sets of one pool of a case in a round.
func (sd Seeds) Pool(c oracle.Case, pool string, round, n int) ([]*Set, error) {
	out := make([]*Set, n)
	for s := range n {
		seed, err := sd.Seed(c.ID, pool, round, s)
		if err != nil {
			return nil, err
		}
		if out[s], err = NewSet(c, seed); err != nil {
			return nil, fmt.Errorf("case %s %s set %d: %w", c.ID, pool, s, err)
		}
	}
	return out, nil
}

// Judge compares one set's outputs (raw storage bytes, one per output
// param in signature order) with the set's oracle.
func (s *Set) Judge(outputs []oracle.Param, raw [][]byte) (oracle.Verdict, error) {
	if len(raw) != len(outputs) {
		return oracle.Verdict{}, fmt.Errorf("sets: %d outputs, want %d", len(raw), len(outputs))
	}
	var got []oracle.Tensor
	for i, p := range outputs {
		if len(raw[i]) != p.Bytes() {
			return oracle.Verdict{}, fmt.Errorf("sets: output %s: %d bytes, want %d", p.Name, len(raw[i]), p.Bytes())
		}
		t, err := oracle.Decode(p.Dtype, raw[i])
		if err != nil {
			return oracle.Verdict{}, err
		}
		got = append(got, t)
	}
	exp, err := s.Expected()
	if err != nil {
		return oracle.Verdict{}, err
	}
	return oracle.Compare(s.Case, exp, got), nil
}

// Outputs are the output params of a signature, in order.
func Outputs(sig []oracle.Param) []oracle.Param {
	var out []oracle.Param
	for _, p := range sig {
		if p.Role == "output" {
			out = append(out, p)
		}
	}
	return out
}

// Perturb is the glibc allocator fill byte (MALLOC_PERTURB_) of every visit
// in round: consecutive rounds get consecutive bytes in 1..255, so two
// visits of a (case, route) never run with the same fill (up to 255
// rounds), and a kernel that reads memory it never wrote gives different
// outputs for warm set 0.
func (sd Seeds) Perturb(round int) int {
	return 1 + int((sd.Replay%255+uint64(round))%255)
}
