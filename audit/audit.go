package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/artifacts/sign"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/internal/adaptive"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/internal/record"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/internal/shard"
	"github.com/tilepipe/tilepipe/oracle"
	"github.com/tilepipe/tilepipe/stats"
)

// Check outcomes.
const (
	Passed = "PASSED"
	Warned = "WARNED"
	Failed = "FAILED"
)

// Config names the three stages to audit.
type Config struct {
	Capture, Prepared, Replay string
	// Expect, when set, is the replay manifest digest the reviewer received
	// out of band (what tilepipe replay printed): the audit is pinned to
	// it, and another manifest fails. Without it, a checkpoint re-hashed
	// consistently from end to end cannot be told from the one that was
	// sent.
	Expect string
	// Trust are the public keys the reviewer trusts: with any, every
	// receipt must be signed by one of them (the signatures check).
	Trust    []sign.Public
	Progress *progress.Reporter
}

// Check is one audit finding with its evidence.
type Check struct {
	Name     string   `json:"name"`
	Status   string   `json:"status"`
	Summary  string   `json:"summary"`
	Evidence []string `json:"evidence,omitempty"`
}

// Report is the audit predicate. Its verdict is about the checkpoint:
// "pass" when every digest, link and recomputation holds (Integrity
// "intact"). Claims are about rows: a row's claim is supported only when
// the checkpoint is intact and every visit of the row, and of its
// baseline row, passed every check; only a supported row publishes a ratio.
type Report struct {
	Verdict   string            `json:"verdict"`   // pass or fail: the checkpoint's integrity
	Integrity string            `json:"integrity"` // intact or broken
	Claims    Claims            `json:"claims"`
	Stages    map[string]string `json:"stages"` // stage -> manifest digest
	// Pinned: the audit compared the replay manifest with Expected, the
	// digest given with --expect (the "pin" check); without it a
	// consistent re-hash of the whole checkpoint passes.
	Pinned   bool   `json:"pinned"`
	Expected string `json:"expected,omitempty"`
	// Signed says whether the receipts were signed and by whom: Unsigned,
	// "signed by trusted key ID", or signed but not verified (no --trust).
	Signed string `json:"signed"`
	// FailedVisits are every visit that failed, with its reason.
	FailedVisits []FailedVisit  `json:"failedVisits"`
	Checks       []Check        `json:"checks"`
	Rows         []Row          `json:"rows"` // every (case, route) row of the replay, with the audit's marks
	Tool         artifacts.Tool `json:"tool"`
	Started      time.Time      `json:"startedOn"`
	Finished     time.Time      `json:"finishedOn"`
	// replay is the replay manifest's descriptor, the audit stage's
	// subject (WriteStage).
	replay ocispec.Descriptor
}

// Claims counts the rows whose claim the audit supports.
type Claims struct {
	Supported   int `json:"supported"`
	Unsupported int `json:"unsupported"`
}

// FailedVisit is one visit that did not pass.
type FailedVisit struct {
	Visit  int    `json:"visit"`
	Round  int    `json:"round"`
	Case   string `json:"case"`
	Route  string `json:"route"`
	Reason string `json:"reason"`
}

type auditor struct {
	cap, prep, rep *artifacts.Stage
	cdoc           artifacts.CaptureDoc
	pdoc           artifacts.PreparedDoc
	rdoc           artifacts.ReplayDoc
	checks         []Check
	rows           *visitRows // passed visits' sample tables, read once
	progress       *progress.Reporter
	expected       map[string][]oracle.Expected
	capVerified    map[artifacts.Digest]bool
	prepVerified   map[artifacts.Digest]bool
	// scope follows every check's name: " (shard I/N)" in the audit of a
	// shard of a merged replay (merged.go), else "".
	scope string
	// shardBlobs are, in the audit of a merged replay, the shard products
	// its receipt may name as consumed (the shards' manifests and sample
	// tables).
	shardBlobs map[artifacts.Digest]bool
}

// maxEvidence bounds the evidence lines kept per check.
const maxEvidence = 20

func (a *auditor) add(name string, problems []string, warnings []string, summary string) {
	c := Check{Name: name + a.scope, Status: Passed, Summary: summary}
	switch {
	case len(problems) > 0:
		c.Status, c.Evidence = Failed, problems
	case len(warnings) > 0:
		c.Status, c.Evidence = Warned, warnings
	}
	if len(c.Evidence) > maxEvidence {
		n := len(c.Evidence)
		c.Evidence = append(c.Evidence[:maxEvidence:maxEvidence], fmt.Sprintf("... and %d more", n-maxEvidence))
	}
	a.checks = append(a.checks, c)
	a.progress.Printf("audit: %s %s: %s", c.Status, c.Name, summary)
}

// Run audits the chain capture -> prepared -> replay. Findings are results;
// the error is for "could not audit at all".
func Run(ctx context.Context, cfg Config) (*Report, error) {
	rep := &Report{Stages: map[string]string{}, Tool: artifacts.ToolInfo(), Started: time.Now().UTC()}
	if cfg.Expect != "" {
		d, err := artifacts.ParseDigest(cfg.Expect)
		if err != nil {
			return nil, fmt.Errorf("--expect %q: want the replay manifest digest, sha256:<64 hex>: %w", cfg.Expect, err)
		}
		rep.Pinned, rep.Expected = true, string(d)
	}
	a := &auditor{progress: cfg.Progress, capVerified: map[artifacts.Digest]bool{}, prepVerified: map[artifacts.Digest]bool{}}
	opened := a.openStages(cfg, rep)
	if rep.Pinned {
		a.add("pin", pin(rep.Expected, rep.Stages[artifacts.ReplayType]), nil, "the replay manifest is the one given with --expect, "+rep.Expected)
	}
	if !opened {
		return a.finish(rep), nil
	}
	rep.Signed = a.signatures(cfg.Trust)
	if a.rdoc.Merge != nil {
		a.merged(cfg, rep)
		return a.finish(rep), nil
	}
	a.chain()
	a.cohort()
	a.routes()
	a.cubinChain()
	a.inputs()
	a.oracle()
	a.outputs()
	a.summaries()
	a.records()
	a.journal()
	a.results()
	a.stopping()
	a.balance()
	a.timeWindows()
	a.floors()
	flags := a.telemetry()
	rep.Rows = a.containment()
	for i, r := range rep.Rows {
		rep.Rows[i].Marks = append(rep.Rows[i].Marks, flags[r.Pair()]...)
	}
	return a.finish(rep), nil
}

func (a *auditor) finish(rep *Report) *Report {
	rep.Checks = a.checks
	rep.Verdict, rep.Integrity = "pass", "intact"
	for _, c := range a.checks {
		if c.Status == Failed {
			rep.Verdict, rep.Integrity = "fail", "broken"
		}
	}
	rep.FailedVisits = []FailedVisit{}
	for _, v := range a.rdoc.Visits {
		if v.Status != artifacts.StatusPassed {
			rep.FailedVisits = append(rep.FailedVisits, FailedVisit{Visit: v.Index, Round: v.Round, Case: v.Case, Route: v.Route, Reason: v.Reason})
		}
	}
	a.claims(rep)
	rep.Finished = time.Now().UTC()
	return rep
}

// openStages re-hashes every blob of the three stages.
func (a *auditor) openStages(cfg Config, rep *Report) bool {
	var problems []string
	n := 0
	open := func(dir, typ string, into **artifacts.Stage, doc any, seen map[artifacts.Digest]bool) {
		st, err := artifacts.OpenStage(dir, typ, func(_ string, d ocispec.Descriptor) {
			n++
			if seen != nil {
				seen[d.Digest] = true
			}
		})
		if err != nil {
			problems = append(problems, err.Error())
			return
		}
		if err := st.ReadDoc(doc); err != nil {
			problems = append(problems, err.Error())
			return
		}
		*into = st
		rep.Stages[typ] = string(st.Descriptor.Digest)
		if typ == artifacts.ReplayType {
			rep.replay = ocispec.Descriptor{MediaType: st.Descriptor.MediaType, Digest: st.Descriptor.Digest, Size: st.Descriptor.Size, ArtifactType: st.Descriptor.ArtifactType}
		}
	}
	open(cfg.Capture, artifacts.CaptureType, &a.cap, &a.cdoc, a.capVerified)
	open(cfg.Prepared, artifacts.PreparedType, &a.prep, &a.pdoc, a.prepVerified)
	open(cfg.Replay, artifacts.ReplayType, &a.rep, &a.rdoc, nil)
	a.add("blobs", problems, nil, fmt.Sprintf("re-hashed %d blobs (manifests, receipts, layers) of 3 stages", n))
	return len(problems) == 0
}

// chain checks subjects, document links, receipts and consumption.
func (a *auditor) chain() {
	var p []string
	if s := a.prep.Manifest.Subject; s == nil || s.Digest != a.cap.Descriptor.Digest {
		p = append(p, fmt.Sprintf("prepared manifest subject: want capture manifest %s", a.cap.Descriptor.Digest))
	}
	if s := a.rep.Manifest.Subject; s == nil || s.Digest != a.prep.Descriptor.Digest {
		p = append(p, fmt.Sprintf("replay manifest subject: want prepared manifest %s", a.prep.Descriptor.Digest))
	}
	if a.pdoc.Capture != a.cap.Descriptor.Digest {
		p = append(p, fmt.Sprintf("prepared %s capture: %s, want %s", artifacts.DocTitle, a.pdoc.Capture, a.cap.Descriptor.Digest))
	}
	if a.rdoc.Prepared != a.prep.Descriptor.Digest || a.rdoc.Capture != a.cap.Descriptor.Digest {
		p = append(p, fmt.Sprintf("replay %s: prepared %s capture %s, want %s and %s", artifacts.DocTitle, a.rdoc.Prepared, a.rdoc.Capture, a.prep.Descriptor.Digest, a.cap.Descriptor.Digest))
	}
	for _, st := range []struct {
		name string
		s    *artifacts.Stage
		pred *artifacts.Stage
		also *artifacts.Stage
	}{{"capture", a.cap, nil, nil}, {"prepare", a.prep, a.cap, nil}, {"replay", a.rep, a.prep, a.cap}} {
		r, err := st.s.Receipt()
		if err != nil {
			p = append(p, fmt.Sprintf("%s receipt: %v", st.name, err))
			continue
		}
		if r.Type != artifacts.StatementType || r.PredicateType != artifacts.ReceiptPredicate || r.Predicate.Stage != st.name {
			p = append(p, fmt.Sprintf("%s receipt: _type %q predicateType %q stage %q", st.name, r.Type, r.PredicateType, r.Predicate.Stage))
		}
		subj := map[string]string{}
		for _, s := range r.Subject {
			subj[s.Name] = s.Digest["sha256"]
		}
		for title, l := range st.s.Layers {
			if subj[title] != l.Digest.Encoded() {
				p = append(p, fmt.Sprintf("%s receipt: subject %q is %q, manifest layer has %s", st.name, title, subj[title], l.Digest))
			}
		}
		if len(subj) != len(st.s.Layers) {
			p = append(p, fmt.Sprintf("%s receipt: %d subjects, manifest has %d layers", st.name, len(subj), len(st.s.Layers)))
		}
		if st.pred == nil {
			continue
		}
		consumed := map[artifacts.Digest]time.Time{}
		allowed := map[artifacts.Digest]bool{}
		if st.s == a.rep {
			for d := range a.shardBlobs {
				allowed[d] = true
			}
		}
		for _, pst := range []*artifacts.Stage{st.pred, st.also} {
			if pst != nil {
				allowed[pst.Descriptor.Digest], allowed[pst.Manifest.Config.Digest] = true, true
				for _, l := range pst.Layers {
					allowed[l.Digest] = true
				}
			}
		}
		for _, d := range r.Predicate.ResolvedDependencies {
			consumed[d.Digest] = d.VerifiedAt
			if !allowed[d.Digest] {
				p = append(p, fmt.Sprintf("%s receipt: consumed %s (%s), which no predecessor stage produced", st.name, d.Name, artifacts.Short(d.Digest)))
			}
		}
		for _, pst := range []*artifacts.Stage{st.pred, st.also} {
			if pst == nil {
				continue
			}
			for title, l := range pst.Layers {
				if _, ok := consumed[l.Digest]; !ok {
					p = append(p, fmt.Sprintf("%s receipt: consumed blob %s (%s) was not recorded as verified", st.name, title, artifacts.Short(l.Digest)))
				}
			}
			if _, ok := consumed[pst.Descriptor.Digest]; !ok {
				p = append(p, fmt.Sprintf("%s receipt: predecessor manifest %s was not recorded as verified", st.name, artifacts.Short(pst.Descriptor.Digest)))
			}
		}
	}
	a.add("chain", p, nil, "manifest subjects, document links, receipt subjects and consumed digests")
}

// inputs regenerates every case's inputs and compares them, byte for byte,
// with the capture packet and the prepared raw inputs.
func (a *auditor) inputs() {
	var p []string
	raw := map[string][]artifacts.TensorRef{}
	for _, e := range a.pdoc.Entries {
		if len(e.Inputs) > 0 {
			raw[e.Case] = e.Inputs
			for _, other := range a.pdoc.Entries {
				if other.Case == e.Case && len(other.Inputs) > 0 && !slices.EqualFunc(other.Inputs, e.Inputs, func(x, y artifacts.TensorRef) bool { return x.Digest == y.Digest }) {
					p = append(p, fmt.Sprintf("case %s: routes %s and %s were prepared with different inputs", e.Case, e.Route, other.Route))
				}
			}
		}
	}
	n := 0
	for _, c := range a.cdoc.Cases {
		gen, err := oracle.Generate(c.Case)
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
			if err := a.sameTensor(a.cap, ref, want); err != nil {
				p = append(p, fmt.Sprintf("case %s input %s: %v", c.Case.ID, ref.Name, err))
			}
			if r, ok := raw[c.Case.ID]; ok {
				b, err := a.prep.Store.ReadVerified(r[i].Digest, "raw input", int64(len(want))+1)
				if err != nil || !bytes.Equal(b, want) {
					p = append(p, fmt.Sprintf("case %s prepared raw input %s (%s): bytes differ from the regenerated input (%v)", c.Case.ID, r[i].Name, artifacts.Short(r[i].Digest), err))
				}
			}
			n++
		}
	}
	a.add("inputs", p, nil, fmt.Sprintf("regenerated %d input tensors from generator and seed; capture and prepared bytes match", n))
}

func (a *auditor) sameTensor(st *artifacts.Stage, ref artifacts.TensorRef, want []byte) error {
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

// oracle recomputes the FP64 reference and bound of every case and compares
// them with the capture packet: bit for bit, except the references and
// bounds of the gemm family, which come from a BLAS whose summation order
// differs between builds (gonum in a CGO_ENABLED=0 build, OpenBLAS's
// CPU-chosen kernels in a cgo one) and are accepted within the FP64
// rounding of two evaluations (oracle.SamePacket; docs/oracle.md,
// "Recomputation on another BLAS").
func (a *auditor) oracle() {
	var p []string
	a.expected = map[string][]oracle.Expected{}
	sameVersion := a.cdoc.Oracle == oracle.Version
	if !sameVersion {
		// The outputs check still judges the stored outputs with this
		// auditor's oracle; only the packet bytes are not comparable.
		p = append(p, fmt.Sprintf("capture: oracle %q, this auditor computes %q: references and bounds are compared only within one oracle version; audit with the tilepipe that made the capture", a.cdoc.Oracle, oracle.Version))
	}
	// read returns a packet tensor's bytes, from a layer of the capture
	// with the shape and dtype its document gives.
	read := func(ref artifacts.TensorRef) ([]byte, error) {
		if !a.cap.Has(ref.Digest) {
			return nil, fmt.Errorf("blob %s is not a layer of its stage", artifacts.Short(ref.Digest))
		}
		t, err := tensor.ReadFile(a.cap.Store.Path(ref.Digest), nil)
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
	word := func(b []byte, i int) uint64 {
		var w uint64
		for j := 7; j >= 0; j-- {
			w = w<<8 | uint64(b[8*i+j])
		}
		return w
	}
	exact, rounded := 0, 0
	for _, c := range a.cdoc.Cases {
		in, err := oracle.Generate(c.Case)
		if err != nil {
			p = append(p, fmt.Sprintf("case %s: %v", c.Case.ID, err))
			continue
		}
		exp, err := oracle.Reference(c.Case, in)
		if err != nil {
			p = append(p, fmt.Sprintf("case %s: %v", c.Case.ID, err))
			continue
		}
		a.expected[c.Case.ID] = exp
		if !sameVersion {
			continue
		}
		if len(c.Packet.Expected) != len(exp) {
			p = append(p, fmt.Sprintf("case %s: %d expected tensors, the oracle makes %d", c.Case.ID, len(c.Packet.Expected), len(exp)))
			continue
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
			b, err := read(ref)
			if err == nil && len(b) != len(want) {
				err = fmt.Errorf("%d bytes, the recomputed tensor has %d", len(b), len(want))
			}
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
			b, err := read(ref)
			if err == nil && len(b) != len(want) {
				err = fmt.Errorf("%d bytes, the recomputed tensor has %d", len(b), len(want))
			}
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
			exact++
		default:
			err := oracle.SamePacket(c.Case, in, stored, exp)
			pe, ok := err.(*oracle.PacketError)
			switch {
			case err == nil:
				rounded++
			case ok:
				// Name the byte where the element first differs, as a
				// byte comparison of the tensors would.
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
				p = append(p, fmt.Sprintf("case %s %s %s: stored bytes differ from the recomputed ones at byte %d: %s", c.Case.ID, pe.Tensor, pe.Output, 8*pe.Index+k, pe.Detail()))
			default:
				p = append(p, err.Error())
			}
		}
	}
	a.add("oracle", p, nil, fmt.Sprintf("recomputed the FP64 reference and bound of %d cases: %d packets match bit for bit, %d gemm-family packets within the FP64 rounding of two BLAS evaluations (2·γ_K(2^-53)·s per element)", len(a.cdoc.Cases), exact, rounded))
}

// novelSets regenerates the novel sets of the checked calls of a visit of
// case c in round, with their oracles, on every core.
func novelSets(seeds sets.Seeds, c oracle.Case, round int, checked []int64) ([]*sets.Set, error) {
	out := make([]*sets.Set, len(checked))
	var eg errgroup.Group
	eg.SetLimit(runtime.NumCPU())
	for i, g := range checked {
		seed, err := seeds.Seed(c.ID, sets.Novel, round, int(g))
		if err != nil {
			return nil, err
		}
		eg.Go(func() error {
			s, err := sets.NewSet(c, seed)
			if err != nil {
				return fmt.Errorf("case %s novel set %d: %w", c.ID, g, err)
			}
			if _, err := s.Expected(); err != nil {
				return fmt.Errorf("case %s novel set %d: %w", c.ID, g, err)
			}
			out[i] = s
			return nil
		})
	}
	return out, eg.Wait()
}

// outputs regenerates every buffer set a passed visit was timed on from the
// replay's recorded seeds, recomputes its oracle and re-checks every stored
// output in full: every warm set's and every checked novel call's. It also
// checks that warm set 0 (the same inputs in every visit) gave the same
// bytes in every visit of a (case, route).
func (a *auditor) outputs() {
	var p []string
	cases := map[string]*artifacts.CapturedCase{}
	for i := range a.cdoc.Cases {
		cases[a.cdoc.Cases[i].Case.ID] = &a.cdoc.Cases[i]
	}
	seeds := sets.Seeds(a.rdoc.Inputs)
	if len(seeds.Rounds) != a.rdoc.Config.PlannedRounds() {
		a.add("outputs", []string{fmt.Sprintf("replay inputs: seeds for %d rounds, config says %d", len(seeds.Rounds), a.rdoc.Config.PlannedRounds())}, nil, "")
		return
	}
	if m := a.rdoc.Config.FreshMin; m != 0 && m != sets.MinFresh {
		a.add("outputs", []string{fmt.Sprintf("config.freshMin %d: want %d (or absent, in a replay made before it)", m, sets.MinFresh)}, nil, "")
		return
	}
	rule, err := sets.RuleOf(a.rdoc.Config.NovelRule)
	if err != nil {
		a.add("outputs", []string{err.Error()}, nil, "")
		return
	}
	// Visit a (round, case) at a time, so its sets are generated once.
	var order []artifacts.VisitResult
	for _, v := range a.rdoc.Visits {
		if v.Status == artifacts.StatusPassed {
			order = append(order, v)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].Round != order[j].Round {
			return order[i].Round < order[j].Round
		}
		return order[i].Case < order[j].Case
	})
	type pools struct {
		round int
		id    string
		warm  []*sets.Set
	}
	var cur pools
	set0 := map[artifacts.Pair]artifacts.VisitResult{}
	n, nsets, worst := 0, 0, 0.0
	for _, v := range order {
		c := cases[v.Case]
		if c == nil {
			p = append(p, fmt.Sprintf("visit %d: case %s is not in the capture", v.Index, v.Case))
			continue
		}
		outs := sets.Outputs(c.Signature)
		switch { // visit protocol 4 (record.Visit checks the rest)
		case v.MallocPerturb != seeds.Perturb(v.Round):
			p = append(p, fmt.Sprintf("visit %d: allocator fill %d, the replay's seeds give %d for round %d", v.Index, v.MallocPerturb, seeds.Perturb(v.Round), v.Round))
			continue
		case v.Sets != a.rdoc.Config.Sets:
			p = append(p, fmt.Sprintf("visit %d: %d warm sets, config says %d", v.Index, v.Sets, a.rdoc.Config.Sets))
			continue
		case v.Novel == nil:
			p = append(p, fmt.Sprintf("visit %d: no novel record (every visit takes novel samples)", v.Index))
			continue
		case v.FreshSets != rule.Slots(c.Case.DeviceOf(), c.Signature):
			p = append(p, fmt.Sprintf("visit %d: %d novel slots, want %d for case %s under novel rule %d", v.Index, v.FreshSets, rule.Slots(c.Case.DeviceOf(), c.Signature), v.Case, rule))
			continue
		case len(v.Outputs) != len(outs) || len(v.Novel.Outputs) != len(outs):
			p = append(p, fmt.Sprintf("visit %d: %d warm and %d novel output tensors, want %d of each", v.Index, len(v.Outputs), len(v.Novel.Outputs), len(outs)))
			continue
		}
		if cur.round != v.Round || cur.id != v.Case || len(cur.warm) != v.Sets {
			warm, err := seeds.Pool(c.Case, sets.Warm, v.Round, v.Sets)
			if err != nil {
				p = append(p, fmt.Sprintf("visit %d: %v", v.Index, err))
				continue
			}
			cur = pools{round: v.Round, id: v.Case, warm: warm}
		}
		// The visit's checked calls' sets, its own.
		checked, err := novelSets(seeds, c.Case, v.Round, v.Novel.Checked)
		if err != nil {
			p = append(p, fmt.Sprintf("visit %d: %v", v.Index, err))
			continue
		}
		// Each stored tensor holds one pool's sets: [sets, shape...].
		read := func(refs []artifacts.TensorRef, count int) ([][]byte, error) {
			var out [][]byte
			for i, ref := range refs {
				want := append([]int{count}, outs[i].Shape...)
				if ref.Name != outs[i].Name || ref.Dtype != outs[i].Dtype || !slices.Equal(ref.Shape, want) {
					return nil, fmt.Errorf("output %s %s %v, want %s %s %v", ref.Name, ref.Dtype, ref.Shape, outs[i].Name, outs[i].Dtype, want)
				}
				if !a.rep.Has(ref.Digest) {
					return nil, fmt.Errorf("output %s: blob %s is not a layer of the replay", ref.Name, artifacts.Short(ref.Digest))
				}
				t, err := tensor.ReadFile(a.rep.Store.Path(ref.Digest), nil)
				if err != nil {
					return nil, fmt.Errorf("output %s: %v", ref.Name, err)
				}
				raw := slices.Clone(t.Bytes())
				t.Release()
				if len(raw) != count*outs[i].Bytes() {
					return nil, fmt.Errorf("output %s: %d bytes, want %d", ref.Name, len(raw), count*outs[i].Bytes())
				}
				out = append(out, raw)
			}
			return out, nil
		}
		vworst := 0.0 // the visit's worst error/bound over every set judged
		judge := func(pool string, all []*sets.Set, refs []artifacts.TensorRef, count int) bool {
			raw, err := read(refs, count)
			if err != nil {
				p = append(p, fmt.Sprintf("visit %d %s: %v", v.Index, pool, err))
				return false
			}
			for s := range count {
				one := make([][]byte, len(outs))
				for i := range outs {
					one[i] = raw[i][s*outs[i].Bytes() : (s+1)*outs[i].Bytes()]
				}
				vd, err := all[s].Judge(outs, one)
				if err != nil {
					p = append(p, fmt.Sprintf("visit %d %s set %d: %v", v.Index, pool, s, err))
					return false
				}
				worst, vworst = math.Max(worst, vd.MaxRatio), math.Max(vworst, vd.MaxRatio)
				nsets++
				if !vd.Pass {
					what := fmt.Sprintf("%s set %d", pool, s)
					if pool == sets.Novel {
						g := v.Novel.Checked[s]
						what = fmt.Sprintf("novel sample %d call %d", g/v.Novel.Calls, g%v.Novel.Calls)
					}
					p = append(p, fmt.Sprintf("visit %d (%s %s) passed in replay but %s fails the recomputed oracle: %s", v.Index, v.Case, v.Route, what, vd.Reason))
					return false
				}
			}
			if pool == sets.Warm {
				h := sha256.New()
				for i := range outs {
					h.Write(raw[i][:outs[i].Bytes()])
				}
				if got := hex.EncodeToString(h.Sum(nil)); got != v.Set0 {
					p = append(p, fmt.Sprintf("visit %d: set0 %s, its stored set 0 outputs hash to %s", v.Index, v.Set0, got))
					return false
				}
			}
			return true
		}
		if !judge(sets.Warm, cur.warm, v.Outputs, v.Sets) {
			continue
		}
		if !judge(sets.Novel, checked, v.Novel.Outputs, len(v.Novel.Checked)) {
			continue
		}
		p = append(p, maxErrRatioAgrees(v, vworst)...)
		k := v.Pair()
		if first, ok := set0[k]; !ok {
			set0[k] = v
		} else if first.Set0 != v.Set0 {
			p = append(p, fmt.Sprintf("nondeterministic: %s/%s: visits %d and %d passed with different warm set 0 outputs (the same inputs)", v.Case, v.Route, first.Index, v.Index))
		}
		n++
	}
	summary := fmt.Sprintf("regenerated the inputs of every buffer set from the replay's seeds and re-checked every element of %d sets' outputs in %d passed visits; worst error/bound %.3g; warm set 0 identical across the visits of each (case, route)", nsets, n, worst)
	if nv := a.validations(&p); nv > 0 {
		summary += fmt.Sprintf("; and of %d validating builds' outputs at capture", nv)
	}
	a.add("outputs", p, nil, summary)
}

// maxErrRatioAgrees compares a passed visit's recorded maxErrRatio with
// the worst error/bound ratio the recomputed oracle gives its stored
// outputs (worst): replay takes the same maximum over the same sets, warm
// and fresh.
func maxErrRatioAgrees(v artifacts.VisitResult, worst float64) []string {
	// The references and bounds of the gemm family may come from another
	// BLAS than replay's (oracle.SamePacket): error/bound then moves by up
	// to about 2^-26, which 2^-20 covers; the verdict (error within bound)
	// is recomputed element by element regardless.
	if near(v.MaxErrRatio, worst) || math.Abs(v.MaxErrRatio-worst) <= 0x1p-20 {
		return nil
	}
	return []string{fmt.Sprintf("visit %d: maxErrRatio %g recorded, its stored outputs give %g", v.Index, v.MaxErrRatio, worst)}
}

// validations re-checks the outputs each validating route returned at
// capture against the recomputed oracle; the verdict must be the one
// capture recorded, and a failed one must have failed the build. It
// returns the number of validations checked.
func (a *auditor) validations(p *[]string) int {
	validates := map[string]bool{}
	for _, r := range a.cdoc.Routes {
		validates[r.Name] = r.Validates
	}
	n := 0
	for _, c := range a.cdoc.Cases {
		for _, b := range c.Builds {
			v := b.Validation
			if v == nil {
				if validates[b.Route] && b.Status == artifacts.StatusBuilt {
					*p = append(*p, fmt.Sprintf("case %s route %s: built by a validating route, but capture recorded no validation", c.Case.ID, b.Route))
				}
				continue
			}
			n++
			where := fmt.Sprintf("case %s route %s validation", c.Case.ID, b.Route)
			exp, ok := a.expected[c.Case.ID]
			if !ok {
				*p = append(*p, where+": the case has no recomputed reference")
				continue
			}
			var got []oracle.Tensor
			for _, sp := range c.Signature {
				if sp.Role != oracle.RoleOutput {
					continue
				}
				i := slices.IndexFunc(b.Files, func(f artifacts.FileRef) bool { return f.Role == artifacts.RoleOutput && f.Param == sp.Name })
				if i < 0 {
					*p = append(*p, fmt.Sprintf("%s: no stored output for param %s", where, sp.Name))
					break
				}
				raw, err := a.readCapture(b.Files[i].Digest, int64(sp.Bytes()))
				if err == nil && len(raw) != sp.Bytes() {
					err = fmt.Errorf("%d bytes, want %d", len(raw), sp.Bytes())
				}
				var t oracle.Tensor
				if err == nil {
					t, err = oracle.Decode(sp.Dtype, raw)
				}
				if err != nil {
					*p = append(*p, fmt.Sprintf("%s: output %s: %v", where, sp.Name, err))
					break
				}
				got = append(got, t)
			}
			if len(got) != len(exp) {
				continue
			}
			vd := oracle.Compare(c.Case, exp, got)
			if vd.Pass != v.Pass || vd.Reason != v.Reason || vd.Checked != v.Checked || !near(vd.MaxRatio, v.MaxRatio) {
				*p = append(*p, fmt.Sprintf("%s: capture recorded pass=%t %q (%d elements, worst %g), the recomputed oracle says pass=%t %q (%d elements, worst %g)",
					where, v.Pass, v.Reason, v.Checked, v.MaxRatio, vd.Pass, vd.Reason, vd.Checked, vd.MaxRatio))
			}
			if !v.Pass && (b.Status != artifacts.StatusFailed || b.Reason != "validation: "+v.Reason) {
				*p = append(*p, fmt.Sprintf("%s failed, but the build is %s %q", where, b.Status, b.Reason))
			}
		}
	}
	return n
}

// readCapture reads a capture blob that the audit re-hashed when it opened
// the stage.
// device is the device case id runs on ("cpu" for a case the capture
// does not have: its rows fail elsewhere).
func (a *auditor) device(id string) string {
	if c := a.capturedCase(id); c != nil {
		return c.Case.DeviceOf()
	}
	return oracle.DeviceCPU
}

// capturedCase is the capture's case id, or nil.
func (a *auditor) capturedCase(id string) *artifacts.CapturedCase {
	for i := range a.cdoc.Cases {
		if a.cdoc.Cases[i].Case.ID == id {
			return &a.cdoc.Cases[i]
		}
	}
	return nil
}

func (a *auditor) readCapture(d artifacts.Digest, limit int64) ([]byte, error) {
	if !a.cap.Has(d) {
		return nil, fmt.Errorf("blob %s is not a layer of the capture", artifacts.Short(d))
	}
	return a.cap.Store.ReadVerified(d, "capture output", limit)
}

// summaries recomputes every summary from the raw sample table and the
// per-visit tables.
func (a *auditor) summaries() {
	var p []string
	rows, err := readRows(a.rep, a.rdoc.Samples)
	if err != nil {
		a.add("summaries", []string{err.Error()}, nil, "could not read the sample table")
		return
	}
	// The combined table must be exactly the per-visit tables (each
	// checked against its visit's record in records()).
	var union []samples.Row
	_, vrows, unread := a.passedRows()
	p = append(p, unread...)
	for _, vr := range vrows {
		union = append(union, vr...)
	}
	if !slices.Equal(union, rows) {
		p = append(p, fmt.Sprintf("samples.arrow has %d rows, the passed visits' tables have %d (or differ in content)", len(rows), len(union)))
	}
	a.checkSummaries(rows, p)
}

// checkSummaries recomputes every summary and paired ratio of the document
// from rows, its sample table, and adds the summaries check with the
// problems p found before.
func (a *auditor) checkSummaries(rows []samples.Row, p []string) {
	want := recompute(a.rdoc, rows, a.device, floors.OfSessions(a.rdoc.Sessions))
	for _, e := range a.pdoc.Entries { // the routes check holds each entry's note to its build's
		if w, ok := want[e.Pair()]; ok {
			w.BelowBest = e.BelowBest
			want[e.Pair()] = w
		}
	}
	have := map[artifacts.Pair]artifacts.Summary{}
	for _, s := range a.rdoc.Summary {
		have[s.Pair()] = s
	}
	for k, w := range want {
		h, ok := have[k]
		if !ok {
			p = append(p, fmt.Sprintf("summary %s/%s missing", k.Case, k.Route))
			continue
		}
		for _, f := range []struct {
			name   string
			hv, wv float64
		}{{"medianNs", h.MedianNs, w.MedianNs}, {"minNs", h.MinNs, w.MinNs}, {"maxNs", h.MaxNs, w.MaxNs}, {"q1Ns", h.Q1Ns, w.Q1Ns}, {"q3Ns", h.Q3Ns, w.Q3Ns}, {"channelNs", h.ChannelNs, w.ChannelNs}, {"graphNs", h.GraphNs, w.GraphNs}, {"graphMinNs", h.GraphMinNs, w.GraphMinNs}, {"warmNs", h.WarmNs, w.WarmNs}, {"singleNs", h.SingleNs, w.SingleNs}, {"ratio", h.Ratio, w.Ratio}, {"ratioMin", h.RatioMin, w.RatioMin}, {"ratioMax", h.RatioMax, w.RatioMax}, {"ratioLo", h.RatioLo, w.RatioLo}, {"ratioHi", h.RatioHi, w.RatioHi}, {"precision", h.Precision, w.Precision}} {
			if !near(f.hv, f.wv) {
				p = append(p, fmt.Sprintf("summary %s/%s %s: stored %g, recomputed %g", k.Case, k.Route, f.name, f.hv, f.wv))
			}
		}
		if h.BelowBest != w.BelowBest {
			p = append(p, fmt.Sprintf("summary %s/%s belowBest: stored %q, the prepared entry says %q", k.Case, k.Route, h.BelowBest, w.BelowBest))
		}
		if h.Kind != w.Kind {
			p = append(p, fmt.Sprintf("summary %s/%s kind: stored %q, recomputed %q (a CPU row rests on novel samples, a GPU row on batch samples)", k.Case, k.Route, h.Kind, w.Kind))
		}
		if h.Samples != w.Samples || h.Verdict != w.Verdict || h.Flagged != w.Flagged || h.RatioExcluded != w.RatioExcluded {
			p = append(p, fmt.Sprintf("summary %s/%s: stored samples %d verdict %q flagged %d ratioExcluded %d, recomputed %d %q %d %d", k.Case, k.Route, h.Samples, h.Verdict, h.Flagged, h.RatioExcluded, w.Samples, w.Verdict, w.Flagged, w.RatioExcluded))
		}
	}
	var w []string
	switch l := a.rdoc.Config.Load; l {
	case artifacts.LoadExclude, artifacts.LoadAllow:
	case "":
		n := 0
		for _, v := range a.rdoc.Visits {
			if v.Load != nil && v.Load.Loaded {
				n++
			}
		}
		if n > 0 {
			w = append(w, fmt.Sprintf("%d visits overlapped other load and config.load is absent (a replay made before the load rule): their rounds are kept in the paired ratios", n))
		}
	default:
		p = append(p, fmt.Sprintf("config.load %q: want %q or %q", l, artifacts.LoadExclude, artifacts.LoadAllow))
	}
	if l := a.rdoc.Config.Level; l != 0 && l != artifacts.LevelFor(a.rdoc.Config.Target) {
		p = append(p, fmt.Sprintf("config.level %g: the rule gives %g to a replay of target %g (or absent, in a replay made before it)", l, artifacts.LevelFor(a.rdoc.Config.Target), a.rdoc.Config.Target))
	}
	switch _, err := stats.PairedRatios(a.rdoc.Config.Interval, a.rdoc.Config.IntervalLevel(), nil, 0, 0); {
	case err != nil:
		p = append(p, "config."+err.Error())
	case a.rdoc.Config.Interval == stats.IntervalBootstrap:
		w = append(w, "the paired ratios' intervals are the percentile bootstrap of a replay made before exact intervals (config.interval absent): below about 10 rounds it calls identical binaries different more often than 5% (1 in 8 at 4 rounds, docs/statistics.md)")
	}
	a.add("summaries", p, w, fmt.Sprintf("recomputed %d summaries and paired ratios from %d raw samples", len(want), len(rows)))
}

func near(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func countKind(rows []samples.Row, kind string) int {
	n := 0
	for _, r := range rows {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

func readRows(st *artifacts.Stage, d artifacts.Digest) ([]samples.Row, error) {
	if !st.Has(d) {
		return nil, fmt.Errorf("sample table %s is not a layer of the replay", artifacts.Short(d))
	}
	return samples.ReadFile(st.Store.Path(d), nil)
}

// recompute derives the timing summaries of passed (case, route) pairs
// from raw rows, written independently of replay's code path, judging
// rows by the floors fl as replay did (nil: by none, as an adaptive
// replay's stopping decisions).
func recompute(doc artifacts.ReplayDoc, rows []samples.Row, device func(id string) string, fl map[string]artifacts.CaseFloor) map[artifacts.Pair]artifacts.Summary {
	failed := map[artifacts.Pair]bool{}
	loaded := map[[3]string]bool{} // (case, route, round) left out of ratios
	for _, v := range doc.Visits {
		if v.Status != artifacts.StatusPassed {
			failed[v.Pair()] = true
		}
		if doc.Config.Load == artifacts.LoadExclude && v.Load != nil && v.Load.Loaded {
			loaded[[3]string{v.Case, v.Route, fmt.Sprint(v.Round)}] = true
		}
	}
	all := map[artifacts.Pair][]float64{}
	rounds := map[artifacts.Pair]map[int32][]float64{}
	channel := map[artifacts.Pair][]float64{}
	graph := map[artifacts.Pair][]float64{}
	flagged := map[artifacts.Pair]int{}
	warm, single := map[artifacts.Pair][]float64{}, map[artifacts.Pair][]float64{}
	for _, r := range rows {
		k := artifacts.Pair{Case: r.Case, Route: r.Route}
		if r.Flags != "" && !failed[k] {
			flagged[k]++
		}
		if r.Kind == samples.KindEmpty && !failed[k] {
			channel[k] = append(channel[k], float64(r.TotalNs))
		}
		if r.Kind == samples.KindGraph && !failed[k] {
			graph[k] = append(graph[k], float64(r.TimerNs)/float64(r.Calls)) // a graph sample is GPU-timed
		}
		// A row's claim rests on its novel samples (visit protocol 4); its
		// batch samples are the warm figure. A GPU sample's time is its
		// CUDA-event span (records() checks every row's clock against its
		// case's device).
		ns := r.TotalNs
		if record.Clock(device(r.Case), r.Kind) == samples.ClockCUDA {
			ns = r.TimerNs
		}
		if r.Kind == samples.KindBatch && !failed[k] {
			warm[k] = append(warm[k], float64(ns)/float64(r.Calls))
		}
		if r.Kind == samples.KindSingle && !failed[k] {
			single[k] = append(single[k], float64(ns)/float64(r.Calls))
		}
		if r.Kind != samples.KindNovel || failed[k] {
			continue
		}
		all[k] = append(all[k], float64(ns)/float64(r.Calls))
		if rounds[k] == nil {
			rounds[k] = map[int32][]float64{}
		}
		rounds[k][r.Round] = append(rounds[k][r.Round], float64(ns)/float64(r.Calls))
	}
	// A row whose fastest sample beats its case's floor (fl) failed in
	// replay (replay.Summaries): it keeps its statistics but gets no ratio,
	// and neither does any row it is the baseline of.
	out := map[artifacts.Pair]artifacts.Summary{}
	below := map[artifacts.Pair]bool{}
	for k, xs := range all {
		s := stats.Summarize(xs)
		sum := artifacts.Summary{Case: k.Case, Route: k.Route, Samples: s.N, MedianNs: s.Median, MinNs: s.Min, MaxNs: s.Max, Q1Ns: s.Q1, Q3Ns: s.Q3, Flagged: flagged[k]}
		if len(channel[k]) > 0 {
			sum.ChannelNs = stats.Median(channel[k])
		}
		sum.Kind = samples.KindNovel
		if len(warm[k]) > 0 {
			sum.WarmNs = stats.Median(warm[k])
		}
		if len(single[k]) > 0 && doc.Config.NovelRule >= int(sets.Rule2) {
			sum.SingleNs = stats.Median(single[k])
		}
		if len(graph[k]) > 0 {
			sum.GraphNs, sum.GraphMinNs = stats.Median(graph[k]), slices.Min(graph[k])
		}
		if f, ok := fl[k.Case]; ok {
			below[k] = floors.Below(f, floors.Fastest(sum)) != ""
		}
		out[k] = sum
	}
	for k, sum := range out {
		base := artifacts.Pair{Case: k.Case, Route: doc.Config.Baseline}
		if k.Route != doc.Config.Baseline && all[base] != nil && !below[k] && !below[base] {
			var ids []int
			for rd := range rounds[k] {
				if _, ok := rounds[base][rd]; ok {
					ids = append(ids, int(rd))
				}
			}
			sort.Ints(ids)
			var ratios []float64
			for _, rd := range ids {
				if loaded[[3]string{k.Case, k.Route, fmt.Sprint(rd)}] || loaded[[3]string{base.Case, base.Route, fmt.Sprint(rd)}] {
					sum.RatioExcluded++
					continue
				}
				ratios = append(ratios, stats.Median(rounds[k][int32(rd)])/stats.Median(rounds[base][int32(rd)]))
			}
			if len(ratios) == 0 {
				sum.Verdict = stats.TooFew
				out[k] = sum
				continue
			}
			r, err := stats.PairedRatios(doc.Config.Interval, doc.Config.IntervalLevel(), ratios, doc.Config.Bootstrap, doc.Config.Seed)
			if err != nil {
				r = stats.Ratio{N: len(ratios), Exact: true} // no interval, no verdict; the summaries check names the interval
			}
			sum.Ratio, sum.RatioMin, sum.RatioMax, sum.RatioLo, sum.RatioHi, sum.Verdict = r.Median, r.Min, r.Max, r.Lo, r.Hi, r.Verdict()
			if doc.Config.Target > 0 {
				sum.Precision = adaptive.Precision(r.Median, r.Lo, r.Hi, r.Coverage > 0)
			}
		}
		out[k] = sum
	}
	return out
}

// balance checks that every planned visit happened once and that the route
// orders are balanced: each route equally often at each position and
// immediately before each other route equally often.
func (a *auditor) balance() {
	var p, w []string
	d := a.rdoc
	if len(d.Visits) != len(d.Plan) {
		p = append(p, fmt.Sprintf("%d visits recorded, %d planned", len(d.Visits), len(d.Plan)))
	}
	for i, v := range d.Visits {
		if i >= len(d.Plan) || v.Visit != d.Plan[i] {
			p = append(p, fmt.Sprintf("visit %d does not match plan entry %d", v.Index, i))
			break
		}
	}
	// Every prepared pair is planned in every round of its case: every
	// round, or in an adaptive replay every round before its case stopped.
	// A shard plans its own cases (internal/shard), a replay every case.
	var all []string
	for _, c := range a.cdoc.Cases {
		all = append(all, c.Case.ID)
	}
	cases := shard.Cases(all, d.Config.Shard)
	if !slices.Equal(d.Cases, cases) {
		what := "the capture's cases"
		if d.Config.Shard.Count > 0 {
			what = fmt.Sprintf("shard %s of the capture's cases", d.Config.Shard)
		}
		p = append(p, fmt.Sprintf("cases %v, but %s are %v", d.Cases, what, cases))
	}
	prepared := map[artifacts.Pair]bool{}
	for _, e := range a.pdoc.Entries {
		if e.Status == artifacts.StatusPrepared && slices.Contains(cases, e.Case) {
			prepared[e.Pair()] = true
		}
	}
	perPair := map[artifacts.Pair]int{}
	rounds := d.Config.Rounds
	for _, v := range d.Plan {
		perPair[v.Pair()]++
		rounds = max(rounds, v.Round+1)
	}
	roundsOf := map[string]int{}
	for _, s := range d.Stops {
		roundsOf[s.Case] = s.Rounds
	}
	for k := range prepared {
		want := d.Config.Rounds
		if d.Config.Target > 0 && roundsOf[k.Case] > 0 {
			want = roundsOf[k.Case]
		}
		if perPair[k] != want {
			p = append(p, fmt.Sprintf("%s/%s planned %d times, want one visit per round (%d)", k.Case, k.Route, perPair[k], want))
		}
	}
	if d.Config.Target > 0 && len(d.Stops) > 0 {
		want := a.adaptivePlan()
		if len(want) != len(d.Plan) {
			p = append(p, fmt.Sprintf("plan: %d visits, the stops give %d", len(d.Plan), len(want)))
		}
		for i := range min(len(want), len(d.Plan)) {
			if want[i] != d.Plan[i] {
				p = append(p, fmt.Sprintf("plan entry %d %+v, the stops give %+v", i, d.Plan[i], want[i]))
				break
			}
		}
	}
	// Each round has one route order; reconstruct it from positions.
	n := len(d.Routes)
	order := map[int][]string{}
	for _, v := range d.Plan {
		o := order[v.Round]
		if o == nil {
			o = make([]string, n)
			order[v.Round] = o
		}
		if v.Position < 0 || v.Position >= n {
			p = append(p, fmt.Sprintf("visit %d: position %d outside 0..%d", v.Index, v.Position, n-1))
			continue
		}
		if o[v.Position] != "" && o[v.Position] != v.Route {
			p = append(p, fmt.Sprintf("round %d: position %d holds %s and %s", v.Round+1, v.Position, o[v.Position], v.Route))
		}
		o[v.Position] = v.Route
	}
	// Balance is counted over the routes each round actually visited, in
	// their relative order (a route with no timeable case leaves a gap).
	pos := map[string][]int{}
	prec := map[precedence]int{}
	present := 0
	for rd := 0; rd < rounds; rd++ {
		var o []string
		for _, rt := range order[rd] {
			if rt != "" {
				o = append(o, rt)
			}
		}
		present = max(present, len(o))
		for j, rt := range o {
			if pos[rt] == nil {
				pos[rt] = make([]int, n)
			}
			pos[rt][j]++
			if j > 0 {
				prec[precedence{o[j-1], rt}]++
			}
		}
	}
	for rt := range pos {
		pos[rt] = pos[rt][:present]
	}
	var ref int = -1
	for rt, counts := range pos {
		for j, c := range counts {
			if ref < 0 {
				ref = c
			}
			if c != ref {
				w = append(w, fmt.Sprintf("route %s at position %d in %d rounds, others %d: positions are not balanced", rt, j, c, ref))
			}
		}
	}
	ref = -1
	for x := range pos {
		for y := range pos {
			if x == y {
				continue
			}
			c := prec[precedence{x, y}]
			if ref < 0 {
				ref = c
			}
			if c != ref {
				w = append(w, fmt.Sprintf("%s immediately before %s in %d rounds, other pairs %d: carry-over is not balanced", x, y, c, ref))
			}
		}
	}
	if len(w) > 0 {
		w = append([]string{fmt.Sprintf("%d rounds over %d routes is a screen, not a balanced comparison", rounds, n)}, w...)
	}
	a.add("balance", p, w, fmt.Sprintf("%d visits in %d rounds; positions and immediate precedence of %d routes counted", len(d.Visits), rounds, n))
}

// timeWindows checks that verification came before timing and that every
// visit lies inside its round's closure checks and the replay's run.
func (a *auditor) timeWindows() {
	var p []string
	capR, err1 := a.cap.Receipt()
	prepR, err2 := a.prep.Receipt()
	repR, err3 := a.rep.Receipt()
	if err := errorsJoin(err1, err2, err3); err != nil {
		a.add("time windows", []string{err.Error()}, nil, "could not read receipts")
		return
	}
	if prepR.Predicate.StartedOn.Before(capR.Predicate.FinishedOn) {
		p = append(p, "prepare started before capture finished")
	}
	if repR.Predicate.StartedOn.Before(prepR.Predicate.FinishedOn) {
		p = append(p, "replay started before prepare finished")
	}
	// Each replay session (the first run, then every --resume) re-hashed
	// what it consumed before timing; the receipt holds the last one's.
	sessions := a.rdoc.Sessions
	var lastVerified time.Time
	for _, d := range repR.Predicate.ResolvedDependencies {
		if d.VerifiedAt.After(lastVerified) {
			lastVerified = d.VerifiedAt
		}
	}
	if len(sessions) == 0 {
		p = append(p, "replay records no sessions")
	} else if !sessions[len(sessions)-1].Verified.Equal(lastVerified) {
		p = append(p, fmt.Sprintf("last replay session verified at %s, the receipt's last verification is %s", sessions[len(sessions)-1].Verified.Format(time.RFC3339Nano), lastVerified.Format(time.RFC3339Nano)))
	}
	for i, s := range sessions {
		if s.Index != i || s.Verified.Before(s.Started) || (i > 0 && s.Started.Before(sessions[i-1].Verified)) {
			p = append(p, fmt.Sprintf("replay session %d: started %s, verified %s: out of order", i, s.Started.Format(time.RFC3339Nano), s.Verified.Format(time.RFC3339Nano)))
		}
	}
	before, after := map[int][]time.Time{}, map[int][]time.Time{}
	for _, c := range a.rdoc.Closure {
		if c.When == "before" {
			before[c.Round] = append(before[c.Round], c.At)
		} else {
			after[c.Round] = append(after[c.Round], c.At)
		}
	}
	for _, v := range a.rdoc.Visits {
		if v.Start.IsZero() {
			continue
		}
		if v.Session < 0 || v.Session >= len(sessions) {
			p = append(p, fmt.Sprintf("visit %d: session %d is not recorded", v.Index, v.Session))
		} else if v.Start.Before(sessions[v.Session].Verified) {
			p = append(p, fmt.Sprintf("visit %d started %s, before its session's verification finished %s", v.Index, v.Start.Format(time.RFC3339Nano), sessions[v.Session].Verified.Format(time.RFC3339Nano)))
		}
		if v.End.Before(v.Start) || v.End.After(repR.Predicate.FinishedOn) {
			p = append(p, fmt.Sprintf("visit %d: window %s..%s outside the replay's run", v.Index, v.Start, v.End))
		}
		if !slices.ContainsFunc(before[v.Round], func(t time.Time) bool { return !t.After(v.Start) }) {
			p = append(p, fmt.Sprintf("visit %d: no binary closure check of round %d before it", v.Index, v.Round+1))
		}
		if !slices.ContainsFunc(after[v.Round], func(t time.Time) bool { return !t.Before(v.End) }) {
			p = append(p, fmt.Sprintf("visit %d: no binary closure check of round %d after it", v.Index, v.Round+1))
		}
	}
	a.add("time windows", p, nil, "verification before timing, every visit inside its round's closure checks and the replay's run")
}

func errorsJoin(errs ...error) error {
	var s []string
	for _, e := range errs {
		if e != nil {
			s = append(s, e.Error())
		}
	}
	if len(s) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(s, "; "))
}

// MarshalStatement wraps the report as an in-toto Statement about the three
// stage manifests.
func MarshalStatement(r *Report) ([]byte, error) {
	return artifacts.MarshalJSON(statement(r))
}

// statement is the report as an in-toto Statement whose subjects are the
// stage manifests it audited (the digests Run parsed when it opened them).
func statement(r *Report) artifacts.Statement[*Report] {
	st := artifacts.Statement[*Report]{Type: artifacts.StatementType, PredicateType: artifacts.AuditPredicate, Predicate: r}
	names := make([]string, 0, len(r.Stages))
	for k := range r.Stages {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		_, hex, _ := strings.Cut(r.Stages[k], ":")
		st.Subject = append(st.Subject, artifacts.Subject{Name: k, Digest: map[string]string{"sha256": hex}})
	}
	return st
}

// Markdown renders the report for people: the verdicts, then every failed
// visit with its reason, then the rows (a ratio only where the claim is
// supported), then the checks and their evidence.
func Markdown(r *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# tilepipe audit: checkpoint %s, %d of %d claims supported\n\n", strings.ToUpper(r.Integrity), r.Claims.Supported, r.Claims.Supported+r.Claims.Unsupported)
	if r.Pinned {
		fmt.Fprintf(&b, "Pinned to `%s`, the replay manifest given with --expect.\n\n", r.Expected)
	} else {
		b.WriteString("Not pinned: a consistent re-hash of the whole checkpoint cannot be told apart without --expect.\n\n")
	}
	if r.Signed != "" {
		fmt.Fprintf(&b, "Receipts: %s.\n\n", r.Signed)
	}
	if len(r.FailedVisits) > 0 {
		fmt.Fprintf(&b, "## failed visits (%d)\n\n| visit | round | case | route | reason |\n|---|---|---|---|---|\n", len(r.FailedVisits))
		for _, v := range r.FailedVisits {
			fmt.Fprintf(&b, "| %d | %d | %s | %s | %s |\n", v.Visit, v.Round+1, v.Case, v.Route, strings.ReplaceAll(v.Reason, "|", `\|`))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("Every visit passed.\n\n")
	}
	b.WriteString("## stages\n\n")
	for _, k := range []string{artifacts.CaptureType, artifacts.PreparedType, artifacts.ReplayType} {
		if d, ok := r.Stages[k]; ok {
			fmt.Fprintf(&b, "- %s `%s`\n", k, d)
		}
	}
	if len(r.Rows) > 0 {
		b.WriteString("\n## claims\n\n| case | route | status | claim | ratio [interval, at the level results.md gives] | why not / marks |\n|---|---|---|---|---|---|\n")
		for _, row := range r.Rows {
			claim, ratio := "unsupported", "-"
			if row.Supported {
				claim = "supported"
				switch {
				case row.Ratio != nil && row.Ratio.Verdict == stats.TooFew:
					ratio = fmt.Sprintf("%.3f %s", row.Ratio.Median, row.Ratio.Verdict)
				case row.Ratio != nil:
					ratio = fmt.Sprintf("%.3f [%.3f – %.3f] %s", row.Ratio.Median, row.Ratio.Lo, row.Ratio.Hi, row.Ratio.Verdict)
				}
			}
			why := strings.Join(append(slices.Clone(row.Marks), row.Why), "; ")
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", row.Case, row.Route, row.Status, claim, ratio, strings.Trim(strings.ReplaceAll(why, "|", `\|`), "; "))
		}
	}
	b.WriteString("\n## checks\n\n| check | status | summary |\n|---|---|---|\n")
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, c.Status, strings.ReplaceAll(c.Summary, "|", `\|`))
	}
	for _, c := range r.Checks {
		if len(c.Evidence) > 0 {
			fmt.Fprintf(&b, "\n## %s: %s\n\n", c.Name, c.Status)
			for _, e := range c.Evidence {
				fmt.Fprintf(&b, "- %s\n", e)
			}
		}
	}
	return b.String()
}

// tensorKey names one tensor of an oracle packet: its part ("expected" or
// "bound") and its output's name.
type tensorKey struct{ part, name string }

// precedence is one route visited immediately before another in a round.
type precedence struct{ before, after string }
