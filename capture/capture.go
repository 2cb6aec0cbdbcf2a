package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tilepipe/tilepipe/artifacts/sign"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/tensor"
	"github.com/tilepipe/tilepipe/cohort"
	"github.com/tilepipe/tilepipe/internal/launch"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/internal/protocol"
	"github.com/tilepipe/tilepipe/internal/visit"
	"github.com/tilepipe/tilepipe/oracle"
	"golang.org/x/sync/errgroup"
)

// Config says what to capture. See [DefaultConfig].
type Config struct {
	Cohort       string        // built-in name or file
	Routes       []string      // built-in route names
	RouteExec    []string      // paths of external route programs
	RoutesDir    string        // where built-in routes live (DIR/NAME/route)
	Output       string        // new stage directory
	Threads      int           // passed to routes in the case file
	Jobs         int           // route builds run at once
	BuildTimeout time.Duration // per route program call: describe, each build (--build-timeout-s)
	IR           []string      // external IR files for routes that accept IR (--ir)
	ABI          string        // the IR's entry ABI, a JSON object (--abi); with IR or not at all
	RouteEnv     []string      // KEY=VALUE every route build sees (--route-env); nothing else is passed but PATH, HOME, the locale
	Kernels      []string      // NAME=KIND:FILE: a user's kernel file built by route kernel-KIND under NAME (--kernel, docs/kernels.md)
	NoSandbox    bool          // builds run without a sandbox (--no-sandbox)
	Bwrap        string        // bubblewrap program; "" finds bwrap on PATH
	// Key, when set, signs the receipt (a DSSE envelope, artifacts/sign).
	Key      *sign.Key
	Progress *progress.Reporter
}

// DefaultConfig captures the quick cohort with the three CPU routes, one
// build per CPU at once.
var DefaultConfig = Config{
	Cohort:       "quick",
	Routes:       []string{"halide", "openblas", "torch-eager"},
	Threads:      min(runtime.NumCPU(), MaxThreads),
	Jobs:         min(runtime.NumCPU(), MaxJobs),
	BuildTimeout: 10 * time.Minute,
}

// Limits of a capture (docs/limits.md gives the reason for each bound).
const (
	// MaxJobs bounds the route builds run at once: each can be a compiler
	// holding GiBs of memory.
	MaxJobs = 64
	// MaxThreads bounds the threads a route is told to use (replay's
	// limit too: run passes the same --threads to both).
	MaxThreads = 1024
	// MinBuildTimeout and MaxBuildTimeout bound the timeout of every route
	// program call (--build-timeout-s).
	MinBuildTimeout, MaxBuildTimeout = time.Second, 24 * time.Hour
)

// Validate checks every number of c that a flag sets against its range
// (docs/limits.md), before anything is read or written; the error names
// the flag, the range and the value given. The cohort's own fields are
// checked when it is loaded ([cohort.Parse]).
func (c Config) Validate() error {
	switch {
	case c.Threads < 1 || c.Threads > MaxThreads:
		return fmt.Errorf("--threads: want 1 to %d, got %d", MaxThreads, c.Threads)
	case c.Jobs < 1 || c.Jobs > MaxJobs:
		return fmt.Errorf("--jobs: want 1 to %d, got %d", MaxJobs, c.Jobs)
	case c.BuildTimeout < MinBuildTimeout || c.BuildTimeout > MaxBuildTimeout:
		return fmt.Errorf("--build-timeout-s: want %g to %g, got %g", MinBuildTimeout.Seconds(), MaxBuildTimeout.Seconds(), c.BuildTimeout.Seconds())
	}
	for _, f := range []struct {
		flag string
		vals []string
	}{{"--routes", c.Routes}, {"--route-exec", c.RouteExec}} {
		for _, v := range f.vals {
			if _, _, err := splitAlias(f.flag, v); err != nil {
				return err
			}
		}
	}
	for _, k := range c.Kernels {
		if _, _, _, err := parseKernel(k); err != nil {
			return err
		}
	}
	return nil
}

// Result is what a capture made.
type Result struct {
	Manifest artifacts.Digest
	Doc      artifacts.CaptureDoc
	Counts   map[string]int // builds by status
}

// Run captures cfg.Cohort with every route into cfg.Output.
func Run(ctx context.Context, cfg Config) (_ *Result, err error) {
	start := time.Now().UTC()
	req, err := check(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s, err := artifacts.Begin(cfg.Output, "capture", cfg.Progress.Printf)
	if err != nil {
		return nil, err
	}
	// Failed or interrupted before the commit: nothing is left behind,
	// so the same command can simply run again.
	defer s.Abort(&err)
	tmp, err := os.MkdirTemp("", "tilepipe-capture-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if tmp, err = filepath.Abs(tmp); err != nil { // routes get absolute paths
		return nil, err
	}

	rec := artifacts.NewReceipt("capture", start, map[string]any{"cohort": cfg.Cohort, "routes": cfg.Routes, "routeExec": cfg.RouteExec, "kernels": cfg.Kernels, "threads": cfg.Threads,
		"routeEnv": req.routeEnv, "sandbox": req.sb.Record()}, nil, nil)
	cd, err := s.PutBytes(req.raw, artifacts.MediaJSON)
	if err != nil {
		return nil, err
	}
	s.Name("cohort.json", cd)

	co := req.co
	doc := artifacts.CaptureDoc{Schema: artifacts.DocSchema, Cohort: co.Name, Rounds: co.Rounds, Target: co.Target, Threads: cfg.Threads, Oracle: oracle.Version, CohortRules: cohort.Rules}
	var ir *caseIR
	if req.irs != nil {
		rec.Parameters["ir"], rec.Parameters["abi"] = req.irs, req.abi
		if doc.External, ir, err = putExternal(s, req.irs, req.abi, tmp); err != nil {
			return nil, err
		}
	}
	if err := putKernels(s, req.routes, tmp); err != nil {
		return nil, err
	}
	if err := describeAll(ctx, s, cfg, req, ir, &doc, &rec); err != nil {
		return nil, err
	}
	cases, jobs, err := packets(s, cfg, req, doc.Routes, tmp)
	if err != nil {
		return nil, err
	}
	res := &Result{Counts: map[string]int{}}
	if err := buildAll(ctx, s, cfg, doc.Routes, cases, jobs, ir, res, &rec); err != nil {
		return nil, err
	}
	for _, cc := range cases {
		doc.Cases = append(doc.Cases, *cc)
	}
	cfg.Progress.Done()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	md, err := s.Finish(artifacts.CaptureType, doc, rec, nil, cfg.Key)
	if err != nil {
		return nil, err
	}
	res.Manifest, res.Doc = md.Digest, doc
	return res, nil
}

// request is a capture's configuration checked before anything is
// written: the cohort (and its file's bytes), the routes to ask, their
// environment, the build sandbox and the external IR, if any.
type request struct {
	co       *cohort.Cohort
	raw      []byte
	routes   []routeExec
	routeEnv map[string]string
	sb       *visit.Sandbox
	irs      []string
	abi      string
}

// check reads and checks cfg: every refusal comes before the output
// directory exists.
func check(ctx context.Context, cfg Config) (*request, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	co, raw, err := cohort.Load(cfg.Cohort)
	if err != nil {
		return nil, err
	}
	for _, c := range co.Cases {
		if !protocol.ValidName(c.ID) {
			return nil, fmt.Errorf("cohort %s: case id %q: want letters, digits, '.', '_' or '-' (it names files)", cfg.Cohort, c.ID)
		}
	}
	req := &request{co: co, raw: raw}
	if req.routes, err = resolveRoutes(cfg); err != nil {
		return nil, err
	}
	if req.routeEnv, err = parseRouteEnv(cfg.RouteEnv); err != nil {
		return nil, err
	}
	if !cfg.NoSandbox {
		if req.sb, err = visit.Probe(ctx, cfg.Bwrap); err != nil {
			return nil, fmt.Errorf("capture: no sandbox for route builds can be made on this machine: %v; --no-sandbox builds without one", err)
		}
	}
	if req.irs, req.abi, err = externalPaths(cfg); err != nil {
		return nil, err
	}
	if err := discriminating(cfg, co.Cases); err != nil {
		return nil, err
	}
	return req, nil
}

// describeAll asks every route to describe itself (stored, and in the
// receipt) and refuses a name given twice, or IR no route accepts.
func describeAll(ctx context.Context, s *artifacts.Store, cfg Config, req *request, ir *caseIR, doc *artifacts.CaptureDoc, rec *artifacts.Receipt) error {
	for _, r := range req.routes {
		info, cmd, err := describe(ctx, s, r, req.routeEnv, cfg.BuildTimeout)
		if err != nil {
			return err
		}
		rec.Commands = append(rec.Commands, cmd)
		doc.Routes = append(doc.Routes, info)
	}
	names := map[string]bool{}
	for _, r := range doc.Routes {
		if names[r.Name] {
			return fmt.Errorf("route %s named twice (built-in and --route-exec, or twice in --routes)", r.Name)
		}
		names[r.Name] = true
	}
	if ir != nil && !slices.ContainsFunc(doc.Routes, func(r artifacts.Route) bool { return r.AcceptsIR }) {
		var rs []string
		for _, r := range doc.Routes {
			rs = append(rs, r.Name)
		}
		return fmt.Errorf("--ir: no selected route accepts IR (routes: %s)", strings.Join(rs, ", "))
	}
	return nil
}

// packets stores every case's packet (inputs, expected outputs, bounds)
// and readies its build job: the case file the routes read, and the
// inputs and expected values where a validating route needs them after
// the packet is stored (without one they are not kept in memory).
func packets(s *artifacts.Store, cfg Config, req *request, routes []artifacts.Route, tmp string) ([]*artifacts.CapturedCase, []*job, error) {
	keep := slices.ContainsFunc(routes, func(r artifacts.Route) bool { return r.Validates && r.Available })
	var gpu visit.CaseDevices
	cases := make([]*artifacts.CapturedCase, len(req.co.Cases))
	jobs := make([]*job, len(req.co.Cases))
	for i, c := range req.co.Cases {
		cfg.Progress.Step("capture", i+1, len(req.co.Cases), c.ID+" packet")
		j := &job{c: c, tmp: tmp, threads: cfg.Threads, caseFile: filepath.Join(tmp, c.ID+".json"), store: s.Dir(), env: req.routeEnv, sandbox: req.sb, devices: &gpu}
		var err error
		if cases[i], j.inputs, j.expected, err = packet(s, c); err != nil {
			return nil, nil, err
		}
		j.sig = cases[i].Signature
		if !keep {
			j.inputs, j.expected = nil, nil
		}
		if err := writeCaseFile(j.caseFile, caseFile{Case: c, Signature: j.sig, Threads: cfg.Threads}); err != nil {
			return nil, nil, err
		}
		jobs[i] = j
		cases[i].Builds = make([]artifacts.Build, len(routes))
	}
	return cases, jobs, nil
}

// buildAll builds every case with every route. Builds are independent
// (each has its own work directory), so they run cfg.Jobs at a time;
// results keep the cohort's and the routes' order, in the cases and in
// the receipt's commands, and res counts them by status.
func buildAll(ctx context.Context, s *artifacts.Store, cfg Config, routes []artifacts.Route, cases []*artifacts.CapturedCase, jobs []*job, ir *caseIR, res *Result, rec *artifacts.Receipt) error {
	cmds := make([][]*artifacts.Command, len(cases))
	for i := range cmds {
		cmds[i] = make([]*artifacts.Command, len(routes))
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Jobs)
	var done atomic.Int64
	total := len(cases) * len(routes)
	for i, j := range jobs {
		for k, r := range routes {
			g.Go(func() error {
				b, cmd, err := build(gctx, s, cfg, r, j, ir)
				if err != nil {
					return err
				}
				cases[i].Builds[k], cmds[i][k] = b, cmd
				cfg.Progress.Step("capture", int(done.Add(1)), total, j.c.ID+" "+r.Name+": "+b.Status)
				if b.Status == artifacts.StatusFailed {
					cfg.Progress.Printf("capture: %s %s failed: %s", j.c.ID, r.Name, b.Reason)
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, cc := range cases {
		for k, b := range cc.Builds {
			res.Counts[b.Status]++
			if cmds[i][k] != nil {
				rec.Commands = append(rec.Commands, *cmds[i][k])
			}
		}
	}
	return nil
}

// discriminating refuses, before anything is written, a cohort with a case
// whose bound a trivial output would pass ([oracle.Discriminates]).
func discriminating(cfg Config, cases []oracle.Case) error {
	for _, c := range cases {
		in, err := oracle.Generate(c)
		if err != nil {
			return fmt.Errorf("cohort %s: case %s: generate inputs: %w", cfg.Cohort, c.ID, err)
		}
		exp, err := oracle.Reference(c, in)
		if err != nil {
			return fmt.Errorf("cohort %s: case %s: oracle: %w", cfg.Cohort, c.ID, err)
		}
		if err := oracle.Discriminates(c, in, exp); err != nil {
			return fmt.Errorf("cohort %s: %w", cfg.Cohort, err)
		}
	}
	return nil
}

// packet generates the case's inputs, FP64 expected outputs and bounds, and
// stores each as an Arrow tensor. It returns the inputs and the expected
// values too, for validating routes.
func packet(s *artifacts.Store, c oracle.Case) (*artifacts.CapturedCase, []oracle.Tensor, []oracle.Expected, error) {
	sig, err := oracle.Signature(c)
	if err != nil {
		return nil, nil, nil, err
	}
	inputs, err := oracle.Generate(c)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("case %s: generate inputs: %w", c.ID, err)
	}
	expected, err := oracle.Reference(c, inputs)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("case %s: oracle: %w", c.ID, err)
	}
	cc := &artifacts.CapturedCase{Case: c, Signature: sig, Generator: oracle.Generator}
	var in, out []oracle.Param
	for _, p := range sig {
		if p.Role == oracle.RoleInput {
			in = append(in, p)
		} else {
			out = append(out, p)
		}
	}
	put := func(p oracle.Param, role, dtype string, data []byte) (artifacts.TensorRef, error) {
		m := tensor.Meta{Name: p.Name, Role: role, Dtype: dtype, Shape: p.Shape, Case: c.ID, Generator: oracle.Generator, Seed: c.Seed}
		d, err := artifacts.PutTensor(s, m, data)
		if err != nil {
			return artifacts.TensorRef{}, fmt.Errorf("case %s: store %s %s: %w", c.ID, role, p.Name, err)
		}
		s.Name(fmt.Sprintf("cases/%s/%s/%s.arrow", c.ID, role, p.Name), d)
		return artifacts.TensorRef{Name: p.Name, Role: role, Dtype: dtype, Shape: p.Shape, Digest: d.Digest, Size: d.Size}, nil
	}
	for i, p := range in {
		r, err := put(p, "input", p.Dtype, oracle.Encode(inputs[i]))
		if err != nil {
			return nil, nil, nil, err
		}
		cc.Packet.Inputs = append(cc.Packet.Inputs, r)
	}
	// A float output stores its expected values and bounds as f64; an
	// index output stores its exact expected indices as i64 and no bound.
	for i, p := range out {
		if p.Dtype == "i64" {
			r, err := put(p, "expected", "i64", oracle.Encode(oracle.I64(expected[i].WantI)))
			if err != nil {
				return nil, nil, nil, err
			}
			cc.Packet.Expected = append(cc.Packet.Expected, r)
			continue
		}
		r, err := put(p, "expected", "f64", tensor.Float64Bytes(expected[i].Want))
		if err != nil {
			return nil, nil, nil, err
		}
		cc.Packet.Expected = append(cc.Packet.Expected, r)
		if r, err = put(p, "bound", "f64", tensor.Float64Bytes(expected[i].Bound)); err != nil {
			return nil, nil, nil, err
		}
		cc.Packet.Bound = append(cc.Packet.Bound, r)
	}
	return cc, inputs, expected, nil
}

// caseFile is the JSON a route's build receives (docs/protocol.md). Inputs
// go only to validating routes, IR only to routes that accept it.
type caseFile struct {
	oracle.Case
	Signature []oracle.Param `json:"signature"`
	Threads   int            `json:"threads"`
	Inputs    []caseInput    `json:"inputs,omitempty"`
	IR        *caseIR        `json:"ir,omitempty"`
}

// caseInput is one input tensor written out for a validating route.
type caseInput struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// caseIR is the external IR as routes that accept it receive it.
type caseIR struct {
	Files []string `json:"files"`
	ABI   string   `json:"abi"`
}

func writeCaseFile(path string, cf caseFile) error {
	b, err := json.MarshalIndent(cf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o444)
}

// job is one case as its builds need it.
type job struct {
	store    string             // the capture's own directory: hidden from builds
	env      map[string]string  // --route-env
	sandbox  *visit.Sandbox     // nil: --no-sandbox
	devices  *visit.CaseDevices // the GPU's nodes, shown to a cuda case's builds
	c        oracle.Case
	sig      []oracle.Param
	caseFile string // for routes that take neither inputs nor IR
	tmp      string // capture's scratch directory
	threads  int
	inputs   []oracle.Tensor   // generated inputs; kept only when a route validates
	expected []oracle.Expected // their FP64 reference; likewise
}

// routeCaseFile writes the case file of route r when r gets more than the
// shared one: a validating route gets its own copy of every input (raw
// little-endian, exactly the bytes a timer reads) in a fresh directory
// outside its workdir, a route that accepts IR gets the IR. It returns the
// case file and the directory to remove after the build.
func (j *job) routeCaseFile(r artifacts.Route, ir *caseIR) (path, scratch string, err error) {
	cf := caseFile{Case: j.c, Signature: j.sig, Threads: j.threads}
	if r.AcceptsIR {
		cf.IR = ir
	}
	if !r.Validates && cf.IR == nil {
		return j.caseFile, "", nil
	}
	scratch = filepath.Join(j.tmp, "route-inputs", j.c.ID+"."+r.Name)
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return "", "", err
	}
	if r.Validates {
		if j.inputs == nil {
			return "", "", fmt.Errorf("case %s: inputs were not kept for validating route %s", j.c.ID, r.Name)
		}
		k := 0
		for _, p := range j.sig {
			if p.Role != oracle.RoleInput {
				continue
			}
			path := filepath.Join(scratch, p.Name+".bin")
			if err := os.WriteFile(path, oracle.Encode(j.inputs[k]), 0o444); err != nil {
				return "", "", err
			}
			cf.Inputs = append(cf.Inputs, caseInput{Name: p.Name, Path: path})
			k++
		}
	}
	path = filepath.Join(j.tmp, "route-cases", j.c.ID+"."+r.Name+".json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", "", err
	}
	return path, scratch, writeCaseFile(path, cf)
}

// buildArgv is a route's build command, in the build sandbox: the file
// system read-only, with capture's store and scratch directory hidden
// (other cases' inputs and work, every expected output; the scratch path
// becomes a private tmpfs, the build's TMPDIR), the build's own work
// directory writable, its case file, its own inputs and the IR visible
// read-only, the GPU's device nodes for a cuda case, and every namespace
// unshared. A route that describes itself with a build cache also gets
// its cache directory, writable and shared by its builds in this capture.
func (j *job) buildArgv(r artifacts.Route, caseFile, scratch string, ir *caseIR, work string) ([]string, error) {
	argv := []string{r.Exec, "build", "--case", caseFile, "--workdir", work}
	rw := []visit.Bind{{Src: work, Dst: work}}
	if r.BuildCache {
		dir := filepath.Join(j.tmp, "route-cache", r.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		argv = append(argv, "--cache", dir)
		rw = append(rw, visit.Bind{Src: dir, Dst: dir})
	}
	ro := []visit.Bind{{Src: filepath.Dir(r.Exec), Dst: filepath.Dir(r.Exec)}, {Src: caseFile, Dst: caseFile}}
	if scratch != "" {
		ro = append(ro, visit.Bind{Src: scratch, Dst: scratch})
	}
	if ir != nil && r.AcceptsIR {
		for _, f := range append(slices.Clone(ir.Files), ir.ABI) {
			ro = append(ro, visit.Bind{Src: f, Dst: f})
		}
	}
	if k := kernelCopy(r, j.tmp); k != "" {
		ro = append(ro, visit.Bind{Src: k, Dst: k})
	}
	return j.sandbox.Wrap([]string{j.store, j.tmp}, ro, rw, j.devices.For(j.c.DeviceOf() == oracle.DeviceCUDA), work, argv), nil
}

// parseRouteEnv reads --route-env KEY=VALUE pairs.
func parseRouteEnv(kvs []string) (map[string]string, error) {
	env := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return nil, fmt.Errorf("--route-env %q: want KEY=VALUE", kv)
		}
		if _, dup := env[k]; dup {
			return nil, fmt.Errorf("--route-env %s: given twice", k)
		}
		env[k] = v
	}
	return env, nil
}

// response is a route's build answer (docs/protocol.md).
type response struct {
	Protocol int              `json:"protocol"`
	Status   string           `json:"status"`
	Reason   string           `json:"reason"`
	Kind     string           `json:"kind"`
	Files    []responseFile   `json:"files"`
	Entry    *artifacts.Entry `json:"entry"`
	Link     []string         `json:"link"`
	Process  *responseProcess `json:"process"`
	// Env (kind object): variables the visits of the build run with; only
	// artifacts.ObjectEnv's, since the timer is tilepipe's.
	Env       map[string]string `json:"env"`
	Schedule  map[string]any    `json:"schedule"`
	Toolchain map[string]any    `json:"toolchain"`
	Commands  []json.RawMessage `json:"commands"`
	// RequiresCPU lists the /proc/cpuinfo flags the built code needs.
	RequiresCPU []string `json:"requires_cpu"`
}

type responseFile struct {
	Path  string `json:"path"`
	Role  string `json:"role"`
	Param string `json:"param"` // role output: the output param it holds
}

type responseProcess struct {
	Interpreter  string            `json:"interpreter"`
	Script       string            `json:"script"`
	Args         []string          `json:"args"`
	Env          map[string]string `json:"env"`
	OutputPolicy string            `json:"output_policy"`
	ClosureArgs  []string          `json:"closure_args"`
}

var fileRoles = []string{"object", "source", "header", "stmt", "llvm", "asm", "wrapper", "log", "other", "output", "cubin", "ptx", "manifest", "cache"}

// symbolRE is a C identifier: what an object build's entry symbol may be.
var symbolRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// cpuFlagRE is a CPU feature as /proc/cpuinfo spells it.
var cpuFlagRE = regexp.MustCompile(`^[a-z0-9_]+$`)

// build runs one route's build for one case and stores what it made. A
// route's failure is a failed Build, not an error.
func build(ctx context.Context, s *artifacts.Store, cfg Config, r artifacts.Route, j *job, ir *caseIR) (artifacts.Build, *artifacts.Command, error) {
	c, sig := j.c, j.sig
	b := artifacts.Build{Route: r.Name, Kind: r.Kind}
	if !r.Available {
		b.Status, b.Reason = artifacts.StatusUnavailable, r.Reason
		return b, nil, nil
	}
	if dev := c.DeviceOf(); !r.BuildsFor(dev) {
		// Never asked: a route that does not know devices would build the
		// case for the CPU and time that.
		b.Status, b.Reason = artifacts.StatusUnsupported, fmt.Sprintf("device: the case runs on %s, route %s builds for %s", dev, r.Name, strings.Join(devicesOf(r), " and "))
		return b, nil, nil
	}
	work := filepath.Join(j.tmp, c.ID+"."+r.Name)
	if err := os.Mkdir(work, 0o755); err != nil {
		return b, nil, err
	}
	caseFile, scratch, err := j.routeCaseFile(r, ir)
	if err != nil {
		return b, nil, err
	}
	if scratch != "" {
		defer os.RemoveAll(scratch)
	}
	t0 := time.Now()
	argv, err := j.buildArgv(r, caseFile, scratch, ir, work)
	if err != nil {
		return b, nil, err
	}
	env := buildEnv(j, r, cfg.NoSandbox)
	cmd, out, reason, err := s.Run(ctx, argv, work, env, cfg.BuildTimeout)
	b.Seconds = time.Since(t0).Seconds()
	if err != nil {
		return b, nil, fmt.Errorf("route %s: build %s: %w", r.Name, c.ID, err)
	}
	b.Response, b.Stderr = cmd.Stdout, cmd.Stderr
	prefix := fmt.Sprintf("cases/%s/%s/", c.ID, r.Name)
	s.Name(prefix+"response.json", ocispecDesc(cmd.Stdout))
	s.Name(prefix+"stderr.txt", ocispecDesc(cmd.Stderr))
	if reason != "" {
		b.Status, b.Reason = artifacts.StatusFailed, fmt.Sprintf("route %s build: %s", r.Name, namedTimeout(reason, cfg.BuildTimeout))
		return b, &cmd, nil
	}
	var resp response
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		b.Status, b.Reason = artifacts.StatusFailed, fmt.Sprintf("route %s build: stdout: want one JSON response (docs/protocol.md): %v", r.Name, err)
		return b, &cmd, nil
	}
	if dec.More() {
		b.Status, b.Reason = artifacts.StatusFailed, fmt.Sprintf("route %s build: stdout: more than one JSON value", r.Name)
		return b, &cmd, nil
	}
	if err := fill(s, &b, resp, r, sig, work, prefix); err != nil {
		b.Status, b.Reason = artifacts.StatusFailed, fmt.Sprintf("route %s build: %v", r.Name, err)
		b.Files, b.Entry, b.Process, b.RequiresCPU = nil, nil, nil, nil
		return b, &cmd, nil
	}
	if r.Validates && b.Status == artifacts.StatusBuilt {
		if err := validate(s, &b, j, prefix); err != nil {
			return b, nil, fmt.Errorf("route %s: build %s: %w", r.Name, c.ID, err)
		}
	}
	return b, &cmd, nil
}

// buildEnv: the environment a route's build command gets beside the
// job's: TMPDIR in the sandbox, a kernel route's file (TILEPIPE_KERNEL)
// and a cubin route's TILEPIPE_PTXAS.
func buildEnv(j *job, r artifacts.Route, noSandbox bool) map[string]string {
	env := maps.Clone(j.env)
	if env == nil {
		env = map[string]string{}
	}
	if !noSandbox {
		// The host's /tmp is read-only in the build sandbox; capture's
		// scratch directory is a private tmpfs there, the work dir inside it.
		env["TMPDIR"] = j.tmp
	}
	if k := kernelCopy(r, j.tmp); k != "" {
		env[KernelEnv] = k
	}
	if _, given := env["TILEPIPE_PTXAS"]; r.Kind == artifacts.KindCubin && !given {
		// The ptxas prepare will build the PTX again with (docs/gpu.md,
		// "The cubin chain"): a cubin route builds its cubin with it.
		if p, err := launch.FindPtxas(); err == nil {
			env["TILEPIPE_PTXAS"] = p
		}
	}
	return env
}

// namedTimeout names --build-timeout-s in a build's timed_out reason,
// before the last stderr line that may follow it.
func namedTimeout(reason string, timeout time.Duration) string {
	t := fmt.Sprintf("timed_out: after %s", timeout)
	if !strings.HasPrefix(reason, t) {
		return reason
	}
	return fmt.Sprintf("%s (--build-timeout-s %g)%s", t, timeout.Seconds(), reason[len(t):])
}

// validate checks the outputs a validating route computed in its build
// (fill made sure there is one file of the right size per output param)
// in full against the oracle, and fails the build when they are wrong.
// The error is for outputs that could not be read back from the store.
func validate(s *artifacts.Store, b *artifacts.Build, j *job, prefix string) error {
	var got []oracle.Tensor
	for _, p := range j.sig {
		if p.Role != oracle.RoleOutput {
			continue
		}
		i := slices.IndexFunc(b.Files, func(f artifacts.FileRef) bool { return f.Role == artifacts.RoleOutput && f.Param == p.Name })
		if i < 0 {
			return fmt.Errorf("no output file for param %s", p.Name)
		}
		raw, err := s.ReadVerified(b.Files[i].Digest, prefix+b.Files[i].Path, int64(p.Bytes()))
		if err != nil {
			return err
		}
		t, err := oracle.Decode(p.Dtype, raw)
		if err != nil {
			return fmt.Errorf("output %s: %w", p.Name, err)
		}
		got = append(got, t)
	}
	vd := oracle.Compare(j.c, j.expected, got)
	b.Validation = &artifacts.Validation{Pass: vd.Pass, Reason: vd.Reason, MaxRatio: vd.MaxRatio, Checked: vd.Checked}
	if !vd.Pass {
		b.Status, b.Reason = artifacts.StatusFailed, "validation: "+vd.Reason
	}
	return nil
}

func fill(s *artifacts.Store, b *artifacts.Build, resp response, r artifacts.Route, sig []oracle.Param, work, prefix string) error {
	if resp.Protocol != 1 {
		return fmt.Errorf("response protocol: want 1, got %d", resp.Protocol)
	}
	b.Schedule, b.Toolchain = resp.Schedule, resp.Toolchain
	switch resp.Status {
	case artifacts.StatusUnsupported:
		if resp.Reason == "" {
			return errors.New("response reason: an unsupported answer must say why")
		}
		b.Status, b.Reason = resp.Status, resp.Reason
		return nil
	case artifacts.StatusFailed:
		b.Status, b.Reason = resp.Status, resp.Reason
		if b.Reason == "" {
			b.Reason = "route reported failed without a reason"
		}
		return nil
	case artifacts.StatusBuilt:
	default:
		return fmt.Errorf("response status: want built, unsupported or failed, got %q", resp.Status)
	}
	if resp.Kind != r.Kind {
		return fmt.Errorf("response kind: route described itself as %q, build says %q", r.Kind, resp.Kind)
	}
	if len(resp.Files) == 0 {
		return errors.New("response files: a built case must list its files")
	}
	for i, f := range resp.RequiresCPU {
		if !cpuFlagRE.MatchString(f) {
			return fmt.Errorf("response requires_cpu[%d] %q: want a CPU flag as /proc/cpuinfo spells it (lowercase letters, digits and '_')", i, f)
		}
	}
	if err := storeFiles(s, b, resp, r, sig, work, prefix); err != nil {
		return err
	}
	if err := envForKind(r.Kind, resp.Env); err != nil {
		return err
	}
	var err error
	switch r.Kind {
	case artifacts.KindObject:
		err = fillObject(b, resp, sig)
	case artifacts.KindProcess:
		err = fillProcess(b, resp)
	case artifacts.KindCubin:
		err = checkCubin(resp.Files, work, sig)
	default:
		err = fmt.Errorf("route kind %q: this tilepipe times object, process and cubin routes", r.Kind)
	}
	if err != nil {
		return err
	}
	b.Status, b.RequiresCPU = artifacts.StatusBuilt, resp.RequiresCPU
	return nil
}

// storeFiles checks a built response's files (clean paths inside the
// workdir, listed once, a known role, regular files; a validating route's
// one output file per output param, of the param's size) and stores each.
func storeFiles(s *artifacts.Store, b *artifacts.Build, resp response, r artifacts.Route, sig []oracle.Param, work, prefix string) error {
	outputs := map[string]oracle.Param{}
	var outNames []string
	for _, p := range sig {
		if p.Role == oracle.RoleOutput {
			outputs[p.Name] = p
			outNames = append(outNames, p.Name)
		}
	}
	seen, have := map[string]bool{}, map[string]bool{}
	for i, f := range resp.Files {
		if !artifacts.ValidTitle(f.Path) {
			return fmt.Errorf("response files[%d].path %q: want a clean relative path inside the workdir", i, f.Path)
		}
		if seen[f.Path] {
			return fmt.Errorf("response files[%d].path %q: listed twice", i, f.Path)
		}
		seen[f.Path] = true
		if !slices.Contains(fileRoles, f.Role) {
			return fmt.Errorf("response files[%d].role %q: want one of %v", i, f.Role, fileRoles)
		}
		var out oracle.Param
		switch {
		case f.Role == artifacts.RoleOutput && !r.Validates:
			return fmt.Errorf(`response files[%d].role output: only a route that describes itself with "validates": true returns outputs`, i)
		case f.Role == artifacts.RoleOutput:
			var ok bool
			if out, ok = outputs[f.Param]; !ok {
				return fmt.Errorf("response files[%d].param %q: want the output param the file holds, one of %v", i, f.Param, outNames)
			}
			if have[f.Param] {
				return fmt.Errorf("response files[%d].param %q: a second output file for param %s", i, f.Param, f.Param)
			}
			have[f.Param] = true
		case f.Param != "":
			return fmt.Errorf("response files[%d].param %q: only a file with role output names a param", i, f.Param)
		case f.Role == artifacts.RoleCache && resp.Kind != artifacts.KindProcess:
			return fmt.Errorf("response files[%d].role cache: only a process build has cache files (its visits get a fresh copy of them)", i)
		case f.Role == artifacts.RoleCache && !strings.HasPrefix(f.Path, artifacts.CacheDir+"/"):
			return fmt.Errorf("response files[%d].path %q: a cache file is under %s/ (a visit sees that directory as $TILEPIPE_CACHE)", i, f.Path, artifacts.CacheDir)
		}
		full := filepath.Join(work, f.Path)
		fi, err := os.Lstat(full)
		if err != nil {
			return fmt.Errorf("response files[%d].path %q: %w", i, f.Path, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("response files[%d].path %q: not a regular file (mode %s)", i, f.Path, fi.Mode())
		}
		d, err := s.PutFile(full, artifacts.MediaOctet)
		if err != nil {
			return err
		}
		if f.Role == artifacts.RoleOutput && d.Size != int64(out.Bytes()) {
			return fmt.Errorf("response files[%d].path %q: output %s has %d bytes, want %d (raw little-endian %s %v)", i, f.Path, out.Name, d.Size, out.Bytes(), out.Dtype, out.Shape)
		}
		s.Name(prefix+f.Path, d)
		b.Files = append(b.Files, artifacts.FileRef{Path: f.Path, Role: f.Role, Param: f.Param, Digest: d.Digest, Size: d.Size})
	}
	if r.Validates {
		for _, n := range outNames {
			if p := outputs[n]; !have[n] {
				return fmt.Errorf("response files: no file with role output for param %s (want %d bytes, raw little-endian %s %v)", n, p.Bytes(), p.Dtype, p.Shape)
			}
		}
	}
	return nil
}

// fillObject checks an object build's entry (a C identifier with the
// case's signature), objects and link flags, and keeps them.
func fillObject(b *artifacts.Build, resp response, sig []oracle.Param) error {
	if resp.Entry == nil || resp.Entry.Symbol == "" {
		return errors.New("response entry: an object build must name its entry symbol")
	}
	if !symbolRE.MatchString(resp.Entry.Symbol) {
		return fmt.Errorf("response entry.symbol %q: want a C identifier (prepare links the harness's tilepipe_entry to it)", resp.Entry.Symbol)
	}
	if err := sameSignature(resp.Entry.Params, sig); err != nil {
		return fmt.Errorf("response entry.params: %w", err)
	}
	if !slices.ContainsFunc(resp.Files, func(f responseFile) bool { return f.Role == artifacts.RoleObject }) {
		return errors.New("response files: an object build must list at least one file with role object")
	}
	for i, l := range resp.Link {
		if !strings.HasPrefix(l, "-l") && !strings.HasPrefix(l, "-L/") && !strings.HasPrefix(l, "-Wl,") {
			return fmt.Errorf("response link[%d] %q: want -lNAME, -L/abs or a -Wl, option", i, l)
		}
	}
	b.Entry, b.Link, b.Env = resp.Entry, resp.Link, resp.Env
	return nil
}

// fillProcess checks a process build's interpreter (absolute, hashed by
// what it resolves to), wrapper script, output policy and closure
// arguments, and keeps them.
func fillProcess(b *artifacts.Build, resp response) error {
	p := resp.Process
	if p == nil {
		return errors.New("response process: a process build must say how to run it")
	}
	if !filepath.IsAbs(p.Interpreter) {
		return fmt.Errorf("response process.interpreter %q: want an absolute path", p.Interpreter)
	}
	if !slices.ContainsFunc(resp.Files, func(f responseFile) bool { return f.Path == p.Script && f.Role == artifacts.RoleWrapper }) {
		return fmt.Errorf("response process.script %q: want one of files with role wrapper", p.Script)
	}
	if p.OutputPolicy != "out" && p.OutputPolicy != "copy" {
		return fmt.Errorf("response process.output_policy %q: want out or copy", p.OutputPolicy)
	}
	// The path is kept as the route named it: a virtual environment's
	// bin/python3 is a symlink, and Python finds the environment (its
	// pyvenv.cfg, its site-packages) only when run by that name. The
	// digest is of the file it resolves to.
	real, err := filepath.EvalSymlinks(p.Interpreter)
	if err != nil {
		return fmt.Errorf("response process.interpreter %q: %w", p.Interpreter, err)
	}
	dg, _, err := artifacts.HashFile(real)
	if err != nil {
		return fmt.Errorf("response process.interpreter %q: %w", p.Interpreter, err)
	}
	for i, a := range p.ClosureArgs {
		if a == "" || a == "--closure" || strings.ContainsRune(a, 0) {
			return fmt.Errorf("response process.closure_args[%d] %q: want a non-empty argument without NUL (prepare adds --closure itself)", i, a)
		}
	}
	b.Process = &artifacts.Process{Interpreter: filepath.Clean(p.Interpreter), InterpreterDigest: dg, Script: p.Script, Args: p.Args, Env: p.Env, OutputPolicy: p.OutputPolicy, ClosureArgs: p.ClosureArgs}
	return nil
}

func sameSignature(got, want []oracle.Param) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d params, the case's signature has %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Role != w.Role || g.Dtype != w.Dtype || !slices.Equal(g.Shape, w.Shape) {
			return fmt.Errorf("param %d is %s %s %s %v, the signature wants %s %s %s %v", i, g.Role, g.Name, g.Dtype, g.Shape, w.Role, w.Name, w.Dtype, w.Shape)
		}
	}
	return nil
}

// devicesOf is the devices a route builds for, the CPU when it says none.
func devicesOf(r artifacts.Route) []string {
	if len(r.Devices) == 0 {
		return []string{oracle.DeviceCPU}
	}
	return r.Devices
}

// checkCubin checks a cubin build (docs/gpu.md): one file each with the
// roles cubin, ptx and manifest, and a launch manifest that fits the case
// and the kernel's PTX entry as compiled. Prepare and the audit read the
// same stored files again.
func checkCubin(files []responseFile, work string, sig []oracle.Param) error {
	one := map[string]string{}
	for i, f := range files {
		switch f.Role {
		case "cubin", "ptx", "manifest":
			if one[f.Role] != "" {
				return fmt.Errorf("response files[%d]: a second file with role %s", i, f.Role)
			}
			one[f.Role] = f.Path
		case "object", "wrapper":
			return fmt.Errorf("response files[%d]: role %s in a cubin build", i, f.Role)
		}
	}
	for _, role := range []string{"cubin", "ptx", "manifest"} {
		if one[role] == "" {
			return fmt.Errorf("response files: a cubin build must list one file with role %s", role)
		}
	}
	read := func(role string, limit int64) ([]byte, error) {
		path := filepath.Join(work, one[role])
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if fi.Size() > limit {
			return nil, fmt.Errorf("response %s %s: %d bytes, limit %d", role, one[role], fi.Size(), limit)
		}
		return os.ReadFile(path)
	}
	mb, err := read("manifest", launch.MaxManifestBytes)
	if err != nil {
		return err
	}
	m, err := launch.Parse(mb)
	if err != nil {
		return fmt.Errorf("%s: %w", one["manifest"], err)
	}
	if err := m.Check(sig); err != nil {
		return fmt.Errorf("%s: %w", one["manifest"], err)
	}
	ptx, err := read("ptx", 256<<20)
	if err != nil {
		return err
	}
	if err := m.MatchPTX(ptx); err != nil {
		return fmt.Errorf("%s against %s: %w", one["manifest"], one["ptx"], err)
	}
	return nil
}

// envForKind checks a build response's top-level env: an object build's
// may set artifacts.ObjectEnv; any other kind has none (a process build
// gives its variables in process.env, a cubin build runs tilepipe's timer
// with none), so a route cannot add one that would be silently ignored.
func envForKind(kind string, env map[string]string) error {
	if kind != artifacts.KindObject {
		if env != nil {
			return fmt.Errorf("response env: a %s build sets no variables here (an object build's visits may take %s)", kind, strings.Join(artifacts.ObjectEnv, ", "))
		}
		return nil
	}
	if err := artifacts.CheckObjectEnv(env); err != nil {
		return fmt.Errorf("response %w", err)
	}
	return nil
}
