package slurm

import (
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/internal/golden"
)

func TestExpand(t *testing.T) {
	for in, want := range map[string][]string{"3": {"3"}, "2-4": {"2", "3", "4"}, "0,2-3": {"0", "2", "3"}, "1-3%2": {"1", "2", "3"}} {
		if got := expand(in); !slices.Equal(got, want) {
			t.Errorf("expand(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestScripts: the shard script resumes a begun shard, counts a committed
// one as done whatever its rows say, and forwards every replay flag
// quoted; the merge script merges every shard and audits into audit.json.
func TestScripts(t *testing.T) {
	j := &Job{Dir: "/shared/job", Prepared: "/shared/p", Capture: "/shared/c", Shards: 3, Tilepipe: "/shared/bin/tilepipe",
		ReplayArgs: []string{"--baseline", "it's", "--threads", "4"}, Options: Options{Partition: "gpu", Gres: "gpu:1"}}
	s := j.shardScript()
	for _, want := range []string{"#SBATCH --partition=gpu\n", "#SBATCH --gres=gpu:1\n", "#SBATCH --exclusive\n",
		`if [ -e "$out" ]; then resume=(--resume); fi`, `--shard "$i/3" --inputs '/shared/job/inputs.json' "${resume[@]}" '--baseline' 'it'\''s' '--threads' '4' &`,
		`if [ -e "$out/index.json" ]; then exit 0; fi`} {
		if !contains(s, want) {
			t.Errorf("shard script lacks %q:\n%s", want, s)
		}
	}
	m := j.mergeScript()
	for _, want := range []string{"merge --prepared '/shared/p' --capture '/shared/c' --output '/shared/job/merged' '/shared/job/shards/0' '/shared/job/shards/1' '/shared/job/shards/2'",
		"exec '/shared/bin/tilepipe' audit --capture '/shared/c' --prepared '/shared/p' --replay '/shared/job/merged' --output '/shared/job/audit.json' --stage '/shared/job/audit'"} {
		if !contains(m, want) {
			t.Errorf("merge script lacks %q:\n%s", want, m)
		}
	}
	j.Options.CPUsPerTask = 4
	if s := j.shardScript(); !contains(s, "#SBATCH --cpus-per-task=4\n") || contains(s, "--exclusive") {
		t.Errorf("--cpus-per-task 4:\n%s", s)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestTableGolden: tilepipe slurm status's table as an operator reads it,
// from a hand-made status: a committed shard, a running one, a failed one
// with half its journal, one never submitted, one Slurm forgot; the merge
// job done and audited.
func TestTableGolden(t *testing.T) {
	st := &Status{
		Shards: []ShardStatus{
			{Index: 0, Job: "101_0", Slurm: "COMPLETED", Manifest: "sha256:" + strings.Repeat("a", 64), Disk: "committed sha256:aaaaaaaaaaaa"},
			{Index: 1, Job: "101_1", Slurm: "RUNNING", Visits: 3, Planned: 8, Disk: "begun: 3 of 8 visits"},
			{Index: 2, Job: "101_2", Slurm: "FAILED", Visits: 4, Planned: 8, Disk: "begun: 4 of 8 visits"},
			{Index: 3, Disk: "nothing"},
			{Index: 4, Job: "101_4", Slurm: Gone, Disk: "nothing"},
		},
		Merge: "102", MergeSlurm: "COMPLETED", MergedManifest: "sha256:" + strings.Repeat("b", 64), Verdict: "PASS",
	}
	golden.Check(t, "status.md", []byte(st.Table()))
}
