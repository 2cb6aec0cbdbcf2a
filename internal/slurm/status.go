package slurm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tilepipe/tilepipe/artifacts"
)

// Status is a job directory's state: each shard's, the merge's and the
// audit's, from Slurm and from disk. Disk is the truth of what is done:
// a shard is complete when its stage is committed, whatever Slurm says.
type Status struct {
	Shards []ShardStatus `json:"shards"`
	// Merge is the latest merge job and its Slurm state; MergedManifest
	// the merged replay's manifest once it is committed; Verdict the
	// audit's, once audit.json is written.
	Merge          string `json:"merge"`
	MergeSlurm     string `json:"mergeSlurm"`
	MergedManifest string `json:"mergedManifest,omitempty"`
	Verdict        string `json:"verdict,omitempty"`
}

// ShardStatus is one shard's state.
type ShardStatus struct {
	Index int    `json:"index"`
	Job   string `json:"job"`   // its latest task, ARRAY_INDEX ("" before any)
	Slurm string `json:"slurm"` // that task's state in Slurm (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...)
	// Manifest is the committed shard stage's manifest; else Visits and
	// Planned count what its journal holds of its fixed plan (a task
	// began it), or Disk says there is nothing.
	Manifest string `json:"manifest,omitempty"`
	Visits   int    `json:"visits"`
	Planned  int    `json:"planned"`
	Disk     string `json:"disk"`
}

// Committed: the shard's stage is on disk, complete.
func (s ShardStatus) Committed() bool { return s.Manifest != "" }

// Active: Slurm has the shard's task pending or running.
func (s ShardStatus) Active() bool {
	switch s.Slurm {
	case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED":
		return true
	}
	return false
}

// Status reads each shard's task state from Slurm (scontrol while
// slurmctld remembers the job, else sacct) and its stage from disk.
func (j *Job) Status(ctx context.Context) (*Status, error) {
	st := &Status{}
	states := map[string]string{} // "array_index" or job id -> state
	for _, sub := range j.Submissions {
		for _, id := range []string{sub.Array, sub.Merge} {
			if id != "" {
				for k, v := range jobStates(ctx, id) {
					states[k] = v
				}
			}
		}
	}
	for i := range j.Shards {
		s := ShardStatus{Index: i}
		for _, sub := range j.Submissions {
			for _, k := range sub.Shards {
				if k == i {
					s.Job = sub.Array + "_" + strconv.Itoa(i)
				}
			}
		}
		if s.Job != "" {
			s.Slurm = states[s.Job]
			if s.Slurm == "" {
				s.Slurm = Gone
			}
		}
		s.Manifest, s.Visits, s.Planned, s.Disk = onDisk(j.ShardDir(i))
		st.Shards = append(st.Shards, s)
	}
	if n := len(j.Submissions); n > 0 && j.Submissions[n-1].Merge != "" {
		st.Merge = j.Submissions[n-1].Merge
		st.MergeSlurm = states[st.Merge]
		if st.MergeSlurm == "" {
			st.MergeSlurm = Gone
		}
	}
	st.MergedManifest, _, _, _ = onDisk(filepath.Join(j.Dir, MergedDir))
	if b, err := os.ReadFile(filepath.Join(j.Dir, AuditFile)); err == nil {
		var a struct {
			Predicate struct {
				Verdict string `json:"verdict"`
				Claims  struct{ Supported, Unsupported int }
			} `json:"predicate"`
		}
		if json.Unmarshal(b, &a) == nil {
			st.Verdict = fmt.Sprintf("%s, %d of %d claims supported", a.Predicate.Verdict, a.Predicate.Claims.Supported, a.Predicate.Claims.Supported+a.Predicate.Claims.Unsupported)
		}
	}
	return st, nil
}

// onDisk reads a stage directory without re-hashing it (status is a
// look; merge and audit verify): its committed manifest, else how many
// visits its journal holds of how many its plan.json plans.
func onDisk(dir string) (manifest string, visits, planned int, what string) {
	if b, err := os.ReadFile(filepath.Join(dir, ocispec.ImageIndexFile)); err == nil {
		var idx ocispec.Index
		if json.Unmarshal(b, &idx) == nil && len(idx.Manifests) == 1 {
			return string(idx.Manifests[0].Digest), 0, 0, "committed " + artifacts.Short(idx.Manifests[0].Digest)
		}
		return "", 0, 0, "index.json unreadable"
	}
	if _, err := os.Lstat(dir); err != nil {
		return "", 0, 0, "not started"
	}
	if b, err := os.ReadFile(filepath.Join(dir, "plan.json")); err == nil {
		var pr artifacts.PlanRecord
		if json.Unmarshal(b, &pr) == nil {
			planned = len(pr.Plan)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "journal.jsonl")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			if bytes.HasPrefix(sc.Bytes(), []byte(`{"visit":`)) {
				visits++
			}
		}
	}
	return "", visits, planned, fmt.Sprintf("incomplete: %d of %d planned visits journaled (resumable)", visits, planned)
}

// jobStates asks Slurm the state of a job and, for an array, of each of
// its tasks: scontrol while slurmctld keeps the job (MinJobAge), and
// sacct, where accounting is on, for what scontrol no longer knows. Keys:
// "ARRAY_INDEX" for tasks, the job id for a plain job.
func jobStates(ctx context.Context, id string) map[string]string {
	out := map[string]string{}
	if b, err := exec.CommandContext(ctx, "scontrol", "show", "job", "-o", id).Output(); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := map[string]string{}
			for _, kv := range strings.Fields(line) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					f[k] = v
				}
			}
			state := f["JobState"]
			if state == "" {
				continue
			}
			if task, ok := f["ArrayTaskId"]; ok && f["ArrayJobId"] != "" {
				for _, t := range expand(task) {
					out[f["ArrayJobId"]+"_"+t] = state
				}
				continue
			}
			out[f["JobId"]] = state
		}
	}
	b, err := exec.CommandContext(ctx, "sacct", "-n", "-P", "-X", "-j", id, "-o", "JobID,State").Output()
	if err != nil {
		return out
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(line, "|"); ok {
			state, _, _ := strings.Cut(v, " ") // "CANCELLED by 0"
			keys := []string{k}
			if base, tasks, ok := strings.Cut(strings.Trim(k, "]"), "_["); ok {
				keys = nil
				for _, t := range expand(tasks) {
					keys = append(keys, base+"_"+t)
				}
			}
			for _, k := range keys {
				if _, ok := out[k]; !ok {
					out[k] = state
				}
			}
		}
	}
	return out
}

// Gone is a task's state when Slurm keeps no record of it: without
// accounting, a task cancelled before it started leaves none, nor does a
// job slurmctld has purged (MinJobAge).
const Gone = "GONE"

// expand reads a task list such as "2-3,5" or "4%2".
func expand(s string) []string {
	s, _, _ = strings.Cut(s, "%")
	var out []string
	for _, part := range strings.Split(s, ",") {
		lo, hi, ok := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if !ok || err1 != nil || err2 != nil {
			out = append(out, part)
			continue
		}
		for i := a; i <= b; i++ {
			out = append(out, strconv.Itoa(i))
		}
	}
	return out
}

// Table renders the status for people.
func (st *Status) Table() string {
	var b strings.Builder
	b.WriteString("| shard | slurm task | slurm state | on disk |\n|---|---|---|---|\n")
	for _, s := range st.Shards {
		job, state := s.Job, s.Slurm
		if job == "" {
			job, state = "-", "never submitted"
		}
		fmt.Fprintf(&b, "| %d/%d | %s | %s | %s |\n", s.Index, len(st.Shards), job, state, s.Disk)
	}
	merged := "not committed"
	if st.MergedManifest != "" {
		merged = "committed " + artifacts.Short(artifacts.Digest(st.MergedManifest))
	}
	merge, state := st.Merge, st.MergeSlurm
	if merge == "" {
		merge, state = "-", "never submitted"
	}
	fmt.Fprintf(&b, "\nmerge job %s: %s; merged replay %s", merge, state, merged)
	if st.Verdict != "" {
		fmt.Fprintf(&b, "; audit: %s", st.Verdict)
	}
	b.WriteString("\n")
	var incomplete []string
	for _, s := range st.Shards {
		if !s.Committed() && !s.Active() {
			state := s.Slurm
			if s.Job == "" {
				state = "never submitted"
			}
			incomplete = append(incomplete, fmt.Sprintf("%d/%d (%s, %s)", s.Index, len(st.Shards), state, s.Disk))
		}
	}
	if strings.Contains(b.String(), "| "+Gone+" |") {
		b.WriteString(Gone + ": Slurm keeps no record of the task (cancelled before it ran, or purged; sacct knows where accounting is on)\n")
	}
	if len(incomplete) > 0 {
		fmt.Fprintf(&b, "incomplete shards: %s: tilepipe slurm resubmit resubmits them\n", strings.Join(incomplete, "; "))
	}
	return b.String()
}
