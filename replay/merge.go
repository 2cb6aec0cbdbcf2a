package replay

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/artifacts/sign"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/internal/shard"
	"github.com/tilepipe/tilepipe/report"
)

// MergeConfig says which shard replays to merge into one replay stage.
type MergeConfig struct {
	Prepared string // the prepared stage every shard replays
	Capture  string // its capture; default: the path in the prepared receipt
	Output   string // new directory of the merged replay stage
	Shards   []string
	// AllowMixed merges shards whose machines do not compare
	// (internal/shard.Differ), recorded and shown in every row.
	AllowMixed bool
	Key        *sign.Key
	Progress   *progress.Reporter
}

// part is one verified shard of a merge.
type part struct {
	dir     string
	st      *artifacts.Stage
	doc     artifacts.ReplayDoc
	machine shard.Machine
	rows    []samples.Row
	at      time.Time // when its blobs were re-hashed
}

// Merge verifies the prepared stage, its capture and every shard (each
// re-hashed, each a shard of that prepared stage, with one config and one
// set of input seeds, together every shard exactly once, on machines that
// compare), then writes one replay stage: the shards' visits and sessions
// renumbered in shard order, one sample table of their raw samples, and
// summaries and paired ratios recomputed from those samples. Its receipt
// lists every shard manifest it consumed.
func Merge(ctx context.Context, cfg MergeConfig) (_ *Result, err error) {
	start := time.Now().UTC()
	r := &replayer{cfg: Config{Prepared: cfg.Prepared, Capture: cfg.Capture, Progress: cfg.Progress}, entries: map[artifacts.Pair]*artifacts.Prepared{}, cases: map[string]*artifacts.CapturedCase{}}
	if err := r.open(); err != nil {
		return nil, err
	}
	routes, all := r.routesAndCases()
	parts, err := r.openShards(cfg.Shards, routes, all)
	if err != nil {
		return nil, err
	}
	mixed := mixedOf(parts)
	if len(mixed) > 0 && !cfg.AllowMixed {
		return nil, fmt.Errorf("merge: the shards ran on machines whose times do not compare: %s; --allow-mixed merges them anyway (recorded, and every row marked with the machine it ran on)", strings.Join(mixed, "; "))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := filepath.Abs(cfg.Output)
	if err != nil {
		return nil, err
	}
	s, err := artifacts.Begin(out, "merge", cfg.Progress.Printf)
	if err != nil {
		return nil, err
	}
	// Failed or interrupted before the commit: nothing is left behind (a
	// merge is made again from its shards, never resumed).
	defer s.Abort(&err)
	rec := artifacts.NewReceipt("replay", start, nil, r.prep, &r.deps)
	doc, rows, deps, dirs := combineParts(parts, all, mixed, out, r.deps.List())
	sd, err := artifacts.PutSamples(s, rows)
	if err != nil {
		return nil, err
	}
	s.Name("samples.arrow", sd)
	doc.Samples = sd.Digest
	doc.Summary = Summaries(all, routes, r.pdoc.Entries, doc.Visits, rows, doc.Config, floors.OfSessions(doc.Sessions))
	res := &Result{Failed: failures(doc)}
	md, err := s.PutBytes([]byte(report.Table(doc)), artifacts.MediaMarkdown)
	if err != nil {
		return nil, err
	}
	s.Name("results.md", md)
	rec.Parameters = map[string]any{"prepared": absPath(cfg.Prepared), "capture": r.cap.Store.Dir(), "merge": map[string]any{"shards": dirs, "allowMixed": cfg.AllowMixed}}
	rec.ResolvedDependencies = deps
	subject := r.prep.Descriptor
	subject.Annotations = nil
	mdesc, err := s.Finish(artifacts.ReplayType, doc, rec, &subject, cfg.Key)
	if err != nil {
		return nil, err
	}
	res.Manifest, res.Doc = mdesc.Digest, doc
	return res, nil
}

// mixedOf: how the parts' machines differ (shard.Mixed), none if alike.
func mixedOf(parts []*part) []string {
	var machines []shard.Machine
	var specs []artifacts.ShardSpec
	for _, p := range parts {
		machines, specs = append(machines, p.machine), append(specs, p.doc.Config.Shard)
	}
	return shard.Mixed(machines, specs)
}

// combineParts: the merged document of the parts (their plan, visits and
// sessions renumbered in shard order, every shard referred to from out),
// their rows renumbered, the receipt's dependencies (deps and every
// shard's manifest and samples) and the shards' directories.
func combineParts(parts []*part, all, mixed []string, out string, deps []artifacts.Dependency) (doc artifacts.ReplayDoc, rows []samples.Row, _ []artifacts.Dependency, dirs []string) {
	var docs []artifacts.ReplayDoc
	for _, p := range parts {
		docs = append(docs, p.doc)
	}
	comb := shard.Combine(docs)
	ref := parts[0].doc
	config := ref.Config
	config.Shard = artifacts.ShardSpec{}
	doc = artifacts.ReplayDoc{Schema: artifacts.DocSchema, Prepared: ref.Prepared, Capture: ref.Capture, Config: config, Routes: ref.Routes, Cases: all,
		Plan: comb.Plan, Inputs: ref.Inputs, Sandbox: ref.Sandbox, Sessions: comb.Sessions, Visits: comb.Visits, Closure: comb.Closure, Stops: comb.Stops,
		Merge: &artifacts.MergeRecord{Mixed: mixed}}
	var limits []string
	for i, p := range parts {
		if !slices.Contains(limits, p.doc.CPULimit) {
			limits = append(limits, p.doc.CPULimit)
		}
		rows = append(rows, shard.Rows(p.rows, comb.VisitOffset[i])...)
		path := p.dir
		if rel, err := filepath.Rel(out, p.dir); err == nil {
			path = rel
		}
		sh := p.doc.Config.Shard
		doc.Merge.Shards = append(doc.Merge.Shards, artifacts.ShardRef{Shard: sh, Manifest: p.st.Descriptor.Digest, Path: path, Cases: p.doc.Cases,
			VisitOffset: comb.VisitOffset[i], SessionOffset: comb.SessionOffset[i], Machine: p.machine.String()})
		deps = append(deps, artifacts.Dependency{Name: "shard " + sh.String() + " manifest", Digest: p.st.Descriptor.Digest, VerifiedAt: p.verified()},
			artifacts.Dependency{Name: "shard " + sh.String() + " samples.arrow", Digest: p.doc.Samples, VerifiedAt: p.verified()})
		dirs = append(dirs, p.dir)
	}
	doc.CPULimit = strings.Join(limits, "; ")
	return doc, rows, deps, dirs
}

// openShards opens and re-hashes every shard and checks that together
// they are the plan of one replay of r's prepared stage, each shard once.
func (r *replayer) openShards(dirs []string, routes, all []string) ([]*part, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("merge: no shards given: name every shard's replay directory")
	}
	byIndex := map[int]*part{}
	count := 0
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		p := &part{dir: abs}
		var at time.Time
		if p.st, err = artifacts.ReadStage(abs, &p.doc, func(string, ocispec.Descriptor) { at = time.Now().UTC() }); err != nil {
			return nil, fmt.Errorf("shard %s: %w", dir, err)
		}
		p.at = at
		sh := p.doc.Config.Shard
		switch {
		case p.doc.Merge != nil:
			return nil, fmt.Errorf("shard %s: a merged replay, not a shard: merge the shards it names", dir)
		case sh.Count == 0:
			return nil, fmt.Errorf("shard %s: %s config.shard: absent, a replay of the whole plan (tilepipe replay --shard I/N makes a shard)", dir, artifacts.DocTitle)
		case p.doc.Prepared != r.prep.Descriptor.Digest || p.st.Manifest.Subject == nil || p.st.Manifest.Subject.Digest != r.prep.Descriptor.Digest:
			return nil, fmt.Errorf("shard %s: replays prepared %s, not %s (%s): every shard must replay the prepared stage being merged", dir, artifacts.Short(p.doc.Prepared), r.cfg.Prepared, artifacts.Short(r.prep.Descriptor.Digest))
		case count != 0 && sh.Count != count:
			return nil, fmt.Errorf("shard %s: shard %s, but the shards before it are of %d", dir, sh, count)
		}
		count = sh.Count
		if prev := byIndex[sh.Index]; prev != nil {
			return nil, fmt.Errorf("shard %s given twice: %s and %s (each shard's visits are merged once)", sh, prev.dir, abs)
		}
		byIndex[sh.Index] = p
	}
	var missing []string
	parts := make([]*part, count)
	for i := range count {
		if parts[i] = byIndex[i]; parts[i] == nil {
			missing = append(missing, artifacts.ShardSpec{Index: i, Count: count}.String())
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("merge: shards %s missing: the plan is every shard's visits, so give all %d (tilepipe slurm status names the incomplete ones)", strings.Join(missing, ", "), count)
	}
	ref := parts[0].doc
	for _, p := range parts {
		d, sh := p.doc, p.doc.Config.Shard
		c0, c := ref.Config, d.Config
		c0.Shard, c.Shard = artifacts.ShardSpec{}, artifacts.ShardSpec{}
		switch {
		case c != c0:
			return nil, fmt.Errorf("shard %s (%s): config %+v, shard %s's %+v: every shard replays with the same settings", sh, p.dir, c, ref.Config.Shard, c0)
		case d.Capture != r.cap.Descriptor.Digest:
			return nil, fmt.Errorf("shard %s (%s): capture %s, want %s", sh, p.dir, artifacts.Short(d.Capture), artifacts.Short(r.cap.Descriptor.Digest))
		case !slices.Equal(d.Routes, routes):
			return nil, fmt.Errorf("shard %s (%s): routes %v, the capture's %v", sh, p.dir, d.Routes, routes)
		case !slices.Equal(d.Cases, shard.Cases(all, sh)):
			return nil, fmt.Errorf("shard %s (%s): cases %v, but shard %s of the capture's cases is %v", sh, p.dir, d.Cases, sh, shard.Cases(all, sh))
		case !reflect.DeepEqual(d.Inputs, ref.Inputs):
			return nil, fmt.Errorf("shard %s (%s): input seeds differ from shard %s's: every shard of one replay reads the same --inputs file", sh, p.dir, ref.Config.Shard)
		case !reflect.DeepEqual(d.Sandbox, ref.Sandbox):
			return nil, fmt.Errorf("shard %s (%s): sandbox %+v, shard %s's %+v: every shard replays with the same settings", sh, p.dir, d.Sandbox, ref.Config.Shard, ref.Sandbox)
		}
		rc, err := p.st.Receipt()
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", p.dir, err)
		}
		p.machine = shard.MachineOf(rc.Predicate.Environment)
		if !p.st.Has(d.Samples) {
			return nil, fmt.Errorf("shard %s (%s): samples %s is not a verified layer", sh, p.dir, artifacts.Short(d.Samples))
		}
		if p.rows, err = samples.ReadFile(p.st.Store.Path(d.Samples), nil); err != nil {
			return nil, fmt.Errorf("shard %s (%s): samples.arrow: %w", sh, p.dir, err)
		}
	}
	return parts, nil
}

func (p *part) verified() time.Time { return p.at }
