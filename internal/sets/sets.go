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
	"github.com/tilepipe/tilepipe/internal/floors"
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
// by [Rule.Slots] and takes no fresh samples; replay still records the
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

// Rule is how replay sizes a visit's novel samples and the calls of them
// it judges in full (ReplayConfig.NovelRule, docs/protocol.md "Novel
// samples"). A replay records the rule it used, and the audit holds every
// visit to the rule its replay recorded, so checkpoints made under an
// earlier rule still audit.
type Rule int

const (
	// Rule1 (novelRule absent: replays made before rule 2): every
	// device's slots hold NovelBytes of sets; a visit judges NovelChecks
	// of its novel calls.
	Rule1 Rule = 1
	// Rule2: a CUDA case's slots hold GPUNovelBytes of sets (a CPU's still
	// NovelBytes), and a visit judges at most as many novel calls as
	// CheckBytes of outputs and CheckWork of oracle work hold (at least
	// one a sample), and at most NovelChecks.
	Rule2 Rule = 2
	// Rule3: Rule2's slots and judged calls, and a CUDA case's novel
	// slots staged by replay's monitor (docs/gpu-clock.md, "The
	// stager"): one fresh device allocation a sample, uploaded while the
	// visit is frozen and checked after it, so the time of every GPU
	// novel sample is replay's own span ([Rule.Staged]).
	Rule3 Rule = 3
	// CurrentRule is the rule replay uses.
	CurrentRule = Rule3
)

// RuleOf is the rule of a replay that recorded config.novelRule n: 0
// (absent) is Rule1; anything but 0, 2 and 3 is refused.
func RuleOf(n int) (Rule, error) {
	switch n {
	case 0:
		return Rule1, nil
	case int(Rule2), int(Rule3):
		return Rule(n), nil
	}
	return 0, fmt.Errorf("config.novelRule %d: want %d or %d (or absent, in a replay made before rule 2)", n, Rule2, Rule3)
}

// Staged says whether a visit of a case on device has its novel slots
// staged by replay's monitor, and so its novel samples timed by replay's
// span (Rule3, a CUDA case).
func (r Rule) Staged(device string) bool { return r >= Rule3 && device == oracle.DeviceCUDA }

// The bounds of the rules.
const (
	// NovelBytes bounds the bytes (inputs and outputs) of one novel
	// sample's sets, sized for a CPU's last-level cache; MaxNovel their
	// number. A sample of more calls than that is cut to as many calls as
	// there are slots.
	NovelBytes = 8 << 20
	MaxNovel   = 1 << 15
	// GPUNovelBytes is Rule2's bound for a CUDA case: its slots live in
	// device memory and are copied outside the CUDA events, and a sample
	// needs enough calls that the launch's fixed cost (host time to the
	// first kernel, the synchronisation before the second event) is a
	// small share of it (docs/results/2026-12-04-gpu-slots).
	GPUNovelBytes = 256 << 20
	// NovelChecks is the most novel calls a visit judges in full against
	// the oracle, spread evenly over its samples and drawn after each
	// sample (every call where the samples have fewer). A route that
	// fakes a fraction f of its novel calls escapes c checks with
	// probability at most e^(-f·c) (docs/threat-model.md, "Each call's own
	// output").
	NovelChecks = 700
	// CheckBytes and CheckWork bound a visit's judged calls under Rule2:
	// their outputs, which the replay stores, and their oracle work
	// ([OracleWork]), which replay does in FP64 and the audit again.
	CheckBytes = 64 << 20
	CheckWork  = 2e10
)

// OracleWork models what judging one call of case c costs the FP64
// oracle: the matrix work the op cannot avoid (floors.Flops) and 256 per
// element of its signature (the reference, its bound and the comparison
// touch every element, some ops with an exp or a log each). Measured on
// this project's 2-core VM, one unit is 0.05 to 2 ns (gemm 1024³: 2.1e9
// flops, 0.12 s; cross_entropy 1024×8192: 8.4e6 elements, 1.1 s).
func OracleWork(c oracle.Case, sig []oracle.Param) float64 {
	n := 0
	for _, p := range sig {
		n += p.Elems()
	}
	return floors.Flops(c) + 256*float64(n)
}

// Slots is how many novel sets one sample of a case on device holds: as
// many as the rule's bytes for the device hold, at least 1, at most
// MaxNovel.
func (r Rule) Slots(device string, sig []oracle.Param) int {
	budget := NovelBytes
	if r >= Rule2 && device == oracle.DeviceCUDA {
		budget = GPUNovelBytes
	}
	n := 0
	for _, p := range sig {
		n += p.Bytes()
	}
	return max(1, min(MaxNovel, budget/max(n, 1)))
}

// Checks is the most novel calls of a visit of case c (signature sig) the
// rule judges in full; visit.ChecksPerSample spreads them over the
// samples, at least one a sample.
func (r Rule) Checks(c oracle.Case, sig []oracle.Param) int64 {
	limit := int64(NovelChecks)
	if r < Rule2 {
		return limit
	}
	out := 0
	for _, p := range Outputs(sig) {
		out += p.Bytes()
	}
	limit = min(limit, int64(CheckBytes/max(out, 1)))
	if w := OracleWork(c, sig); w > 0 {
		limit = min(limit, int64(CheckWork/w))
	}
	return max(1, limit)
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
		if p.Role == oracle.RoleOutput {
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
