package audit

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/shard"
)

// merged audits a merged replay (tilepipe merge): the capture and the
// prepared stage once (the table's perCapture checks); then every shard it
// names, opened where the merge found it, re-hashed and audited as the
// replay it is (its signatures and the table's other checks), each check
// named with its shard; then the merge itself (the merge check); then the
// merged document's summaries recomputed from its sample table and its
// results table rendered again. A row's claim rests on its shard's checks.
func (a *auditor) merged(cp *checkpoint, cfg Config, rep *Report) {
	f := captureFacts(cp)
	a.run(cp, f, false, true)
	subs, ok := a.openShards(cp, cfg, rep)
	if !ok {
		return
	}
	rowOf := map[artifacts.Pair]Row{}
	for _, s := range subs {
		sa := &auditor{progress: a.progress, scope: fmt.Sprintf(" (shard %s)", s.shard)}
		_, sig := signaturesCheck(s.cp, cfg.Trust)
		sa.add("signatures", sig)
		marks := sa.run(s.cp, f.forReplay(s.cp), false, false)
		for _, r := range rowsOf(s.cp.rdoc) {
			r.Marks = append(r.Marks, marks[r.Pair()]...)
			rowOf[r.Pair()] = r
		}
		a.checks = append(a.checks, sa.checks...)
	}
	a.add("chain", chainCheck(cp, f))
	a.add("merge", mergeCheck(cp, subs))
	a.add("summaries", mergedSummaries(cp, subs))
	a.add("results table", resultsCheck(cp, f))
	machineOf := map[string]string{}
	if len(cp.rdoc.Merge.Mixed) > 0 {
		for _, r := range cp.rdoc.Merge.Shards {
			for _, c := range r.Cases {
				machineOf[c] = MarkMixed + ": shard " + r.Shard.String() + " ran on " + r.Machine
			}
		}
	}
	var orphans []string
	for _, s := range cp.rdoc.Summary {
		r, ok := rowOf[s.Pair()]
		if !ok {
			r = Row{Case: s.Case, Route: s.Route, Status: s.Status, Marks: []string{"no shard audited this row"}}
			orphans = append(orphans, fmt.Sprintf("row %s/%s: no shard's summary has it", s.Case, s.Route))
		}
		if m, ok := machineOf[s.Case]; ok {
			r.Marks = append(r.Marks, m)
		}
		rep.Rows = append(rep.Rows, r)
	}
	a.add("merge rows", finding{problems: orphans, summary: fmt.Sprintf("each of the %d merged rows is a shard's row, audited with its shard", len(cp.rdoc.Summary))})
}

// mergedSummaries checks the merged sample table against the shards'
// (visits renumbered) and recomputes the merged summaries from it.
func mergedSummaries(cp *checkpoint, subs []shardCheckpoint) finding {
	rows, err := readRows(cp.rep, cp.rdoc.Samples)
	if err != nil {
		return finding{problems: []string{err.Error()}, summary: "could not read the merged sample table"}
	}
	var p []string
	var union []samples.Row
	for i, s := range subs {
		sr, err := readRows(s.cp.rep, s.cp.rdoc.Samples)
		if err != nil {
			p = append(p, fmt.Sprintf("shard %s samples.arrow: %v", s.cp.rdoc.Config.Shard, err))
			continue
		}
		union = append(union, shard.Rows(sr, cp.rdoc.Merge.Shards[i].VisitOffset)...)
	}
	if !slices.Equal(union, rows) {
		p = append(p, fmt.Sprintf("samples.arrow has %d rows, the shards' tables (visits renumbered) %d, or they differ in content", len(rows), len(union)))
	}
	return checkSummaries(cp, rows, p)
}

// shardCheckpoint is one shard of a merged replay, a checkpoint of its own
// that shares the merged replay's capture and prepared stage.
type shardCheckpoint struct {
	cp    *checkpoint
	shard artifacts.ShardSpec
}

// MarkMixed marks every row of a merged replay whose shards ran on
// machines that do not compare (merge --allow-mixed), with its machine.
const MarkMixed = "mixed machines"

// openShards opens every shard the merged document names, where the merge
// found it (relative to the merged stage), re-hashing every blob, and
// makes a checkpoint of each.
func (a *auditor) openShards(cp *checkpoint, cfg Config, rep *Report) ([]shardCheckpoint, bool) {
	var p []string
	var subs []shardCheckpoint
	cp.shardBlobs = map[artifacts.Digest]bool{}
	n := 0
	for i, ref := range cp.rdoc.Merge.Shards {
		dir := ref.Path
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cfg.Replay, dir)
		}
		s := &checkpoint{cap: cp.cap, prep: cp.prep, cdoc: cp.cdoc, pdoc: cp.pdoc, capVerified: cp.capVerified, prepVerified: cp.prepVerified}
		st, err := artifacts.ReadStage(dir, &s.rdoc, nil)
		if err == nil {
			err = artifacts.ValidateStage(st)
		}
		if err != nil {
			p = append(p, fmt.Sprintf("merge.shards[%d] (shard %s): %v", i, ref.Shard, err))
			continue
		}
		if st.Descriptor.Digest != ref.Manifest {
			p = append(p, fmt.Sprintf("merge.shards[%d] (shard %s): %s holds manifest %s, the merged document names %s", i, ref.Shard, dir, st.Descriptor.Digest, ref.Manifest))
			continue
		}
		s.rep = st
		n += 2 + len(st.Manifest.Layers)
		cp.shardBlobs[ref.Manifest], cp.shardBlobs[s.rdoc.Samples] = true, true
		rep.Stages[artifacts.ReplayType+" shard "+ref.Shard.String()] = string(ref.Manifest)
		subs = append(subs, shardCheckpoint{s, ref.Shard})
	}
	a.add("shard blobs", finding{problems: p, summary: fmt.Sprintf("opened the %d shards the merged replay names and re-hashed their %d blobs", len(cp.rdoc.Merge.Shards), n)})
	return subs, len(p) == 0
}

// mergeCheck checks the merge: the shards are shards 0 to N-1 of one plan
// of this prepared stage, each once, with the merged replay's settings and
// input seeds and the cases the partition gives them; their machines are
// what the document records, and a mix of machines is recorded; the merged
// plan, visits, sessions, closure checks and stops are the shards', in
// shard order and renumbered; the receipt consumed every shard; and the
// merge began after every shard was committed.
func mergeCheck(cp *checkpoint, subs []shardCheckpoint) finding {
	var p []string
	d := cp.rdoc
	var all []string
	for _, c := range cp.cdoc.Cases {
		all = append(all, c.Case.ID)
	}
	if !slices.Equal(d.Cases, all) {
		p = append(p, fmt.Sprintf("cases %v, the capture's %v", d.Cases, all))
	}
	if d.Config.Shard.Count != 0 {
		p = append(p, fmt.Sprintf("config.shard %s: a merged replay is the whole plan", d.Config.Shard))
	}
	if len(d.Merge.Shards) == 0 {
		p = append(p, "merge.shards: none; a merged replay is made of at least one shard")
	}
	mr, err := cp.rep.Receipt()
	if err != nil {
		p = append(p, "merged receipt: "+err.Error())
	}
	consumed := map[artifacts.Digest]bool{}
	for _, dep := range mr.Predicate.ResolvedDependencies {
		consumed[dep.Digest] = true
	}
	var machines []shard.Machine
	var specs []artifacts.ShardSpec
	var docs []artifacts.ReplayDoc
	for i, s := range subs {
		ref, sd := d.Merge.Shards[i], s.cp.rdoc
		want := artifacts.ShardSpec{Index: i, Count: len(d.Merge.Shards)}
		if ref.Shard != want || sd.Config.Shard != want {
			p = append(p, fmt.Sprintf("merge.shards[%d]: shard %s, its document says %s; want %s (every shard once, in order)", i, ref.Shard, sd.Config.Shard, want))
		}
		p = append(p, shardDocDiff(want, ref, sd, d, all)...)
		if sub := s.cp.rep.Manifest.Subject; sub == nil || sub.Digest != cp.prep.Descriptor.Digest {
			p = append(p, fmt.Sprintf("shard %s: manifest subject: want the prepared manifest %s", want, cp.prep.Descriptor.Digest))
		}
		sr, err := s.cp.rep.Receipt()
		if err != nil {
			p = append(p, fmt.Sprintf("shard %s receipt: %v", want, err))
			continue
		}
		m := shard.MachineOf(sr.Predicate.Environment)
		if m.String() != ref.Machine {
			p = append(p, fmt.Sprintf("merge.shards[%d].machine %q, the shard's receipt gives %q", i, ref.Machine, m.String()))
		}
		if sr.Predicate.FinishedOn.After(mr.Predicate.StartedOn) {
			p = append(p, fmt.Sprintf("the merge started %s, before shard %s finished %s", mr.Predicate.StartedOn, want, sr.Predicate.FinishedOn))
		}
		if !consumed[ref.Manifest] || !consumed[sd.Samples] {
			p = append(p, fmt.Sprintf("merged receipt: shard %s's manifest %s and samples %s are not both recorded as consumed", want, artifacts.Short(ref.Manifest), artifacts.Short(sd.Samples)))
		}
		machines, specs, docs = append(machines, m), append(specs, want), append(docs, sd)
	}
	if mixed := shard.Mixed(machines, specs); !slices.Equal(mixed, d.Merge.Mixed) {
		p = append(p, fmt.Sprintf("merge.mixed %q, the shards' receipts give %q", d.Merge.Mixed, mixed))
	}
	p = append(p, combinedDiff(d, shard.Combine(docs), len(subs))...)
	return finding{problems: p, summary: fmt.Sprintf("%d shards of one plan of the prepared stage, each once, with one config and one set of input seeds; the merged plan, visits and sessions are theirs renumbered; machines %s", len(subs), mixedWord(d.Merge.Mixed))}
}

// shardDocDiff: how shard want's document sd differs from the merged
// document d in what every shard shares with it (config but the shard,
// stages, routes, seeds, sandbox), and its cases from the partition's.
func shardDocDiff(want artifacts.ShardSpec, ref artifacts.ShardRef, sd, d artifacts.ReplayDoc, all []string) (p []string) {
	c := sd.Config
	c.Shard = artifacts.ShardSpec{}
	p = append(p, configDiff(fmt.Sprintf("shard %s config", want), c, d.Config)...)
	if sd.Prepared != d.Prepared || sd.Capture != d.Capture {
		p = append(p, fmt.Sprintf("shard %s: prepared %s capture %s, the merged replay's %s and %s", want, sd.Prepared, sd.Capture, d.Prepared, d.Capture))
	}
	if !slices.Equal(sd.Routes, d.Routes) {
		p = append(p, fmt.Sprintf("shard %s: routes %v, the merged replay's %v", want, sd.Routes, d.Routes))
	}
	if wc := shard.Cases(all, want); !slices.Equal(sd.Cases, wc) || !slices.Equal(ref.Cases, wc) {
		p = append(p, fmt.Sprintf("shard %s: cases %v (merge.shards says %v), the partition gives %v", want, sd.Cases, ref.Cases, wc))
	}
	if !reflect.DeepEqual(sd.Inputs, d.Inputs) {
		p = append(p, fmt.Sprintf("shard %s: input seeds differ from the merged replay's", want))
	}
	if !reflect.DeepEqual(sd.Sandbox, d.Sandbox) {
		p = append(p, fmt.Sprintf("shard %s: sandbox %+v, the merged replay's %+v", want, sd.Sandbox, d.Sandbox))
	}
	return p
}

// combinedDiff: how the merged document's offsets, plan, visits,
// sessions, closure checks and stops differ from the n shards' combined.
func combinedDiff(d artifacts.ReplayDoc, comb shard.Combined, n int) (p []string) {
	for i := range min(n, len(d.Merge.Shards)) {
		if r := d.Merge.Shards[i]; r.VisitOffset != comb.VisitOffset[i] || r.SessionOffset != comb.SessionOffset[i] {
			p = append(p, fmt.Sprintf("merge.shards[%d]: offsets %d/%d, the shards give %d/%d", i, r.VisitOffset, r.SessionOffset, comb.VisitOffset[i], comb.SessionOffset[i]))
		}
	}
	for _, f := range []struct {
		name       string
		have, want any
	}{{"plan", d.Plan, comb.Plan}, {"visits", d.Visits, comb.Visits}, {"sessions", d.Sessions, comb.Sessions}, {"closure", d.Closure, comb.Closure}, {"stops", d.Stops, comb.Stops}} {
		hb, err1 := artifacts.MarshalJSON(f.have)
		wb, err2 := artifacts.MarshalJSON(f.want)
		if err1 != nil || err2 != nil || !bytes.Equal(hb, wb) {
			p = append(p, fmt.Sprintf("%s: the merged document's are not the shards' in shard order, renumbered", f.name))
		}
	}
	return p
}

func mixedWord(mixed []string) string {
	if len(mixed) == 0 {
		return "comparable"
	}
	return fmt.Sprintf("MIXED (%d differences, merged with --allow-mixed; every row marked)", len(mixed))
}
