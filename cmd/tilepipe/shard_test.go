package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/internal/slurmtest"
	"github.com/tilepipe/tilepipe/internal/testroute"
)

// shardCases are four tiny cases, so that three shards get 2, 1 and 1.
const shardCases = gemm16 + `, {"op": "add", "dims": {"M": 4, "N": 10}, "seed": 9}, {"op": "gemm", "dims": {"M": 8, "N": 24, "K": 16}, "seed": 4}, ` + add3x7

// shardedPrepared captures and prepares shardCases with two routes (naive
// and a copy of it, naive2) and returns the prepared stage, its capture
// and an inputs file for shards.
func shardedPrepared(t *testing.T) (prep, capDir, inputs string) {
	t.Helper()
	second := secondNaive(t)
	root := t.TempDir()
	capDir, prep, inputs = filepath.Join(root, "capture"), filepath.Join(root, "prepared"), filepath.Join(root, sets.InputsFile)
	if code, out, errs := tp(t, "capture", "--cohort", tinyCohort(t, shardCases), "--routes", "", "--route-exec", testroute.Path(t), "--route-exec", second, "--output", capDir); code != exitOK {
		t.Fatalf("capture = exit %d:\n%s%s", code, out, errs)
	}
	if code, out, errs := tp(t, "prepare", "--capture", capDir, "--output", prep); code != exitOK {
		t.Fatalf("prepare = exit %d:\n%s%s", code, out, errs)
	}
	if err := sets.DrawFile(inputs); err != nil {
		t.Fatal(err)
	}
	return prep, capDir, inputs
}

// shardFlags: every shard of a test replay times alike.
var shardFlags = append([]string{"--baseline", "naive", "--rounds", "2", "--allow-load", "--threads", "1"}, fast...)

func replayShard(t *testing.T, prep, inputs, spec, out string, extra ...string) {
	t.Helper()
	args := append([]string{"replay", "--prepared", prep, "--output", out, "--shard", spec, "--inputs", inputs}, shardFlags...)
	if code, o, errs := tp(t, append(args, extra...)...); code != exitOK {
		t.Fatalf("replay --shard %s = exit %d:\n%s%s", spec, code, o, errs)
	}
}

// TestShardMerge replays a prepared stage as three shards, merges them
// and audits the merge: it passes, every row is supported, and every
// merged row is its shard's. Merge refuses a missing shard, a shard given
// twice, a shard of another prepared stage, a whole replay, shards of
// other input seeds and machines that differ (unless --allow-mixed, which
// marks every row); the audit refuses a merged document whose visits,
// summaries or machines are not its shards', a shard that is gone and a
// shard replaced by another replay of the same shard.
func TestShardMerge(t *testing.T) {
	long(t)
	slurmtest.OneWordTemp(t) // slurm submit's job directory is one word
	prep, capDir, inputs := shardedPrepared(t)
	root := t.TempDir()
	var shards []string
	for i, spec := range []string{"0/3", "1/3", "2/3"} {
		shards = append(shards, filepath.Join(root, "shard"+string(rune('0'+i))))
		replayShard(t, prep, inputs, spec, shards[i])
	}
	if d := readReplay(t, shards[0]); strings.Join(d.Cases, " ") != "gemm-16x16x16 add-3x7" {
		t.Errorf("shard 0/3 cases %v, want the 1st and 4th of the capture", d.Cases)
	}
	merge := func(out string, extra []string, dirs ...string) (int, string, string) {
		return tp(t, append(append([]string{"merge", "--prepared", prep, "--output", out}, extra...), dirs...)...)
	}
	merged := filepath.Join(root, "merged")
	if code, out, errs := merge(merged, nil, shards[2], shards[0], shards[1]); code != exitOK {
		t.Fatalf("merge = exit %d:\n%s%s", code, out, errs)
	}
	doc := readReplay(t, merged)
	if len(doc.Cases) != 4 || len(doc.Visits) != 4*2*2 || len(doc.Merge.Shards) != 3 || len(doc.Summary) != 8 {
		t.Fatalf("merged: %d cases, %d visits, %d shards, %d rows; want 4, 16, 3, 8", len(doc.Cases), len(doc.Visits), len(doc.Merge.Shards), len(doc.Summary))
	}
	for _, sh := range shards {
		for _, s := range readReplay(t, sh).Summary {
			for _, m := range doc.Summary {
				if m.Case == s.Case && m.Route == s.Route && (m.MedianNs != s.MedianNs || m.Ratio != s.Ratio || m.RatioLo != s.RatioLo || m.Verdict != s.Verdict) {
					t.Errorf("merged row %s/%s %+v, its shard's %+v", m.Case, m.Route, m, s)
				}
			}
		}
	}
	audit := func(rep string) map[string]any {
		t.Helper()
		out := filepath.Join(t.TempDir(), "audit.json")
		tp(t, "audit", "--capture", capDir, "--prepared", prep, "--replay", rep, "--output", out)
		return readAudit(t, out)
	}
	if a := audit(merged); a["verdict"] != "pass" || a["claims"].(map[string]any)["supported"].(float64) != 8 {
		t.Fatalf("audit of the merge: verdict %v claims %v; checks %v", a["verdict"], a["claims"], failedOf(a))
	}

	refuse := func(name, want string, extra []string, dirs ...string) {
		t.Helper()
		code, _, errs := merge(filepath.Join(t.TempDir(), "m"), extra, dirs...)
		if code != exitFailure || !strings.Contains(errs, want) {
			t.Errorf("merge %s = exit %d, stderr %q; want it refused with %q", name, code, errs, want)
		}
	}
	refuse("of two shards", "merge: shards 1/3 missing: the plan is every shard's visits, so give all 3", nil, shards[0], shards[2])
	refuse("with a shard twice", "shard 1/3 given twice: "+shards[1]+" and "+shards[1], nil, shards[0], shards[1], shards[1], shards[2])
	other := filepath.Join(t.TempDir(), "prepared2")
	if code, out, errs := tp(t, "prepare", "--capture", capDir, "--output", other); code != exitOK {
		t.Fatalf("prepare = exit %d:\n%s%s", code, out, errs)
	}
	stranger := filepath.Join(root, "stranger")
	replayShard(t, other, inputs, "1/3", stranger)
	refuse("with a shard of another prepared stage", "shard "+stranger+": replays prepared "+artifacts.Short(readReplay(t, stranger).Prepared)+", not "+prep+" (", nil, shards[0], stranger, shards[2])
	whole := filepath.Join(root, "whole")
	if code, out, errs := tp(t, append([]string{"replay", "--prepared", prep, "--output", whole}, shardFlags...)...); code != exitOK {
		t.Fatalf("replay = exit %d:\n%s%s", code, out, errs)
	}
	refuse("with a whole replay", "shard "+whole+": tilepipe.json config.shard: absent, a replay of the whole plan", nil, shards[0], whole, shards[2])
	inputs2 := filepath.Join(t.TempDir(), "inputs.json")
	if err := sets.DrawFile(inputs2); err != nil {
		t.Fatal(err)
	}
	reseeded := filepath.Join(root, "reseeded")
	replayShard(t, prep, inputs2, "1/3", reseeded)
	refuse("of shards with other input seeds", "shard 1/3 ("+reseeded+"): input seeds differ from shard 0/3's", nil, shards[0], reseeded, shards[2])
	if code, _, errs := tp(t, append([]string{"replay", "--prepared", prep, "--output", filepath.Join(t.TempDir(), "r"), "--shard", "1/3"}, shardFlags...)...); code != exitFailure || !strings.Contains(errs, "--shard 1/3: give --inputs FILE") {
		t.Errorf("replay --shard without --inputs = exit %d, stderr %q", code, errs)
	}
	if code, _, errs := tp(t, append([]string{"replay", "--prepared", prep, "--output", filepath.Join(t.TempDir(), "r"), "--shard", "0/5", "--inputs", inputs}, shardFlags...)...); code != exitFailure || !strings.Contains(errs, "--shard 0/5: the capture has 4 cases") {
		t.Errorf("replay --shard 0/5 of 4 cases = exit %d, stderr %q", code, errs)
	}
	if code, _, errs := tp(t, "slurm", "submit", "--dry-run", "--prepared", prep, "--shards", "5", "--output", filepath.Join(t.TempDir(), "job")); code != exitFailure || !strings.Contains(errs, "--shards 5: prepared "+prep+" has 4 cases, and a shard is a set of whole cases: want at most 4 shards") {
		t.Errorf("slurm submit --shards 5 of 4 cases = exit %d, stderr %q", code, errs)
	}
	job := filepath.Join(t.TempDir(), "job")
	if code, _, errs := tp(t, "slurm", "submit", "--dry-run", "--prepared", prep, "--shards", "2", "--output", job, "--partition", "gpu\nrm -rf /"); code != exitFailure || !strings.Contains(errs, `--partition "gpu\nrm -rf /": want one word of letters, digits and _.:,=/@%+- (it becomes an #SBATCH line)`) {
		t.Errorf("slurm submit with a partition of two lines = exit %d, stderr %q", code, errs)
	}
	if _, err := os.Lstat(job); err == nil {
		t.Errorf("a refused slurm submit left %s", job)
	}
	if code, _, errs := tp(t, "replay", "--prepared", prep, "--output", filepath.Join(t.TempDir(), "r"), "--shard", "3/3"); code != exitUsage || !strings.Contains(errs, `--shard "3/3": want I/N`) {
		t.Errorf("replay --shard 3/3 = exit %d, stderr %q", code, errs)
	}

	// Another machine: shard 2's receipt says another CPU, re-hashed as a
	// careful forger would.
	elsewhere := copyStage(t, shards[2])
	forge(t, elsewhere, artifacts.ReplayType, func(_ *artifacts.Store, _ *artifacts.ReplayDoc, rec *artifacts.Receipt) {
		rec.Environment.CPUModel = "Another CPU"
	})
	refuse("of mixed machines", "merge: the shards ran on machines whose times do not compare: shard 2/3 on ", nil, shards[0], shards[1], elsewhere)
	mixed := filepath.Join(root, "mixed")
	if code, out, errs := merge(mixed, []string{"--allow-mixed"}, shards[0], shards[1], elsewhere); code != exitOK || !strings.Contains(out, "MIXED machines") || !strings.Contains(out, "| passed, on shard 2/3 (") {
		t.Fatalf("merge --allow-mixed = exit %d:\n%s%s", code, out, errs)
	}
	a := audit(mixed)
	if a["verdict"] != "pass" {
		t.Fatalf("audit of a mixed merge: %v %v", a["verdict"], failedOf(a))
	}
	for _, r := range a["rows"].([]any) {
		if !strings.Contains(strings.Join(marks(r), "; "), "mixed machines: shard ") {
			t.Errorf("row %v of a mixed merge is not marked with its machine", r)
		}
	}

	// Forged merges: each re-hashed consistently.
	for _, f := range []struct {
		name, check, want string
		edit              func(*artifacts.ReplayDoc)
	}{
		{"a failed visit passed", "merge", "visits: the merged document's are not the shards' in shard order, renumbered", func(d *artifacts.ReplayDoc) { d.Visits[3].Reason = "edited" }},
		{"a faster median", "summaries", "medianNs: stored", func(d *artifacts.ReplayDoc) { d.Summary[0].MedianNs /= 2 }},
		{"the mix hidden", "merge", "merge.mixed [], the shards' receipts give", func(d *artifacts.ReplayDoc) { d.Merge.Mixed = nil }},
		{"a shard's cases moved", "merge", "merge.shards says", func(d *artifacts.ReplayDoc) { d.Merge.Shards[1].Cases = d.Merge.Shards[0].Cases }},
		{"the shards dropped", "merge", "merge.shards: none; a merged replay is made of at least one shard", func(d *artifacts.ReplayDoc) { d.Merge.Shards = nil }},
		{"a shard spec on the merge", "merge", "config.shard 0/3: a merged replay is the whole plan", func(d *artifacts.ReplayDoc) { d.Config.Shard = artifacts.ShardSpec{Index: 0, Count: 3} }},
		{"a setting changed", "merge", "shard 0/3 config.samples: 2, the document says 9", func(d *artifacts.ReplayDoc) { d.Config.Samples = 9 }},
		{"other input seeds", "merge", "shard 0/3: input seeds differ from the merged replay's", func(d *artifacts.ReplayDoc) { d.Inputs.Replay++ }},
		{"a machine renamed", "merge", `merge.shards[1].machine "elsewhere", the shard's receipt gives`, func(d *artifacts.ReplayDoc) { d.Merge.Shards[1].Machine = "elsewhere" }},
		{"an offset moved", "merge", "merge.shards[2]: offsets 5/", func(d *artifacts.ReplayDoc) { d.Merge.Shards[2].VisitOffset = 5 }},
		{"a session edited", "merge", "sessions: the merged document's are not the shards' in shard order, renumbered", func(d *artifacts.ReplayDoc) { d.Sessions[1].ClockHz *= 2 }},
		{"a shard dropped", "merge rows", "row gemm-16x16x16/naive: no shard's summary has it", func(d *artifacts.ReplayDoc) { d.Merge.Shards = d.Merge.Shards[1:] }},
	} {
		dir := copyStage(t, mixed)
		forge(t, dir, artifacts.ReplayType, func(_ *artifacts.Store, d *artifacts.ReplayDoc, _ *artifacts.Receipt) { f.edit(d) })
		a := audit(dir)
		if ev := checkEvidence(a, f.check); a["verdict"] != "fail" || !strings.Contains(ev, f.want) {
			t.Errorf("audit of a merge forged with %s: verdict %v, %s evidence %q; want %q", f.name, a["verdict"], f.check, ev, f.want)
		}
	}
	// The merged receipt: a merge dated before a shard finished, and one
	// that does not name a shard it consumed.
	for _, f := range []struct {
		name, want string
		edit       func(*artifacts.Receipt)
	}{
		{"begun before a shard finished", "the merge started ", func(r *artifacts.Receipt) { r.StartedOn = r.StartedOn.Add(-24 * time.Hour) }},
		{"a shard not consumed", "merged receipt: shard 2/3's manifest ", func(r *artifacts.Receipt) {
			r.ResolvedDependencies = slices.DeleteFunc(r.ResolvedDependencies, func(d artifacts.Dependency) bool { return strings.HasPrefix(d.Name, "shard 2/3 ") })
		}},
	} {
		dir := copyStage(t, mixed)
		forge(t, dir, artifacts.ReplayType, func(_ *artifacts.Store, _ *artifacts.ReplayDoc, r *artifacts.Receipt) { f.edit(r) })
		a := audit(dir)
		if ev := checkEvidence(a, "merge"); a["verdict"] != "fail" || !strings.Contains(ev, f.want) {
			t.Errorf("audit of a merge whose receipt was forged (%s): verdict %v, merge evidence %q; want %q", f.name, a["verdict"], ev, f.want)
		}
	}
	// The shards are part of the checkpoint: gone, or swapped for another
	// replay of the same shard, the audit says which.
	moved := copyStage(t, merged)
	if err := os.Rename(shards[1], shards[1]+".gone"); err != nil {
		t.Fatal(err)
	}
	if ev := checkEvidence(audit(moved), "shard blobs"); !strings.Contains(ev, "merge.shards[1] (shard 1/3): ") {
		t.Errorf("audit with shard 1 gone: shard blobs evidence %q", ev)
	}
	replayShard(t, prep, inputs, "1/3", shards[1])
	if ev := checkEvidence(audit(merged), "shard blobs"); !strings.Contains(ev, "merge.shards[1] (shard 1/3): "+shards[1]+" holds manifest sha256:") {
		t.Errorf("audit with shard 1 replayed again: shard blobs evidence %q", ev)
	}
}

// copyStage copies a stage directory beside itself (so a merged replay's
// relative shard paths still resolve) and returns the copy.
func copyStage(t *testing.T, src string) string {
	t.Helper()
	dst, err := os.MkdirTemp(filepath.Dir(src), filepath.Base(src)+"-copy-")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

// evidence is the evidence of the audit check named name, joined.
func checkEvidence(a map[string]any, name string) string {
	for _, c := range a["checks"].([]any) {
		c := c.(map[string]any)
		if c["name"] == name {
			var ev []string
			for _, e := range asList(c["evidence"]) {
				ev = append(ev, e.(string))
			}
			return c["status"].(string) + ": " + strings.Join(ev, " | ")
		}
	}
	return "no check " + name
}

func failedOf(a map[string]any) []string {
	var out []string
	for _, c := range a["checks"].([]any) {
		c := c.(map[string]any)
		if c["status"] != "PASSED" {
			out = append(out, c["name"].(string)+": "+checkEvidence(a, c["name"].(string)))
		}
	}
	return out
}

func marks(r any) []string {
	var out []string
	for _, m := range asList(r.(map[string]any)["marks"]) {
		out = append(out, m.(string))
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
