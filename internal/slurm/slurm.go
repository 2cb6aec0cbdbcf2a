// Package slurm runs a replay as a Slurm job array (docs/scale.md): one
// task per shard, each `tilepipe replay --shard I/N`, then a job that
// depends on all of them (afterok) and merges and audits. Slurm is the
// engine: tilepipe writes the scripts, submits them with sbatch, and reads
// back what squeue, scontrol and sacct say and what is on disk; it never
// places, schedules or retries work itself.
package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/sets"
)

// The job directory's files (Job.Dir).
const (
	JobFile     = "job.json"
	ShardScript = "shard.sbatch"
	MergeScript = "merge.sbatch"
	ShardsDir   = "shards"
	MergedDir   = "merged"
	AuditFile   = "audit.json"
	AuditStage  = "audit"
	LogsDir     = "logs"
)

// Options are what sbatch is given for every task (each optional).
type Options struct {
	Partition string `json:"partition,omitempty"`
	Gres      string `json:"gres,omitempty"`
	Time      string `json:"time,omitempty"`
	Account   string `json:"account,omitempty"`
	// CPUsPerTask, when set, asks for that many cores per shard instead
	// of a whole node (--exclusive, the default): shards that share a
	// node time beside each other (docs/scale.md).
	CPUsPerTask int `json:"cpusPerTask,omitempty"`
}

// Job is a job directory's job.json: what was submitted, and every
// submission's Slurm job ids.
type Job struct {
	Schema   int    `json:"schema"`
	Dir      string `json:"dir"`
	Prepared string `json:"prepared"`
	Capture  string `json:"capture"`
	Shards   int    `json:"shards"`
	// Tilepipe is the program every task runs; ReplayArgs the replay flags
	// every shard gets (the same for all, so merge accepts them).
	Tilepipe    string       `json:"tilepipe"`
	ReplayArgs  []string     `json:"replayArgs"`
	Options     Options      `json:"options"`
	Submissions []Submission `json:"submissions"`
}

// Submission is one sbatch of shard tasks and the merge job after them.
type Submission struct {
	At     time.Time `json:"at"`
	Shards []int     `json:"shards"`
	Array  string    `json:"array"` // the array's job id
	Merge  string    `json:"merge"` // the merge job's id
}

// Config is what `tilepipe slurm submit` was asked.
type Config struct {
	Prepared, Capture, Output string
	Shards                    int
	Tilepipe                  string
	ReplayArgs                []string
	Options                   Options
}

// Plan makes the job directory (it must be new): job.json, the input
// seeds every shard shares, and the two scripts; it submits nothing.
func Plan(cfg Config) (*Job, error) {
	if cfg.Shards < 1 {
		return nil, fmt.Errorf("--shards: want at least 1, got %d", cfg.Shards)
	}
	abs := func(p string) (string, error) {
		if p == "" {
			return "", nil
		}
		return filepath.Abs(p)
	}
	var err error
	j := &Job{Schema: 1, Shards: cfg.Shards, ReplayArgs: cfg.ReplayArgs, Options: cfg.Options, Submissions: []Submission{}}
	for _, f := range []struct {
		dst *string
		src string
	}{{&j.Dir, cfg.Output}, {&j.Prepared, cfg.Prepared}, {&j.Capture, cfg.Capture}, {&j.Tilepipe, cfg.Tilepipe}} {
		if *f.dst, err = abs(f.src); err != nil {
			return nil, err
		}
	}
	// Options become #SBATCH lines and paths are named in them unquoted:
	// a newline or space would make another line or another option.
	o := cfg.Options
	for _, f := range [][2]string{{"--partition", o.Partition}, {"--gres", o.Gres}, {"--time", o.Time}, {"--account", o.Account}, {"--output", j.Dir}} {
		if !sbatchWord.MatchString(f[1]) && f[1] != "" {
			return nil, fmt.Errorf("%s %q: want one word of letters, digits and _.:,=/@%%+- (it becomes an #SBATCH line)", f[0], f[1])
		}
	}
	for _, f := range [][2]string{{"--prepared", j.Prepared}, {"--capture", cfg.Capture}, {"--tilepipe", j.Tilepipe}} {
		if strings.ContainsAny(f[1], "\n\r") {
			return nil, fmt.Errorf("%s %q: a path with a line break", f[0], f[1])
		}
	}
	// The prepared stage, verified before anything is submitted (each
	// shard verifies it again before it times): its cases bound the
	// shards, its receipt names the capture.
	var pdoc artifacts.PreparedDoc
	prep, err := artifacts.ReadStage(j.Prepared, &pdoc, nil)
	if err != nil {
		return nil, fmt.Errorf("--prepared: %w", err)
	}
	cases := map[string]bool{}
	for _, e := range pdoc.Entries {
		cases[e.Case] = true
	}
	if cfg.Shards > len(cases) {
		return nil, fmt.Errorf("--shards %d: prepared %s has %d cases, and a shard is a set of whole cases: want at most %d shards", cfg.Shards, cfg.Prepared, len(cases), len(cases))
	}
	if j.Capture == "" {
		if j.Capture, err = captureOf(prep, cfg.Prepared); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(j.Tilepipe); err != nil {
		return nil, fmt.Errorf("--tilepipe: %w", err)
	}
	if err := os.Mkdir(j.Dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("--output %s: exists; a Slurm job directory must be new (tilepipe slurm resubmit continues one)", cfg.Output)
		}
		return nil, err
	}
	if err := j.write(); err != nil {
		os.RemoveAll(j.Dir) // this call made it: a half-made job directory is nobody's
		return nil, err
	}
	return j, nil
}

// sbatchWord is what an sbatch option's value may be.
var sbatchWord = regexp.MustCompile(`^[A-Za-z0-9_.:,=/@%+-]+$`)

// Word reports whether s may stand unquoted in an #SBATCH line (and in a
// slurm.conf): one word of letters, digits and _.:,=/@%+-.
func Word(s string) bool { return sbatchWord.MatchString(s) }

// write fills a new job directory: its folders, the input seeds, the two
// scripts and job.json.
func (j *Job) write() error {
	for _, d := range []string{ShardsDir, LogsDir} {
		if err := os.Mkdir(filepath.Join(j.Dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := sets.DrawFile(filepath.Join(j.Dir, sets.InputsFile)); err != nil {
		return err
	}
	for name, script := range map[string]string{ShardScript: j.shardScript(), MergeScript: j.mergeScript()} {
		if err := artifacts.WriteFileAtomic(filepath.Join(j.Dir, name), []byte(script)); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(j.Dir, name), 0o755); err != nil {
			return err
		}
	}
	return j.save()
}

// Submit plans the job directory and submits every shard.
func Submit(ctx context.Context, cfg Config) (*Job, error) {
	j, err := Plan(cfg)
	if err != nil {
		return nil, err
	}
	var all []int
	for i := range j.Shards {
		all = append(all, i)
	}
	return j, j.submit(ctx, all)
}

// Load reads a job directory's job.json.
func Load(dir string) (*Job, error) {
	b, err := os.ReadFile(filepath.Join(dir, JobFile))
	if err != nil {
		return nil, fmt.Errorf("slurm job %s: %w (tilepipe slurm submit makes one)", dir, err)
	}
	var j Job
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("slurm job %s: %s: %w", dir, JobFile, err)
	}
	if j.Schema != 1 || j.Shards < 1 {
		return nil, fmt.Errorf("slurm job %s: %s: schema %d, %d shards: want schema 1 and at least one shard", dir, JobFile, j.Schema, j.Shards)
	}
	if abs, err := filepath.Abs(dir); err == nil && abs != j.Dir {
		return nil, fmt.Errorf("slurm job %s: %s: dir %s: the scripts name that directory; a moved job directory cannot be resubmitted", dir, JobFile, j.Dir)
	}
	return &j, nil
}

func (j *Job) save() error {
	b, err := artifacts.MarshalJSON(j)
	if err != nil {
		return err
	}
	return artifacts.WriteFileAtomic(filepath.Join(j.Dir, JobFile), b)
}

// ShardDir is shard i's replay directory.
func (j *Job) ShardDir(i int) string { return filepath.Join(j.Dir, ShardsDir, strconv.Itoa(i)) }

// quote makes s one word of a bash command.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (j *Job) sbatchLines(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#SBATCH --job-name=%s\n", name)
	o := j.Options
	for _, kv := range [][2]string{{"partition", o.Partition}, {"gres", o.Gres}, {"time", o.Time}, {"account", o.Account}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, "#SBATCH --%s=%s\n", kv[0], kv[1])
		}
	}
	return b.String()
}

// shardScript is the array task: shard $SLURM_ARRAY_TASK_ID of N, resumed
// where an earlier task left it. A committed shard (index.json, its
// commit point) is a success whatever its rows say: failures are results,
// and the merge keeps them.
func (j *Job) shardScript() string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n# tilepipe slurm: one replay shard per array task (docs/scale.md). Kept as submitted.\n")
	b.WriteString(j.sbatchLines("tilepipe-shard"))
	fmt.Fprintf(&b, "#SBATCH --output=%s/shard-%%A_%%a.out\n", j.Dir+"/"+LogsDir)
	if j.Options.CPUsPerTask > 0 {
		fmt.Fprintf(&b, "#SBATCH --cpus-per-task=%d\n", j.Options.CPUsPerTask)
	} else {
		b.WriteString("#SBATCH --exclusive\n")
	}
	fmt.Fprintf(&b, "set -u\ni=${SLURM_ARRAY_TASK_ID:?run as a Slurm array task}\nout=%s/$i\nresume=()\n", quote(filepath.Join(j.Dir, ShardsDir)))
	b.WriteString("if [ -e \"$out/index.json\" ]; then echo \"shard $i is committed already\"; exit 0; fi\n")
	b.WriteString("if [ -e \"$out\" ]; then resume=(--resume); fi\n")
	args := []string{quote(j.Tilepipe), "replay", "--prepared", quote(j.Prepared), "--capture", quote(j.Capture), "--output", `"$out"`, "--shard", fmt.Sprintf(`"$i/%d"`, j.Shards), "--inputs", quote(filepath.Join(j.Dir, sets.InputsFile)), `"${resume[@]}"`}
	for _, a := range j.ReplayArgs {
		args = append(args, quote(a))
	}
	fmt.Fprintf(&b, "%s &\npid=$!\ntrap 'kill -TERM $pid' TERM INT\nwait $pid; rc=$?\nwait $pid 2>/dev/null\n", strings.Join(args, " "))
	b.WriteString("if [ -e \"$out/index.json\" ]; then exit 0; fi\nexit $rc\n")
	return b.String()
}

// mergeScript merges every shard and audits the merge into audit.json
// (with audit.md) and the audit stage, whose subject is the merged replay.
func (j *Job) mergeScript() string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n# tilepipe slurm: merge and audit, after every shard task succeeded (afterok). Kept as submitted.\n")
	b.WriteString(j.sbatchLines("tilepipe-merge"))
	fmt.Fprintf(&b, "#SBATCH --output=%s/merge-%%j.out\nset -u\n", j.Dir+"/"+LogsDir)
	merged := filepath.Join(j.Dir, MergedDir)
	args := []string{quote(j.Tilepipe), "merge", "--prepared", quote(j.Prepared), "--capture", quote(j.Capture), "--output", quote(merged)}
	sign := ""
	for i, a := range j.ReplayArgs {
		if a == "--sign" && i+1 < len(j.ReplayArgs) {
			sign = " --sign " + quote(j.ReplayArgs[i+1]) // the shards' key signs the merge and the audit too
		}
	}
	args[len(args)-1] += sign
	for i := range j.Shards {
		args = append(args, quote(j.ShardDir(i)))
	}
	fmt.Fprintf(&b, "if [ ! -e %s/index.json ]; then\n  %s\n  [ -e %s/index.json ] || exit 1\nfi\n", quote(merged), strings.Join(args, " "), quote(merged))
	fmt.Fprintf(&b, "exec %s audit --capture %s --prepared %s --replay %s --output %s --stage %s%s\n", quote(j.Tilepipe), quote(j.Capture), quote(j.Prepared), quote(merged), quote(filepath.Join(j.Dir, AuditFile)), quote(filepath.Join(j.Dir, AuditStage)), sign)
	return b.String()
}

// submit submits the array of the given shards and the merge job after it.
func (j *Job) submit(ctx context.Context, shards []int) error {
	var ids []string
	for _, i := range shards {
		ids = append(ids, strconv.Itoa(i))
	}
	array, err := sbatch(ctx, "--array="+strings.Join(ids, ","), filepath.Join(j.Dir, ShardScript))
	if err != nil {
		return err
	}
	merge, err := sbatch(ctx, "--dependency=afterok:"+array, "--kill-on-invalid-dep=yes", filepath.Join(j.Dir, MergeScript))
	if err != nil {
		return fmt.Errorf("%w (the shard array %s was submitted; tilepipe slurm resubmit %s submits the merge again)", err, array, j.Dir)
	}
	j.Submissions = append(j.Submissions, Submission{At: time.Now().UTC(), Shards: shards, Array: array, Merge: merge})
	return j.save()
}

// sbatch submits a script and returns its job id.
func sbatch(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "sbatch", append([]string{"--parsable"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("sbatch %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";") // "id;cluster" on a federation
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("sbatch %s: printed %q, want a job id", strings.Join(args, " "), out)
	}
	return id, nil
}

// Resubmit submits again every shard that is not committed, resuming
// those a task began, and a merge job after them; none incomplete, it
// submits the merge job alone unless the merged replay is committed and
// audited.
func Resubmit(ctx context.Context, dir string) (*Job, []int, error) {
	j, err := Load(dir)
	if err != nil {
		return nil, nil, err
	}
	st, err := j.Status(ctx)
	if err != nil {
		return nil, nil, err
	}
	var todo []int
	for _, s := range st.Shards {
		if s.Active() {
			return nil, nil, fmt.Errorf("slurm resubmit %s: shard %d is %s in job %s: wait for it, or scancel it first", dir, s.Index, s.Slurm, s.Job)
		}
		if !s.Committed() {
			todo = append(todo, s.Index)
		}
	}
	if len(todo) > 0 {
		return j, todo, j.submit(ctx, todo)
	}
	if st.MergedManifest != "" && st.Verdict != "" {
		return nil, nil, fmt.Errorf("slurm resubmit %s: every shard and the merge are committed and audited: nothing to resubmit", dir)
	}
	// Every shard is committed, the merge or its audit is not: the merge
	// job again (its script skips a committed merge and audits it).
	merge, err := sbatch(ctx, filepath.Join(j.Dir, MergeScript))
	if err != nil {
		return nil, nil, err
	}
	j.Submissions = append(j.Submissions, Submission{At: time.Now().UTC(), Shards: []int{}, Merge: merge})
	return j, nil, j.save()
}

// captureOf is the capture directory a prepared stage's receipt names,
// which the scripts then give every stage explicitly.
func captureOf(prep *artifacts.Stage, dir string) (string, error) {
	rc, err := prep.Receipt()
	if err != nil {
		return "", err
	}
	p, _ := rc.Predicate.Parameters["capture"].(string)
	if p == "" {
		return "", fmt.Errorf("prepared %s: receipt parameters.capture: want the capture directory; pass --capture", dir)
	}
	return p, nil
}
