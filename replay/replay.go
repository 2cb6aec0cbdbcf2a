package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tilepipe/tilepipe/artifacts/sign"
	"github.com/tilepipe/tilepipe/internal/plan"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/crashpoint"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/affinity"
	"github.com/tilepipe/tilepipe/internal/floors"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/internal/record"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/internal/shard"
	"github.com/tilepipe/tilepipe/internal/telemetry"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
)

// Config says how to replay. See [DefaultConfig].
type Config struct {
	Prepared string // committed prepared stage
	Capture  string // capture stage; default: the path in the prepared receipt
	Output   string // new replay directory (or the one to resume)
	Resume   bool
	// Key, when set, signs the receipt (a DSSE envelope, artifacts/sign).
	Key   *sign.Key
	Bwrap string // bubblewrap program; "" finds bwrap on PATH
	// Inputs is the file of input seeds a shard reads (--inputs,
	// [sets.DrawFile]): every shard of one replay times the same inputs.
	Inputs string
	// CohortTarget: no --target was given, so a cohort that sets a target
	// (the capture's, artifacts.CaptureDoc.Target) replaces Target, as a
	// cohort's rounds replace Rounds 0.
	CohortTarget bool
	// DefaultBaseline: no --baseline was given, so where the default
	// baseline (torch-eager) was not captured the replay has none (no
	// ratios, a note says so) instead of refusing.
	DefaultBaseline bool
	artifacts.ReplayConfig
	Progress *progress.Reporter
}

// DefaultConfig: rounds 0 means the cohort's, else [DefaultRounds];
// torch-eager is the baseline of the paired ratios; adaptive to ±1.5%
// within 60 s of visits per row, max rounds 0 meaning
// [DefaultMaxRounds] (or the rounds, if more).
var DefaultConfig = Config{ReplayConfig: artifacts.ReplayConfig{
	Samples: 5, Singles: 5, SampleMs: 20, WarmupMs: 50, TimeoutS: 300,
	Threads: runtime.NumCPU(), Baseline: "torch-eager", Seed: 1, Bootstrap: 2000, Interval: artifacts.IntervalSign, Load: artifacts.LoadExclude, Stage: true, Sets: sets.DefaultWarm, FreshMin: sets.MinFresh, NovelRule: int(sets.CurrentRule), Pin: artifacts.PinThreads,
	L2: artifacts.L2Warm, Target: 0.015, BudgetS: 60,
}}

// DefaultMaxRounds is an adaptive replay's most rounds unless --max-rounds
// says otherwise: at 6 rounds an exact interval spans the extremes, and
// about 100 narrow one to ±1.5% for per-round ratios with 5% noise
// (docs/statistics.md).
const DefaultMaxRounds = 120

const (
	planFile    = "plan.json"
	journalFile = "journal.jsonl"
	workDir     = "work"
	// timerFile (in workDir) names the running visit's top process.
	timerFile = "timer.json"
)

// Result is what replay made.
type Result struct {
	Manifest artifacts.Digest
	Doc      artifacts.ReplayDoc
	Failed   int // failed visits, closure checks and rows
}

type replayer struct {
	cfg     Config
	prep    *artifacts.Stage
	cap     *artifacts.Stage
	pdoc    artifacts.PreparedDoc
	cdoc    artifacts.CaptureDoc
	s       *artifacts.Store
	entries map[artifacts.Pair]*artifacts.Prepared
	cases   map[string]*artifacts.CapturedCase
	inputs  *inputCache
	sandbox *visit.Sandbox // nil: --no-sandbox
	// gpuDevices are the GPU's device nodes a cuda visit's sandbox shows
	// (found when the plan has a cubin entry).
	gpuDevices []string
	gpuErr     error // why there are none: each cuda visit fails with it
	// gpuSuspect names the visit whose CUDA error may have left the GPU
	// unusable: the health check runs before the next GPU visit (""
	// when none); gpuDead is why the GPU failed it: every later GPU
	// visit is not run, with that reason.
	gpuSuspect, gpuDead string
	// monitor reads the GPU's telemetry around every GPU sample; nil
	// until the first GPU visit, or after it failed (restarted then).
	monitor  *telemetry.Monitor
	limiter  *visit.Limiter // nil: no cgroup CPU quota here
	cpuLimit string         // what limits a visit's CPU, for the record
	journal  *os.File
	rec      artifacts.Receipt
	deps     artifacts.Deps
	// sessions so far; the last is this one.
	sessions []artifacts.Session
	// set0 is, per (case, route), the first passed visit and its Set0.
	set0 map[artifacts.Pair]*artifacts.VisitResult
	// visitCores is the mask visits start with (nil: they share replay's).
	visitCores []int
	// phases is where the running visit's wall time has gone so far.
	phases phases
}

// phases is a diagnostic of where a visit's wall time went (inputs and
// buffers, the timer's start and validated call, the warm samples, the
// novel samples, the graph samples, the end and the judging, storing),
// printed after the visit's progress line for whoever plans device time;
// never stored, and nothing is judged by it.
type phases struct {
	t     time.Time
	parts []string
}

func (p *phases) start() { p.t, p.parts = time.Now(), nil }

func (p *phases) mark(name string) {
	now := time.Now()
	p.parts = append(p.parts, name+" "+now.Sub(p.t).Round(time.Millisecond).String())
	p.t = now
}

func (p *phases) String() string { return strings.Join(p.parts, ", ") }

// Run verifies the prepared stage and its capture, then times every
// prepared (case, route) in balanced orders, one process per visit,
// validating every output in full against the oracle.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	start := time.Now().UTC()
	// A sample's span ends when poll returns on the waiting thread, and
	// its goroutine needs a P to read the clock. With one P (GOMAXPROCS=1
	// in the user's environment, or a one-CPU cgroup quota) any other
	// runnable goroutine, the garbage collector's among them, holds that
	// clock back by up to a scheduler slice: 13 µs per call measured for
	// a 40 ns add (TestSlurmArray under GOMAXPROCS=1). Two Ps are enough
	// for the waiting goroutine never to queue behind one.
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	r := &replayer{cfg: cfg, entries: map[artifacts.Pair]*artifacts.Prepared{}, cases: map[string]*artifacts.CapturedCase{}}
	if err := r.open(); err != nil {
		return nil, err
	}
	if err := checkCPU(r.cdoc, func() ([]string, error) { return artifacts.CPUFlags(artifacts.CPUInfoPath) }); err != nil {
		return nil, err
	}
	routes, cases, err := r.settle()
	if err != nil {
		return nil, err
	}
	if err := r.probeMachine(ctx); err != nil {
		return nil, err
	}
	pr, inputsDigest, err := r.planRecord(routes, cases)
	if err != nil {
		return nil, err
	}
	done, closures, err := r.createOrResume(&pr)
	if r.s != nil {
		defer r.s.Release() // committed, it is released already
	}
	if err != nil {
		return nil, err
	}
	defer r.journal.Close()
	cleanup, err := r.beginSession(start, cases, pr, done, inputsDigest)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	programs, err := r.materialize()
	if err != nil {
		return nil, err
	}
	rs := &rounds{pr: &pr, done: done, closures: closures, programs: programs, ad: r.newAdaptive(cases, routes), cases: cases, routes: routes}
	if err := r.runRounds(ctx, rs); err != nil {
		return nil, err
	}
	return r.finish(pr, done, rs.closures, rs.ad.stops)
}

// settle fixes what the replay is of and how it is sized, from the flags,
// the cohort and the rules (docs/statistics.md): its routes and cases (a
// shard's share of them), its rounds, its target and budgets, its level;
// then checks the whole configuration.
func (r *replayer) settle() (routes, cases []string, err error) {
	routes, cases = r.routesAndCases()
	if sh := r.cfg.Shard; sh.Count > 0 {
		if err := shard.Check(sh, len(cases)); err != nil {
			return nil, nil, err
		}
		if r.cfg.Inputs == "" {
			return nil, nil, fmt.Errorf("--shard %s: give --inputs FILE, the input seeds every shard of the replay shares (tilepipe slurm writes %s; docs/scale.md)", sh, sets.InputsFile)
		}
		cases = shard.Cases(cases, sh)
	} else if r.cfg.Inputs != "" {
		return nil, nil, errors.New("--inputs: only a shard (--shard I/N) reads its input seeds from a file; a replay draws its own")
	}
	if r.cfg.Rounds == 0 {
		r.cfg.Rounds = r.cdoc.Rounds // the cohort's default, if it has one
	}
	if r.cfg.Rounds == 0 {
		r.cfg.Rounds = plan.DefaultRounds(len(routes))
	}
	if t := r.cdoc.Target; r.cfg.CohortTarget && t != nil {
		r.cfg.Target = *t / 100
	}
	if r.cfg.Target > 0 && r.cfg.MaxRounds == 0 {
		r.cfg.MaxRounds = max(DefaultMaxRounds, r.cfg.Rounds)
	}
	if r.cfg.Target == 0 {
		if r.cfg.TotalBudgetS > 0 && !r.cfg.CohortTarget {
			r.cfg.Progress.Printf("replay: fixed rounds (target 0): --budget %s does not apply", time.Duration(r.cfg.TotalBudgetS*1e9))
		}
		r.cfg.BudgetS, r.cfg.TotalBudgetS, r.cfg.MaxRounds = 0, 0, 0 // recorded only for adaptive replays
	}
	r.cfg.Level = artifacts.LevelFor(r.cfg.Target)
	if b := r.cfg.Baseline; r.cfg.DefaultBaseline && b != "" && !slices.Contains(routes, b) {
		r.cfg.Progress.Printf("replay: no baseline: the default, %s, is not among the captured routes %v (no ratios; --baseline ROUTE names one)", b, routes)
		r.cfg.Baseline = ""
	}
	return routes, cases, r.checkConfig(routes)
}

// probeMachine finds what this machine gives the visits: the sandbox (and
// the GPU devices a CUDA visit's sandbox shows), the CPU quota, and the
// freezer, without which there is no claim to time.
func (r *replayer) probeMachine(ctx context.Context) error {
	if !r.cfg.NoSandbox {
		sb, err := visit.Probe(ctx, r.cfg.Bwrap)
		if err != nil {
			return fmt.Errorf("replay: no sandbox can be made on this machine: %v; --no-sandbox times without one (the audit marks every row)", err)
		}
		r.sandbox = sb
		for _, e := range r.entries {
			if r.cases[e.Case].Case.DeviceOf() == oracle.DeviceCUDA && e.Status == artifacts.StatusPrepared && r.gpuDevices == nil && r.gpuErr == nil {
				r.gpuDevices, r.gpuErr = visit.GPUDevices("/dev")
			}
		}
	}
	var lerr error
	if r.limiter, lerr = visit.ProbeLimiter(); lerr != nil {
		r.cpuLimit = "none: " + lerr.Error()
		r.cfg.Progress.Printf("replay: no CPU quota per visit (%v); CPU time is still accounted", lerr)
	} else {
		r.cpuLimit = r.limiter.Describe()
	}
	// A visit's novel samples are written while it is frozen (visit
	// protocol 4): without a freezer there is no claim to time.
	if !r.limiter.CanFreeze() {
		for _, e := range r.entries {
			if e.Status == artifacts.StatusPrepared {
				why := "the cgroup has no freezer"
				if lerr != nil {
					why = lerr.Error()
				}
				return fmt.Errorf("replay: a visit is frozen between its novel samples (docs/protocol.md, visit protocol 4), and no cgroup freezer can be made here (%s): run replay as root, or where this process may make cgroups", why)
			}
		}
	}
	return nil
}

// planRecord is the replay's plan: its configuration, routes and cases,
// the balanced plan of its fixed rounds, and its input seeds (drawn here,
// or read from --inputs by a shard, with the file's digest).
func (r *replayer) planRecord(routes, cases []string) (artifacts.PlanRecord, artifacts.Digest, error) {
	pr := artifacts.PlanRecord{Prepared: r.prep.Descriptor.Digest, Capture: r.cap.Descriptor.Digest, Config: r.cfg.ReplayConfig, Routes: routes, Cases: cases,
		Plan: plan.Plan(cases, routes, r.cfg.Rounds, func(c, rt string) bool {
			e := r.entries[artifacts.Pair{Case: c, Route: rt}]
			return e != nil && e.Status == artifacts.StatusPrepared
		})}
	seeds, err := sets.Draw(r.cfg.PlannedRounds())
	if err != nil {
		return pr, "", err
	}
	pr.Inputs = artifacts.InputSeeds(seeds)
	var inputsDigest artifacts.Digest
	if r.cfg.Inputs != "" {
		if pr.Inputs, inputsDigest, err = sets.ReadFile(r.cfg.Inputs, r.cfg.PlannedRounds()); err != nil {
			return pr, "", err
		}
	}
	return pr, inputsDigest, nil
}

// beginSession begins this invocation's session on the stage: the warm
// set 0 each row's first passed visit fixed, the cores, the floors and
// the one-thread bandwidth measured now, the session journaled, the
// input cache, and the receipt begun. cleanup undoes what it set up
// (the cores' pinning, the GPU monitor, the input cache); call it
// whatever the error.
func (r *replayer) beginSession(start time.Time, cases []string, pr artifacts.PlanRecord, done map[int]*artifacts.VisitResult, inputsDigest artifacts.Digest) (cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	r.set0 = map[artifacts.Pair]*artifacts.VisitResult{}
	for _, i := range slices.Sorted(maps.Keys(done)) {
		if v := done[i]; v.Status == artifacts.StatusPassed && r.set0[v.Pair()] == nil {
			r.set0[v.Pair()] = v
		}
	}
	floors.WarmUp(200 * time.Millisecond)
	sess := artifacts.Session{Index: len(r.sessions), Started: start, ColdBandwidth: floors.ColdBandwidth(1)}
	unpin, err := r.placeCores(&sess)
	if err != nil {
		return cleanup, err
	}
	undo = append(undo, unpin)
	r.cfg.Progress.Printf("replay: memory delivers %.1f GB/s to one thread (read+write, %d MiB)", sess.ColdBandwidth/1e9, floors.ColdSize>>20)
	if err := r.measureFloors(&sess, cases); err != nil {
		return cleanup, err
	}
	undo = append(undo, r.stopMonitor)
	for _, d := range r.deps.List() {
		if d.VerifiedAt.After(sess.Verified) {
			sess.Verified = d.VerifiedAt
		}
	}
	r.sessions = append(r.sessions, sess)
	if err := r.append(artifacts.JournalLine{Session: &sess}); err != nil {
		return cleanup, err
	}
	r.inputs = &inputCache{seeds: sets.Seeds(pr.Inputs), warm: r.cfg.Sets}
	undo = append(undo, r.inputs.release)
	r.rec = artifacts.NewReceipt("replay", start, map[string]any{"prepared": absPath(r.cfg.Prepared), "capture": r.cap.Store.Dir(), "config": r.cfg.ReplayConfig,
		"resume": r.cfg.Resume, "sandbox": r.sandbox.Record(), "cpuLimit": r.cpuLimit}, r.prep, &r.deps)
	if r.cfg.Inputs != "" {
		r.rec.Parameters["inputs"] = map[string]any{"file": absPath(r.cfg.Inputs), "digest": inputsDigest}
	}
	return cleanup, nil
}

// rounds is the state runRounds carries from round to round: the plan
// (adaptive rounds append to it), the visits done, the closure checks, and
// what every visit needs.
type rounds struct {
	pr            *artifacts.PlanRecord
	done          map[int]*artifacts.VisitResult
	closures      []artifacts.ClosureCheck
	programs      map[artifacts.Pair]program
	ad            *adaptiveRounds
	cases, routes []string
	byRound       map[int][]artifacts.Visit
	failed        bool // a closure check failed: the replay ends
}

// runRounds runs every round of the plan not done yet (a resumed replay
// skips what its journal holds), each between its closure checks, until
// the rounds are spent, the stopping rule closes every case, or a
// closure check fails.
func (r *replayer) runRounds(ctx context.Context, rs *rounds) error {
	rs.failed = slices.ContainsFunc(rs.closures, func(c artifacts.ClosureCheck) bool { return c.Status != artifacts.StatusPassed })
	rs.byRound = map[int][]artifacts.Visit{}
	for _, v := range rs.pr.Plan {
		rs.byRound[v.Round] = append(rs.byRound[v.Round], v)
	}
	for round := 0; round < r.cfg.PlannedRounds() && !rs.failed; round++ {
		if round >= r.cfg.Rounds {
			more, err := r.openRound(round, rs)
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
		if err := r.runRound(ctx, round, rs); err != nil {
			return err
		}
	}
	r.cfg.Progress.Done()
	if len(rs.done) > 0 {
		if last := slices.Max(slices.Collect(maps.Keys(rs.done))); last >= len(rs.pr.Plan) {
			return fmt.Errorf("--resume %s: %s: visit %d is beyond the plan the stopping rule gives (%d visits): the journal disagrees with its own samples; start a new replay", r.cfg.Output, journalFile, last, len(rs.pr.Plan))
		}
	}
	if r.cfg.Target > 0 && !rs.failed {
		rs.ad.finish(r.cfg.PlannedRounds())
	}
	return nil
}

// openRound plans adaptive round: the stopping rule decides which cases
// it visits, from the rounds before it (internal/adaptive). It reports
// false when no case is open.
func (r *replayer) openRound(round int, rs *rounds) (bool, error) {
	open, err := rs.ad.open(round, rs.done)
	if err != nil || len(open) == 0 {
		return false, err
	}
	n := len(rs.pr.Plan)
	rs.pr.Plan = plan.RoundVisits(rs.pr.Plan, rs.cases, rs.routes, round, func(c string) bool { return open[c] }, rs.ad.timeable)
	for _, v := range rs.pr.Plan[n:] {
		if d, ok := rs.done[v.Index]; ok && d.Visit != v {
			return false, fmt.Errorf("--resume %s: %s: visit %d is not the adaptive plan's (%+v, the rule gives %+v): the journal disagrees with its own samples; start a new replay", r.cfg.Output, journalFile, v.Index, d.Visit, v)
		}
		rs.byRound[round] = append(rs.byRound[round], v)
	}
	r.cfg.Progress.Printf("replay: round %d: %d of %d cases open (adaptive, target ±%.3g%%)", round+1, len(open), len(rs.cases), r.cfg.Target*100)
	return true, nil
}

// runRound runs the visits of round not done yet between a closure check
// before and one after. A round whose visits are all done (killed after
// its last visit) gets only the check after it, if it lacks one.
func (r *replayer) runRound(ctx context.Context, round int, rs *rounds) error {
	var todo []artifacts.Visit
	for _, v := range rs.byRound[round] {
		if _, ok := rs.done[v.Index]; !ok {
			todo = append(todo, v)
		}
	}
	if len(todo) == 0 {
		if last := lastVisitEnd(rs.byRound[round], rs.done); !last.IsZero() && !slices.ContainsFunc(rs.closures, func(c artifacts.ClosureCheck) bool {
			return c.Round == round && c.When == "after" && !c.At.Before(last)
		}) {
			return r.closure(round, "after", rs)
		}
		return nil
	}
	if err := r.closure(round, "before", rs); err != nil || rs.failed {
		return err
	}
	for _, v := range todo {
		if err := r.runVisit(ctx, v, rs); err != nil {
			return err
		}
	}
	return r.closure(round, "after", rs)
}

// closure runs and journals the closure check of round (when: "before" or
// "after"); a failed one ends the replay.
func (r *replayer) closure(round int, when string, rs *rounds) error {
	cc := r.checkClosure(round, when, rs.programs)
	rs.closures = append(rs.closures, cc)
	if err := r.append(artifacts.JournalLine{Closure: &cc}); err != nil {
		return err
	}
	rs.failed = cc.Status != artifacts.StatusPassed
	return nil
}

// runVisit runs one visit and journals its result; an interruption is an
// error that says how far the replay got.
func (r *replayer) runVisit(ctx context.Context, v artifacts.Visit, rs *rounds) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("replay interrupted after %d of %d visits: %w", len(rs.done), len(rs.pr.Plan), err)
	}
	r.cfg.Progress.StepUpTo("replay", len(rs.done)+1, len(rs.pr.Plan), r.budgetLeft(rs.done, len(rs.pr.Plan)), fmt.Sprintf("round %d %s %s", v.Round+1, v.Case, v.Route))
	vr, err := r.visit(ctx, v, rs.programs)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("replay interrupted in visit %d of %d (not recorded): %w", v.Index+1, len(rs.pr.Plan), ctx.Err())
		}
		return err
	}
	if vr.Status != artifacts.StatusPassed {
		r.cfg.Progress.Printf("replay: visit %d %s %s failed: %s", v.Index, v.Case, v.Route, vr.Reason)
	}
	if r.cases[v.Case].Case.DeviceOf() == oracle.DeviceCUDA && visit.PoisonsGPU(vr.Reason) {
		r.gpuSuspect = fmt.Sprintf("visit %d", v.Index)
	}
	if err := r.append(artifacts.JournalLine{Visit: vr}); err != nil {
		return err
	}
	rs.done[v.Index] = vr
	return nil
}

// budgetLeft is what the replay budget (config.totalBudgetS) leaves
// beyond the visits planned so far, at their mean time: the most that
// later adaptive rounds can add; 0 without a budget.
func (r *replayer) budgetLeft(done map[int]*artifacts.VisitResult, planned int) time.Duration {
	if r.cfg.TotalBudgetS <= 0 || len(done) == 0 {
		return 0
	}
	var spent int64
	for _, v := range done {
		spent += v.WallNs
	}
	rest := float64(spent) / float64(len(done)) * float64(planned-len(done))
	return max(0, time.Duration(r.cfg.TotalBudgetS*1e9-float64(spent)-rest))
}

// placeCores splits the cores replay may use between the visits' timed
// threads and replay's own bookkeeping (internal/affinity), pins replay's
// threads to its share and records the split in the session. unpin gives
// every thread of the process all the cores back (a process that goes on
// after the replay, such as a test binary or `run`'s audit, must not
// stay on replay's share, nor its children inherit it).
func (r *replayer) placeCores(sess *artifacts.Session) (unpin func(), err error) {
	avail, err := affinity.Self()
	if err != nil {
		return nil, fmt.Errorf("replay: cores: %w", err)
	}
	p := affinity.Choose(avail, r.cfg.Threads)
	sess.Cores = &artifacts.CorePlan{Visit: p.Visit, Replay: p.Replay, Shared: p.Shared, Why: p.Why}
	r.visitCores = nil
	unpin = func() {}
	if !p.Shared {
		if err := affinity.PinSelf(p.Replay); err != nil {
			return nil, fmt.Errorf("replay: cores: %w", err)
		}
		r.visitCores = p.Visit
		unpin = func() {
			if err := affinity.PinSelf(avail); err != nil {
				r.cfg.Progress.Printf("replay: cores: %v", err)
			}
		}
	}
	r.cfg.Progress.Printf("replay: cores: %s", p.Why)
	return unpin, nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// measureFloors measures this machine's clock and every case's floors
// (internal/floors) for the session.
func (r *replayer) measureFloors(sess *artifacts.Session, cases []string) error {
	flags, err := artifacts.CPUFlags(artifacts.CPUInfoPath)
	if err != nil {
		return err
	}
	sess.ClockHz = floors.Clock()
	bw := map[int]float64{}
	measure := func(n int) float64 {
		if _, ok := bw[n]; !ok {
			bw[n] = floors.TouchBandwidth(n, r.cfg.Threads)
		}
		return bw[n]
	}
	gpu := false
	for _, id := range cases {
		c := r.cases[id]
		if c.Case.DeviceOf() != oracle.DeviceCPU {
			gpu = true
			continue // a CPU floor says nothing of a GPU: below, from the GPU's ceilings
		}
		sess.Floors = append(sess.Floors, floors.Case(c.Case, c.Signature, r.cfg.Sets, r.cfg.Threads, sess.ClockHz, flags, measure))
	}
	r.cfg.Progress.Printf("replay: one core runs at %.2f GHz; %d cases' floors measured", sess.ClockHz/1e9, len(sess.Floors))
	if !gpu {
		return nil
	}
	if _, err := r.telemetry(); err != nil {
		sess.TelemetryError = err.Error()
		r.cfg.Progress.Printf("replay: no GPU telemetry, so every GPU visit fails: %s", sess.TelemetryError)
	} else {
		sess.Telemetry = r.monitor.Device.String()
		r.cfg.Progress.Printf("replay: GPU telemetry from %s", sess.Telemetry)
	}
	if sess.GPU, err = r.gpuCeilings(); err != nil {
		sess.GPUError = err.Error()
		r.cfg.Progress.Printf("replay: no GPU ceilings, so no GPU floors: %s", sess.GPUError)
		return nil
	}
	g := sess.GPU
	for _, id := range cases {
		if c := r.cases[id]; c.Case.DeviceOf() == oracle.DeviceCUDA {
			sess.Floors = append(sess.Floors, floors.GPUCase(c.Case, c.Signature, r.cfg.Sets, g))
		}
	}
	r.cfg.Progress.Printf("replay: %s copies %.2f TB/s (read+write, %d GiB); cuBLAS %s", g.Device, g.CopyBandwidth/1e12, g.CopyBytes>>30, gemmRates(g))
	return nil
}

// gpuCeilings runs the prepared CUDA timer's --ceilings (tilepipe's own
// code, checked by digest, outside the sandbox) with the cuBLAS of the
// directory prepare linked CUDA objects against, if any.
func (r *replayer) gpuCeilings() (*artifacts.GPUCeilings, error) {
	exe, err := r.cudaTimer()
	if err != nil {
		return nil, err
	}
	argv := []string{exe, "--ceilings"}
	if lib := filepath.Join(r.pdoc.CUDALib, "libcublas.so"); r.pdoc.CUDALib != "" {
		argv = append(argv, lib)
	}
	out, err := runTool(argv, CeilingsTimeout)
	if err != nil {
		return nil, err
	}
	return floors.ParseCeilings(out)
}

// telemetry is the running telemetry monitor, started (again) if there is
// none: the prepared CUDA timer's --telemetry, outside every visit.
func (r *replayer) telemetry() (*telemetry.Monitor, error) {
	if r.monitor != nil && r.monitor.Alive() {
		return r.monitor, nil
	}
	r.monitor = nil
	exe, err := r.cudaTimer()
	if err != nil {
		return nil, err
	}
	m, err := telemetry.Start([]string{exe, "--telemetry"}, artifacts.Env(nil))
	if err != nil {
		return nil, err
	}
	r.monitor = m
	return m, nil
}

// helperPids are replay's own processes beside the visits: the telemetry
// monitor, while it runs.
func (r *replayer) helperPids() []int {
	if r.monitor != nil && r.monitor.Alive() {
		return []int{r.monitor.Pid()}
	}
	return nil
}

func (r *replayer) stopMonitor() {
	if r.monitor != nil {
		r.monitor.Close()
	}
}

// healthCheck runs, before a GPU visit that follows a CUDA error, the
// prepared CUDA timer's --health in a fresh process; when it fails, every
// later GPU visit is not run, with the reason (gpuDead).
func (r *replayer) healthCheck() {
	after := r.gpuSuspect
	r.gpuSuspect = ""
	exe, err := r.cudaTimer()
	if err == nil {
		_, err = runTool([]string{exe, "--health"}, HealthTimeout)
	}
	if err != nil {
		r.gpuDead = fmt.Sprintf("%s%s: %v", artifacts.NotRunGPU, after, err)
		r.cfg.Progress.Printf("replay: %s", r.gpuDead)
		return
	}
	r.cfg.Progress.Printf("replay: the GPU passed its health check after the CUDA error of %s", after)
}

// HealthTimeout bounds `cuda-timer --health`.
const HealthTimeout = time.Minute

// runTool runs one of tilepipe's own programs (scrubbed environment,
// timeout) and returns its stdout; an error names the arguments, the exit
// and the stderr.
func runTool(argv []string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = artifacts.Env(nil)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %s", strings.Join(argv[1:], " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// cudaTimer copies the prepared CUDA timer into work/bin by digest and
// checks the copy.
func (r *replayer) cudaTimer() (string, error) {
	t := r.pdoc.CUDATimer
	if t == nil {
		return "", errors.New("the prepared stage has no CUDA timer")
	}
	if !r.prep.Has(t.Digest) {
		return "", fmt.Errorf("CUDA timer %s is not a verified layer", artifacts.Short(t.Digest))
	}
	bin := filepath.Join(r.s.Dir(), workDir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	exe := filepath.Join(bin, t.Digest.Encoded())
	if _, err := os.Lstat(exe); err != nil {
		if err := copyFile(r.prep.Store.Path(t.Digest), exe, 0o555); err != nil {
			return "", err
		}
	}
	if got, _, err := artifacts.HashFile(exe); err != nil || got != t.Digest {
		return "", fmt.Errorf("CUDA timer copy %s: %v (digest %s, want %s)", exe, err, artifacts.Short(got), artifacts.Short(t.Digest))
	}
	return exe, nil
}

// CeilingsTimeout bounds `cuda-timer --ceilings` (about a second on the H200).
const CeilingsTimeout = 2 * time.Minute

// gemmRates lists the measured cuBLAS rates, for the progress line.
func gemmRates(g *artifacts.GPUCeilings) string {
	if len(g.Gemm) == 0 {
		return "not measured: " + g.GemmError
	}
	var s []string
	for _, r := range g.Gemm {
		k := r.Dtype
		if r.Policy != "" {
			k += " " + r.Policy
		}
		s = append(s, fmt.Sprintf("%s %.0f TFLOP/s", k, r.Flops/1e12))
	}
	return strings.Join(s, ", ")
}

// open verifies the prepared stage, finds its capture and verifies that.
func (r *replayer) open() error {
	var err error
	r.prep, err = artifacts.ReadStage(r.cfg.Prepared, &r.pdoc, r.deps.Verified)
	if err != nil {
		return err
	}
	capDir := r.cfg.Capture
	if capDir == "" {
		rc, err := r.prep.Receipt()
		if err != nil {
			return err
		}
		p, _ := rc.Predicate.Parameters["capture"].(string)
		if p == "" {
			return fmt.Errorf("prepared %s: receipt parameters.capture: want the capture directory; pass --capture", r.cfg.Prepared)
		}
		capDir = p
	}
	r.cap, err = artifacts.ReadStage(capDir, &r.cdoc, r.deps.Verified)
	if err != nil {
		return fmt.Errorf("capture of %s: %w", r.cfg.Prepared, err)
	}
	if r.cap.Descriptor.Digest != r.pdoc.Capture {
		return fmt.Errorf("capture %s: manifest %s, but prepared %s was made from %s", capDir, r.cap.Descriptor.Digest, r.cfg.Prepared, r.pdoc.Capture)
	}
	if s := r.prep.Manifest.Subject; s == nil || s.Digest != r.pdoc.Capture {
		return fmt.Errorf("prepared %s: manifest subject: want the capture manifest %s", r.cfg.Prepared, r.pdoc.Capture)
	}
	for i := range r.cdoc.Cases {
		r.cases[r.cdoc.Cases[i].Case.ID] = &r.cdoc.Cases[i]
	}
	for i := range r.pdoc.Entries {
		e := &r.pdoc.Entries[i]
		if r.cases[e.Case] == nil {
			return fmt.Errorf("prepared %s: entry %s/%s: case not in the capture", r.cfg.Prepared, e.Case, e.Route)
		}
		r.entries[e.Pair()] = e
	}
	return nil
}

func (r *replayer) routesAndCases() (routes, cases []string) {
	for _, rt := range r.cdoc.Routes {
		routes = append(routes, rt.Name)
	}
	for _, c := range r.cdoc.Cases {
		cases = append(cases, c.Case.ID)
	}
	return routes, cases
}

// createOrResume makes the replay directory or, with --resume, reloads the
// plan and the finished visits from its journal.
func (r *replayer) createOrResume(pr *artifacts.PlanRecord) (map[int]*artifacts.VisitResult, []artifacts.ClosureCheck, error) {
	done := map[int]*artifacts.VisitResult{}
	if !r.cfg.Resume {
		s, err := artifacts.Create(r.cfg.Output)
		if err != nil {
			return nil, nil, err
		}
		r.s = s
		return done, nil, r.startPlan(pr)
	}
	s, err := artifacts.Resume(r.cfg.Output)
	if err != nil {
		return nil, nil, fmt.Errorf("--resume: %w", err)
	}
	r.s = s
	// The writer before us is dead (we hold its lock); what it left
	// running must end before anything is timed.
	if err := stopLeftover(filepath.Join(s.Dir(), workDir, timerFile), r.cfg.Progress); err != nil {
		return nil, nil, fmt.Errorf("--resume %s: %w", r.cfg.Output, err)
	}
	b, err := os.ReadFile(filepath.Join(s.Dir(), planFile))
	if errors.Is(err, fs.ErrNotExist) {
		// Killed before its plan was written: it recorded nothing, so
		// this run starts it.
		if _, err := s.Prune(nil); err != nil {
			return nil, nil, err
		}
		return done, nil, r.startPlan(pr)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--resume %s: %w", r.cfg.Output, err)
	}
	if err := r.samePlan(b, pr); err != nil {
		return nil, nil, err
	}
	jpath := filepath.Join(s.Dir(), journalFile)
	done, closures, err := r.readJournal(jpath, pr)
	if err != nil {
		return nil, nil, err
	}
	keep := map[artifacts.Digest]bool{}
	for _, v := range done {
		for _, d := range visitBlobs(v) {
			keep[d] = true
		}
	}
	if n, err := s.Prune(keep); err != nil {
		return nil, nil, fmt.Errorf("--resume %s: %w", r.cfg.Output, err)
	} else if n > 0 {
		r.cfg.Progress.Printf("replay: removed %d blob(s) of work the interrupted replay did not record", n)
	}
	r.journal, err = os.OpenFile(jpath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	r.cfg.Progress.Printf("replay: resuming %s: %d of %d visits done", r.cfg.Output, len(done), len(pr.Plan))
	return done, closures, err
}

// samePlan checks that the interrupted replay's plan.json (b) asks for
// what this run asks for (pr), under the rules this tilepipe replays by,
// and takes its input seeds into pr.
func (r *replayer) samePlan(b []byte, pr *artifacts.PlanRecord) error {
	var old artifacts.PlanRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&old); err != nil {
		return fmt.Errorf("--resume %s: %s: %w", r.cfg.Output, planFile, err)
	}
	if old.Config.Interval != pr.Config.Interval {
		return fmt.Errorf("--resume %s: %s records config.interval %q; this tilepipe computes intervals by %q (docs/statistics.md): a replay begun by another version cannot be resumed, start a new one",
			r.cfg.Output, planFile, old.Config.Interval, pr.Config.Interval)
	}
	if old.Config.Load == "" {
		return fmt.Errorf("--resume %s: %s records no config.load (a replay begun before the load rule, docs/statistics.md): a replay begun by another version cannot be resumed, start a new one",
			r.cfg.Output, planFile)
	}
	if old.Config.NovelRule != pr.Config.NovelRule {
		return fmt.Errorf("--resume %s: %s records config.novelRule %d; this tilepipe times by novel rule %d (docs/protocol.md, step 5): a replay begun by another version cannot be resumed, start a new one",
			r.cfg.Output, planFile, old.Config.NovelRule, pr.Config.NovelRule)
	}
	if old.Prepared != pr.Prepared || old.Capture != pr.Capture || !reflect.DeepEqual(old.Plan, pr.Plan) || old.Config != pr.Config {
		return fmt.Errorf("--resume %s: %s records prepared %s with config %+v; this run asks for prepared %s with config %+v: resume with the same flags",
			r.cfg.Output, planFile, artifacts.Short(old.Prepared), old.Config, artifacts.Short(pr.Prepared), pr.Config)
	}
	if len(old.Inputs.Rounds) != pr.Config.PlannedRounds() {
		return fmt.Errorf("--resume %s: %s: input seeds for %d rounds, want %d", r.cfg.Output, planFile, len(old.Inputs.Rounds), pr.Config.PlannedRounds())
	}
	pr.Inputs = old.Inputs // the inputs drawn when the replay began
	return nil
}

// readJournal reads the interrupted replay's journal at jpath: its
// sessions (into r.sessions), its visits, each checked against the plan
// and against what it points to, and its closure checks; a partial last
// line (a kill mid-write) is cut off the file.
func (r *replayer) readJournal(jpath string, pr *artifacts.PlanRecord) (map[int]*artifacts.VisitResult, []artifacts.ClosureCheck, error) {
	done := map[int]*artifacts.VisitResult{}
	var closures []artifacts.ClosureCheck
	jb, err := os.ReadFile(jpath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	// A kill can leave a partial last line; everything before the last
	// newline was written and synced whole.
	valid := jb[:bytes.LastIndexByte(jb, '\n')+1]
	sc := bufio.NewScanner(bytes.NewReader(valid))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("--resume %s: %s:%d: %s", r.cfg.Output, journalFile, n, fmt.Sprintf(format, args...))
		}
		var l artifacts.JournalLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, nil, bad("%v", err)
		}
		switch {
		case l.Session != nil && l.Visit == nil && l.Closure == nil:
			if l.Session.Index != len(r.sessions) {
				return nil, nil, bad("session %d, want %d (sessions in order)", l.Session.Index, len(r.sessions))
			}
			r.sessions = append(r.sessions, *l.Session)
		case l.Closure != nil && l.Visit == nil && l.Session == nil:
			closures = append(closures, *l.Closure)
		case l.Visit != nil && l.Session == nil && l.Closure == nil:
			v := l.Visit
			// An adaptive round's visits follow the fixed plan; the main loop
			// checks them against the rule's plan as it rebuilds it.
			adaptiveRound := r.cfg.Target > 0 && v.Index >= len(pr.Plan) && v.Round >= r.cfg.Rounds && v.Round < r.cfg.PlannedRounds()
			if v.Index < 0 || (v.Index >= len(pr.Plan) || pr.Plan[v.Index] != v.Visit) && !adaptiveRound {
				return nil, nil, bad("visit %d is not in the plan", v.Index)
			}
			if v.Session < 0 || v.Session >= len(r.sessions) {
				return nil, nil, bad("visit %d: session %d is not journaled before it", v.Index, v.Session)
			}
			if err := r.checkJournaled(v); err != nil {
				return nil, nil, bad("%v: the journal disagrees with what it points to (edited or corrupted); start a new replay", err)
			}
			done[v.Index] = v
		default:
			return nil, nil, bad("want exactly one of session, visit or closure")
		}
	}
	if err := os.Truncate(jpath, int64(len(valid))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	return done, closures, nil
}

func visitBlobs(v *artifacts.VisitResult) []artifacts.Digest {
	var ds []artifacts.Digest
	for _, d := range []artifacts.Digest{v.Samples, v.Stdout, v.Stderr} {
		if d != "" {
			ds = append(ds, d)
		}
	}
	outs := append(slices.Clone(v.Outputs), v.FreshOutputs...)
	if v.Novel != nil {
		outs = append(outs, v.Novel.Outputs...)
	}
	for _, o := range outs {
		ds = append(ds, o.Digest)
	}
	return ds
}

func (r *replayer) append(l artifacts.JournalLine) error {
	b, err := artifacts.MarshalLine(l)
	if err != nil {
		return err
	}
	if _, err := r.journal.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := r.journal.Sync(); err != nil {
		return err
	}
	crashpoint.Hit("journal")
	return nil
}

// program is a timer made runnable in the work directory.
type program struct {
	path   string
	digest artifacts.Digest
	kernel []string // a cubin entry's cubin and launch files, checked like the program
}

// materialize copies each prepared program (a linked harness from the
// prepared stage, a wrapper script from the capture) into work/bin by
// digest and checks the copy's bytes.
func (r *replayer) materialize() (map[artifacts.Pair]program, error) {
	bin := filepath.Join(r.s.Dir(), workDir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	out := map[artifacts.Pair]program{}
	for k, e := range r.entries {
		if e.Status != artifacts.StatusPrepared {
			continue
		}
		if e.Program == nil {
			return nil, fmt.Errorf("prepared %s: entry %s/%s: no program", r.cfg.Prepared, e.Case, e.Route)
		}
		src, mode := r.prep, os.FileMode(0o555)
		if e.Kind == artifacts.KindProcess {
			src, mode = r.cap, 0o444
		}
		if !src.Has(e.Program.Digest) {
			return nil, fmt.Errorf("prepared %s: entry %s/%s: program %s is not a verified layer", r.cfg.Prepared, e.Case, e.Route, artifacts.Short(e.Program.Digest))
		}
		name := e.Program.Digest.Encoded() // a verified layer's digest is well-formed
		if e.Kind == artifacts.KindProcess {
			name += "-" + filepath.Base(e.Program.Path)
		}
		dst := filepath.Join(bin, name)
		if _, err := os.Lstat(dst); err != nil {
			if err := copyFile(src.Store.Path(e.Program.Digest), dst, mode); err != nil {
				return nil, err
			}
		}
		got, _, err := artifacts.HashFile(dst)
		if err != nil {
			return nil, err
		}
		if got != e.Program.Digest {
			return nil, &artifacts.MismatchError{Name: "program of " + e.Case + "/" + e.Route, Path: dst, Expected: e.Program.Digest, Actual: got}
		}
		prog := program{path: dst, digest: got}
		if e.Kind == artifacts.KindCubin {
			if prog.kernel, err = r.kernelFiles(bin, e); err != nil {
				return nil, err
			}
		}
		out[k] = prog
	}
	return out, nil
}

// kernelFiles copies a cubin entry's cubin (from the capture) and launch
// lines (from the prepared stage) into bin by digest and checks the copies:
// the CUDA timer loads exactly the bytes capture stored.
func (r *replayer) kernelFiles(bin string, e *artifacts.Prepared) ([]string, error) {
	var out []string
	for _, want := range []struct {
		role string
		src  *artifacts.Stage
	}{{"cubin", r.cap}, {"launch", r.prep}} {
		var f *artifacts.FileRef
		for i := range e.Kernel {
			if e.Kernel[i].Role == want.role {
				if f != nil {
					return nil, fmt.Errorf("prepared %s: entry %s/%s: kernel: two files with role %s", r.cfg.Prepared, e.Case, e.Route, want.role)
				}
				f = &e.Kernel[i]
			}
		}
		if f == nil || len(e.Kernel) != 2 {
			return nil, fmt.Errorf("prepared %s: entry %s/%s: kernel: want one cubin and one launch file, got %d files", r.cfg.Prepared, e.Case, e.Route, len(e.Kernel))
		}
		if !want.src.Has(f.Digest) {
			return nil, fmt.Errorf("prepared %s: entry %s/%s: kernel %s %s is not a verified layer", r.cfg.Prepared, e.Case, e.Route, want.role, artifacts.Short(f.Digest))
		}
		dst := filepath.Join(bin, f.Digest.Encoded()+"."+want.role)
		if _, err := os.Lstat(dst); err != nil {
			if err := copyFile(want.src.Store.Path(f.Digest), dst, 0o444); err != nil {
				return nil, err
			}
		}
		got, _, err := artifacts.HashFile(dst)
		if err != nil {
			return nil, err
		}
		if got != f.Digest {
			return nil, &artifacts.MismatchError{Name: want.role + " of " + e.Case + "/" + e.Route, Path: dst, Expected: f.Digest, Actual: got}
		}
		out = append(out, dst)
	}
	return out, nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// checkClosure re-hashes every program and every closure file (each path
// once) and compares with what prepare pinned; a process entry's
// interpreter, run by the name the route gave (which may be a symlink),
// must still resolve to a file with the captured digest.
func (r *replayer) checkClosure(round int, when string, programs map[artifacts.Pair]program) artifacts.ClosureCheck {
	cc := artifacts.ClosureCheck{Round: round, When: when, Status: artifacts.StatusPassed}
	want := map[string]artifacts.Digest{}
	var problems []string
	interps := map[string]artifacts.Digest{}
	for k, p := range programs {
		want[p.path] = p.digest
		if pr := r.entries[k].Process; pr != nil {
			interps[pr.Interpreter] = pr.InterpreterDigest
		}
		for _, f := range r.entries[k].Closure {
			if d, ok := want[f.Path]; ok && d != f.Digest {
				problems = append(problems, fmt.Sprintf("%s pinned with two digests", f.Path))
			}
			want[f.Path] = f.Digest
		}
	}
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		got, _, err := artifacts.HashFile(p)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", p, err))
		case got != want[p]:
			problems = append(problems, fmt.Sprintf("%s changed: prepared %s, now %s", p, artifacts.Short(want[p]), artifacts.Short(got)))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(interps)) {
		real, err := filepath.EvalSymlinks(p)
		var got artifacts.Digest
		if err == nil {
			got, _, err = artifacts.HashFile(real)
		}
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("interpreter %s: %v", p, err))
		case got != interps[p]:
			problems = append(problems, fmt.Sprintf("interpreter %s (now %s) changed: captured %s, now %s", p, real, artifacts.Short(interps[p]), artifacts.Short(got)))
		}
	}
	cc.At, cc.Files = time.Now().UTC(), len(paths)+len(interps)
	if len(problems) > 0 {
		cc.Status = artifacts.StatusFailed
		cc.Reason = fmt.Sprintf("binary closure %s round %d: %s", when, round, problems[0])
		if len(problems) > 1 {
			cc.Reason += fmt.Sprintf(" (and %d more)", len(problems)-1)
		}
		r.cfg.Progress.Printf("replay: %s", cc.Reason)
	}
	return cc
}

// readSamples loads and checks one visit's sample table.
func (r *replayer) readSamples(d artifacts.Digest) ([]samples.Row, error) {
	if err := r.s.Verify(ocispec.Descriptor{Digest: d}, "samples"); err != nil {
		return nil, err
	}
	return samples.ReadFile(r.s.Path(d), nil)
}

// lastVisitEnd is when the last finished visit of a round ended (zero when
// none did).
func lastVisitEnd(round []artifacts.Visit, done map[int]*artifacts.VisitResult) time.Time {
	var last time.Time
	for _, v := range round {
		if vr, ok := done[v.Index]; ok && vr.End.After(last) {
			last = vr.End
		}
	}
	return last
}

// stopLeftover ends the visit a killed replay left running, named in path,
// before this one times anything.
func stopLeftover(path string, p *progress.Reporter) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var l visit.Leftover
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	stopped, err := l.Stop(visit.Grace)
	if err != nil {
		return err
	}
	if stopped {
		p.Printf("replay: stopped the timer the interrupted replay left running (pid %d)", l.PID)
	}
	return os.Remove(path)
}

// startPlan writes the plan of a new replay and opens its journal.
func (r *replayer) startPlan(pr *artifacts.PlanRecord) error {
	b, err := artifacts.MarshalJSON(pr)
	if err != nil {
		return err
	}
	if err := artifacts.WriteFileAtomic(filepath.Join(r.s.Dir(), planFile), b); err != nil {
		return err
	}
	crashpoint.Hit("plan")
	r.journal, err = os.OpenFile(filepath.Join(r.s.Dir(), journalFile), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	return err
}

// checkJournaled verifies a journaled visit against what it points to
// before --resume builds on it: every blob it names re-hashed, and a
// passed visit's record checked against its own sample table
// ([record.Visit], the audit's check).
func (r *replayer) checkJournaled(v *artifacts.VisitResult) error {
	for _, d := range visitBlobs(v) {
		if err := r.s.Verify(ocispec.Descriptor{Digest: d}, fmt.Sprintf("visit %d blob", v.Index)); err != nil {
			return err
		}
	}
	if v.Status != artifacts.StatusPassed {
		return nil
	}
	if v.Samples == "" {
		return fmt.Errorf("visit %d passed but names no sample table", v.Index)
	}
	rows, err := r.readSamples(v.Samples)
	if err != nil {
		return fmt.Errorf("visit %d: %w", v.Index, err)
	}
	cc := r.cases[v.Case]
	own := ""
	if e := r.entries[artifacts.Pair{Case: v.Case, Route: v.Route}]; e != nil {
		own = e.OwnGraphs
	}
	if p := record.Visit(*v, rows, r.cfg.ReplayConfig, cc.Case.DeviceOf(), own, sets.CurrentRule.Checks(cc.Case, cc.Signature)); len(p) > 0 {
		return errors.New(p[0])
	}
	return nil
}
