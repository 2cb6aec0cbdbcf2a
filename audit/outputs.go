package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"

	"golang.org/x/sync/errgroup"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/oracle"
)

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

// outputsCheck regenerates every buffer set a passed visit was timed on from the
// replay's recorded seeds, recomputes its oracle and re-checks every stored
// output in full: every warm set's and every checked novel call's. It also
// checks that warm set 0 (the same inputs in every visit) gave the same
// bytes in every visit of a (case, route).
func outputsCheck(cp *checkpoint, f *facts) finding {
	var p []string
	cases := map[string]*artifacts.CapturedCase{}
	for i := range cp.cdoc.Cases {
		cases[cp.cdoc.Cases[i].Case.ID] = &cp.cdoc.Cases[i]
	}
	seeds, rule, why := outputsConfig(cp.rdoc)
	if why != "" {
		return finding{problems: []string{why}, summary: ""}
	}
	// Visit a (round, case) at a time, so its sets are generated once.
	order := passedByRoundCase(cp.rdoc.Visits)
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
		if why := visitShape(v, c, outs, seeds, cp.rdoc.Config.Sets, rule); why != "" {
			p = append(p, why)
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
		vworst := 0.0 // the visit's worst error/bound over every set judged
		judge := func(pool string, all []*sets.Set, refs []artifacts.TensorRef, count int) bool {
			w, k, why := judgePool(cp.rep, v, outs, pool, all, refs, count)
			worst, vworst, nsets = math.Max(worst, w), math.Max(vworst, w), nsets+k
			if why != "" {
				p = append(p, why)
				return false
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
	if nv := cp.validations(f, &p); nv > 0 {
		summary += fmt.Sprintf("; and of %d validating builds' outputs at capture", nv)
	}
	return finding{problems: p, summary: summary}
}

// outputsConfig: the replay's seeds and novel rule, or why its
// configuration does not allow re-checking outputs.
func outputsConfig(rdoc artifacts.ReplayDoc) (sets.Seeds, sets.Rule, string) {
	seeds := sets.Seeds(rdoc.Inputs)
	if len(seeds.Rounds) != rdoc.Config.PlannedRounds() {
		return seeds, 0, fmt.Sprintf("replay inputs: seeds for %d rounds, config says %d", len(seeds.Rounds), rdoc.Config.PlannedRounds())
	}
	if m := rdoc.Config.FreshMin; m != 0 && m != sets.MinFresh {
		return seeds, 0, fmt.Sprintf("config.freshMin %d: want %d (or absent, in a replay made before it)", m, sets.MinFresh)
	}
	rule, err := sets.RuleOf(rdoc.Config.NovelRule)
	if err != nil {
		return seeds, 0, err.Error()
	}
	return seeds, rule, ""
}

// passedByRoundCase: the passed visits, ordered by round, then case.
func passedByRoundCase(visits []artifacts.VisitResult) []artifacts.VisitResult {
	var order []artifacts.VisitResult
	for _, v := range visits {
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
	return order
}

// visitShape is why a passed visit's record does not have the shape the
// replay's configuration and seeds give it (visit protocol 4;
// record.Visit checks the rest), or "".
func visitShape(v artifacts.VisitResult, c *artifacts.CapturedCase, outs []oracle.Param, seeds sets.Seeds, warmSets int, rule sets.Rule) string {
	switch {
	case v.MallocPerturb != seeds.Perturb(v.Round):
		return fmt.Sprintf("visit %d: allocator fill %d, the replay's seeds give %d for round %d", v.Index, v.MallocPerturb, seeds.Perturb(v.Round), v.Round)
	case v.Sets != warmSets:
		return fmt.Sprintf("visit %d: %d warm sets, config says %d", v.Index, v.Sets, warmSets)
	case v.Novel == nil:
		return fmt.Sprintf("visit %d: no novel record (every visit takes novel samples)", v.Index)
	case v.FreshSets != rule.Slots(c.Case.DeviceOf(), c.Signature):
		return fmt.Sprintf("visit %d: %d novel slots, want %d for case %s under novel rule %d", v.Index, v.FreshSets, rule.Slots(c.Case.DeviceOf(), c.Signature), v.Case, rule)
	case len(v.Outputs) != len(outs) || len(v.Novel.Outputs) != len(outs):
		return fmt.Sprintf("visit %d: %d warm and %d novel output tensors, want %d of each", v.Index, len(v.Outputs), len(v.Novel.Outputs), len(outs))
	}
	return ""
}

// readOutputs reads a visit's stored output tensors of one pool, each
// holding the pool's count sets ([sets, shape...]), checking each against
// the output it should hold.
func readOutputs(rep *artifacts.Stage, outs []oracle.Param, refs []artifacts.TensorRef, count int) ([][]byte, error) {
	var out [][]byte
	for i, ref := range refs {
		want := append([]int{count}, outs[i].Shape...)
		if ref.Name != outs[i].Name || ref.Dtype != outs[i].Dtype || !slices.Equal(ref.Shape, want) {
			return nil, fmt.Errorf("output %s %s %v, want %s %s %v", ref.Name, ref.Dtype, ref.Shape, outs[i].Name, outs[i].Dtype, want)
		}
		if !rep.Has(ref.Digest) {
			return nil, fmt.Errorf("output %s: blob %s is not a layer of the replay", ref.Name, artifacts.Short(ref.Digest))
		}
		t, err := tensor.ReadFile(rep.Store.Path(ref.Digest), nil)
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

// judgePool judges the count sets of one pool of visit v: each set's
// stored outputs against its recomputed oracle, and the warm pool's set 0
// against the hash the visit recorded. It returns the worst error/bound
// and the sets judged, and the first problem ("" when every set passes).
func judgePool(rep *artifacts.Stage, v artifacts.VisitResult, outs []oracle.Param, pool string, all []*sets.Set, refs []artifacts.TensorRef, count int) (worst float64, n int, problem string) {
	raw, err := readOutputs(rep, outs, refs, count)
	if err != nil {
		return 0, 0, fmt.Sprintf("visit %d %s: %v", v.Index, pool, err)
	}
	for s := range count {
		one := make([][]byte, len(outs))
		for i := range outs {
			one[i] = raw[i][s*outs[i].Bytes() : (s+1)*outs[i].Bytes()]
		}
		vd, err := all[s].Judge(outs, one)
		if err != nil {
			return worst, n, fmt.Sprintf("visit %d %s set %d: %v", v.Index, pool, s, err)
		}
		worst = math.Max(worst, vd.MaxRatio)
		n++
		if !vd.Pass {
			what := fmt.Sprintf("%s set %d", pool, s)
			if pool == sets.Novel {
				g := v.Novel.Checked[s]
				what = fmt.Sprintf("novel sample %d call %d", g/v.Novel.Calls, g%v.Novel.Calls)
			}
			return worst, n, fmt.Sprintf("visit %d (%s %s) passed in replay but %s fails the recomputed oracle: %s", v.Index, v.Case, v.Route, what, vd.Reason)
		}
	}
	if pool == sets.Warm {
		h := sha256.New()
		for i := range outs {
			h.Write(raw[i][:outs[i].Bytes()])
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != v.Set0 {
			return worst, n, fmt.Sprintf("visit %d: set0 %s, its stored set 0 outputs hash to %s", v.Index, v.Set0, got)
		}
	}
	return worst, n, ""
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
func (cp *checkpoint) validations(f *facts, p *[]string) int {
	validates := map[string]bool{}
	for _, r := range cp.cdoc.Routes {
		validates[r.Name] = r.Validates
	}
	n := 0
	for _, c := range cp.cdoc.Cases {
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
			ref, ok := f.refs[c.Case.ID]
			exp := ref.exp
			if !ok || ref.err != nil {
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
				raw, err := cp.readCapture(b.Files[i].Digest, int64(sp.Bytes()))
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
