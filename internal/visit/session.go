package visit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/internal/affinity"
)

// Limits of what a visit may write besides its reports.
const (
	MaxStderr  = 1 << 20         // bytes kept of stderr; more fails the visit
	maxLine    = 1 << 16         // longest report line
	Grace      = 2 * time.Second // for the exit and the pipes after the final report
	ClockAhead = 50 * time.Microsecond
	ClockBase  = 5 * time.Millisecond
	ClockFrac  = 0.25
	// The gap of a visit whose batch samples are timed by CUDA events
	// ([CheckGap]): GapFactor × its slowest empty sample + GapBase, at
	// most GapMax. On the H200 (docs/results/2026-12-04-gpu-clock-probe,
	// gaps.txt, chain-median/chain-visits.txt) an honest visit's median gap
	// was 0.26-0.67 of this bound; the gap is the empty sample's round trip
	// plus the events and the device synchronisation.
	GapFactor = 2
	GapBase   = 200 * time.Microsecond
	GapMax    = time.Millisecond
	// CPU accounting: a visit may use wall × threads × CPUFactor + CPUSlack.
	CPUFactor = 1.25
	CPUSlack  = 50 * time.Millisecond
)

// Failure is something the visit did wrong; Reason names it
// (docs/protocol.md, "visit").
type Failure struct{ Reason string }

func (f *Failure) Error() string { return f.Reason }

func fail(format string, args ...any) error { return &Failure{Reason: fmt.Sprintf(format, args...)} }

// Spec says how to start one timer.
type Spec struct {
	Argv    []string // the timer as the sandbox sees it
	Env     []string // the whole environment, KEY=VALUE: nothing else is inherited
	Dir     string   // working directory (as the sandbox sees it)
	Sandbox *Sandbox // nil: no sandbox (--no-sandbox)
	Mounts  Mounts   // what the sandbox shows
	Timeout time.Duration
	Threads int
	Limiter *Limiter // nil: no CPU quota (the machine gives no cgroup)
	// Files are the visit's memory files, fd 5 and up in this order.
	Files []*os.File
	// Telemetry, when set, reads the GPU just before every sample command
	// and just after its report (LastTelemetry); its error fails the visit.
	Telemetry func() (samples.Reading, error)
	// Cores, when set, is the CPU mask the visit's processes start with
	// (internal/affinity): replay's own threads keep off them.
	Cores []int
}

// Session is one running timer.
type Session struct {
	spec     Spec
	cmd      *exec.Cmd
	cmdW     int // raw fd: commands to the timer
	repR     int // raw fd: reports from the timer
	buf      []byte
	stdout   *sink
	stderr   *sink
	start    time.Time
	deadline time.Time
	watchdog *time.Timer
	killed   chan struct{}
	killOnce sync.Once
	exited   chan struct{}
	seq      int64
	tel      Telemetry // of the last sample command
	cgroup   *cgroup   // nil: no CPU quota
	frozen   bool      // the visit's cgroup is frozen (Freeze, Novel)
	staging  *Staging  // the novel sample being taken, when its slots are staged
	Argv     []string  // what was started, sandbox included (the cgroup is the Limiter's record)
	// Cores is the visit's top process's CPU mask, read back from the
	// kernel just after it started (nil where it could not be read).
	Cores []int
	// pinned is the core each thread got from pinThreads, by thread id.
	pinned map[int]int
}

// sink drains one output pipe, keeping at most limit bytes.
type sink struct {
	buf   bytes.Buffer
	total int64
	limit int
	done  chan struct{}
	r     *os.File
}

func newSink(r *os.File, limit int) *sink {
	s := &sink{limit: limit, done: make(chan struct{}), r: r}
	go func() {
		defer close(s.done)
		b := make([]byte, 32<<10)
		for {
			n, err := r.Read(b)
			if n > 0 {
				s.total += int64(n)
				if keep := min(n, s.limit-s.buf.Len()); keep > 0 {
					s.buf.Write(b[:keep])
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

// Start starts the timer with fd 3 (commands: a Unix stream socket, on
// which a command can carry a descriptor) and fd 4 (reports: a pipe).
func Start(ctx context.Context, spec Spec) (*Session, error) {
	childCmd, childRep, cmdW, repR, err := channels()
	if err != nil {
		return nil, err
	}
	theirs, ours := []*os.File{childCmd, childRep}, []*os.File{}
	fail := func(err error) (*Session, error) {
		closeFiles(theirs)
		closeFiles(ours)
		unix.Close(cmdW)
		unix.Close(repR)
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	ours, theirs = append(ours, outR), append(theirs, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	ours, theirs = append(ours, errR), append(theirs, errW)
	argv := spec.Argv
	if spec.Sandbox != nil {
		argv = spec.Sandbox.Argv(spec.Mounts, spec.Dir, spec.Argv)
	}
	run := argv
	var cg *cgroup
	if spec.Limiter != nil {
		if cg, err = spec.Limiter.make("visit", float64(spec.Threads)*CPUFactor); err != nil {
			return fail(err)
		}
		run = cg.wrap(argv)
	}
	c := exec.Command(run[0], run[1:]...)
	c.Env = spec.Env
	if c.Env == nil {
		c.Env = []string{}
	}
	if spec.Sandbox == nil {
		c.Dir = spec.Dir
	}
	c.Stdin = nil
	c.Stdout, c.Stderr = outW, errW
	c.ExtraFiles = append([]*os.File{childCmd, childRep}, spec.Files...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := c.Start
	if len(spec.Cores) > 0 {
		start = func() error { return affinity.StartOn(spec.Cores, c.Start) }
	}
	if err := start(); err != nil {
		if cg != nil {
			cg.remove()
		}
		return fail(fmt.Errorf("start %s: %w", argv[0], err))
	}
	closeFiles(theirs) // the timer's ends are the timer's now
	s := &Session{spec: spec, cmd: c, cmdW: cmdW, repR: repR, killed: make(chan struct{}), exited: make(chan struct{}), cgroup: cg, Argv: argv}
	s.Cores, _ = affinity.Of(c.Process.Pid)
	s.start = time.Now()
	s.deadline = s.start.Add(spec.Timeout)
	s.stdout, s.stderr = newSink(outR, 64<<10), newSink(errR, MaxStderr)
	s.watch(ctx)
	return s, nil
}

// channels makes the visit's fd 3 (a Unix stream socket the timer only
// reads, as a pipe's read end) and fd 4 (a pipe): the timer's ends as
// files to hand it, ours as raw descriptors.
func channels() (childCmd, childRep *os.File, cmdW, repR int, err error) {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, -1, -1, err
	}
	var rp [2]int
	if err = unix.Shutdown(sp[0], unix.SHUT_WR); err == nil { // the timer only reads commands
		if err = unix.Pipe2(rp[:], unix.O_CLOEXEC); err == nil {
			return os.NewFile(uintptr(sp[0]), "commands"), os.NewFile(uintptr(rp[1]), "reports"), sp[1], rp[0], nil
		}
	}
	unix.Close(sp[0])
	unix.Close(sp[1])
	return nil, nil, -1, -1, err
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// watch reaps the timer when it exits, and kills it at its deadline or
// when ctx ends.
func (s *Session) watch(ctx context.Context) {
	go func() {
		s.cmd.Wait() // its outcome is s.cmd.ProcessState
		close(s.exited)
	}()
	s.watchdog = time.AfterFunc(s.spec.Timeout, s.kill)
	go func() {
		select {
		case <-ctx.Done():
			s.kill()
		case <-s.exited:
		}
	}()
}

// kill ends every process of the visit: the process group, and with it
// the sandbox (bwrap --die-with-parent takes its namespace down with it).
func (s *Session) kill() {
	s.killOnce.Do(func() {
		close(s.killed)
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		s.cmd.Process.Kill()
		if s.CanFreeze() {
			s.cgroup.thaw() // a frozen v1 task dies only once thawed
		}
	})
}

func (s *Session) timedOut() bool {
	select {
	case <-s.killed:
		return !time.Now().Before(s.deadline)
	default:
		return false
	}
}

// readLine returns the next report line, waiting at most until the
// visit's deadline.
func (s *Session) readLine() ([]byte, error) {
	for {
		if i := bytes.IndexByte(s.buf, '\n'); i >= 0 {
			line := s.buf[:i]
			s.buf = s.buf[i+1:]
			return line, nil
		}
		if len(s.buf) > maxLine {
			return nil, fail("unexpected_report: a line of more than %d bytes", maxLine)
		}
		wait := time.Until(s.deadline)
		if wait <= 0 {
			s.kill()
			return nil, s.timeoutFailure()
		}
		fds := []unix.PollFd{{Fd: int32(s.repR), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(wait/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		var b [4096]byte
		m, err := unix.Read(s.repR, b[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			if s.timedOut() {
				return nil, s.timeoutFailure()
			}
			if len(s.buf) > 0 {
				return nil, fail("unexpected_report: %d bytes without a newline before fd 4 closed", len(s.buf))
			}
			return nil, errEOF
		}
		s.buf = append(s.buf, b[:m]...)
	}
}

var errEOF = errors.New("end of reports")

func (s *Session) timeoutFailure() error {
	return fail("timed_out: after %s", s.spec.Timeout)
}

// read waits for the next report, which must be of type want.
func (s *Session) read(want string) (Report, error) {
	line, err := s.readLine()
	if err == errEOF {
		return Report{}, s.diedBefore(want)
	}
	if err != nil {
		return Report{}, err
	}
	r, err := ParseReport(line)
	if err != nil {
		return Report{}, fail("unexpected_report: %v", err)
	}
	if r.Type == TypeFault {
		return Report{}, fail("%s", r.Reason)
	}
	if r.Type != want {
		return Report{}, fail("unexpected_report: a %s report, want %s", r.Type, want)
	}
	return r, nil
}

// diedBefore explains a closed report pipe: how the timer ended.
func (s *Session) diedBefore(want string) error {
	select {
	case <-s.exited:
	case <-time.After(Grace):
		return fail("no_report: fd 4 closed before the %s report, and the timer is still running", want)
	}
	if f := s.exitFailure(); f != nil {
		return f
	}
	return fail("no_report: the timer exited before its %s report", want)
}

// exitFailure names an abnormal end of the visit's top process.
func (s *Session) exitFailure() error {
	if s.timedOut() {
		return s.timeoutFailure()
	}
	st := s.cmd.ProcessState
	if st == nil {
		return nil
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	code := st.ExitCode()
	switch {
	case ws.Signaled():
		return fail("crashed: killed by signal %d (%s)%s", int(ws.Signal()), ws.Signal(), s.stderrTail())
	case s.spec.Sandbox != nil && code > 128 && code < 128+65:
		// bwrap exits 128+N when the timer was killed by signal N.
		sig := syscall.Signal(code - 128)
		return fail("crashed: killed by signal %d (%s)%s", int(sig), sig, s.stderrTail())
	case code != 0:
		return fail("exited: status %d%s", code, s.stderrTail())
	}
	return nil
}

func (s *Session) stderrTail() string {
	select {
	case <-s.stderr.done:
	case <-time.After(100 * time.Millisecond):
	}
	b := bytes.TrimSpace(s.stderr.buf.Bytes())
	if len(b) == 0 {
		return ""
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	if len(b) > 300 {
		b = b[:300]
	}
	return ": " + string(b)
}

// Validated waits for the timer's validation report.
func (s *Session) Validated() (Report, error) { return s.read(TypeValidated) }

// Sample runs n calls over the warm sets and returns replay's span and
// the timer's own number for them.
func (s *Session) Sample(n int64) (span time.Duration, timerNs int64, err error) {
	return s.command("run", n, n)
}

// CanFreeze says whether the visit's processes can be frozen: its
// cgroup has a freezer.
func (s *Session) CanFreeze() bool {
	return s.cgroup != nil && (s.cgroup.v2 || s.cgroup.freezer != "")
}

// Freeze stops every process of the visit and returns once all of them are
// frozen (docs/protocol4-design.md): while frozen nothing of the visit runs,
// so replay can write inputs no process of the visit could have read.
func (s *Session) Freeze() error {
	if !s.CanFreeze() {
		return errors.New("visit: no freezer for this visit's cgroup")
	}
	if err := s.cgroup.freeze(); err != nil {
		return err
	}
	s.frozen = true
	return nil
}

// Thaw lets the visit's processes run again.
func (s *Session) Thaw() error {
	if !s.CanFreeze() {
		return errors.New("visit: no freezer for this visit's cgroup")
	}
	if err := s.cgroup.thaw(); err != nil {
		return err
	}
	s.frozen = false
	return nil
}

// FreezeCycles is how many idle thaw-and-freeze cycles [Session.FreezeCycle]
// times after a visit's last novel sample.
const FreezeCycles = 5

// FreezeCycle times k cycles of thawing the frozen visit and freezing it
// again, with no command between (the timer waits for its next one), and
// returns their median: the part of a novel sample's bracket that the
// channel's round trip (the empty samples) does not hold. It is a figure
// for the report (the bracket's share of a row's novel time), never part
// of a time or a verdict, so a visit that makes its own freezes slow only
// makes its own rows look more overhead-bound. The visit is left frozen.
func (s *Session) FreezeCycle(k int) (time.Duration, error) {
	if !s.frozen {
		return 0, errors.New("visit: a freeze cycle of a visit that is not frozen")
	}
	ds := make([]time.Duration, 0, k)
	for range k {
		t0 := time.Now()
		if err := s.Thaw(); err != nil {
			return 0, err
		}
		if err := s.Freeze(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	if len(ds) == 0 {
		return 0, nil
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

// Novel takes a novel sample (docs/protocol4-design.md) of a frozen
// visit: the clock starts, the visit is thawed, the timer runs n calls on
// fresh sets 0 to n-1 (whatever replay wrote there while it was frozen),
// and the clock stops once the visit is frozen again after the answer, so
// everything the visit did with those inputs is inside the span.
func (s *Session) Novel(n int64) (span time.Duration, timerNs int64, err error) {
	return s.NovelStaged(n, nil)
}

// Staging is how a GPU novel sample's slots reach the visit under novel
// rule 3 (docs/gpu-clock.md, "The stager"): replay's monitor made them as
// one allocation while the visit was frozen, and Slots, its descriptor,
// goes with the command. After the answer and the freeze, Probe (the
// monitor's idle probe) runs inside the span, so GPU work the visit left
// running when it answered is timed (or fails the visit); Unstage (the
// monitor's download and checks) runs after the span, before the
// sample's closing telemetry reading.
type Staging struct {
	Slots   *os.File
	Probe   func() error
	Unstage func() error
}

// NovelStaged is Novel with the slots staged by st (nil: in the visit's
// memory files, as on the CPU).
func (s *Session) NovelStaged(n int64, st *Staging) (span time.Duration, timerNs int64, err error) {
	if !s.frozen {
		return 0, 0, errors.New("visit: a novel sample of a visit that is not frozen")
	}
	s.staging = st
	defer func() { s.staging = nil }()
	return s.commandFrozen("novel", n, n, true)
}

func (s *Session) write(b []byte) error { return s.send(b, nil) }

// send writes b on the command socket, carrying f's descriptor with its
// first byte when f is not nil.
func (s *Session) send(b []byte, f *os.File) error {
	var oob []byte
	if f != nil {
		oob = unix.UnixRights(int(f.Fd()))
	}
	for len(b) > 0 {
		n, err := unix.SendmsgN(s.cmdW, b, oob, nil, unix.MSG_NOSIGNAL)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return s.diedBefore("next")
		}
		b, oob = b[n:], nil
	}
	return nil
}

// End asks for the final report (thawing a frozen visit first).
func (s *Session) End() (Report, error) {
	if s.frozen {
		if err := s.Thaw(); err != nil {
			return Report{}, err
		}
	}
	if err := s.write([]byte("end\n")); err != nil {
		return Report{}, err
	}
	return s.read(TypeFinal)
}

// Outcome is how the visit's processes ended.
type Outcome struct {
	Exit   int
	Stdout []byte
	Stderr []byte
	CPU    time.Duration // every process of the visit, read from /proc at the final report
	Wall   time.Duration // from the start to the final report
	// Throttled: CFS periods in which the visit's cgroup hit its quota.
	Throttled int64
}

// Finish ends the visit after its final report (final = true) or after a
// failure: it checks that nothing but the timer is left, that the timer
// exits, that nothing follows the final report, and accounts the CPU time.
// The first failure wins; a visit that already failed keeps its reason
// (pass it as failed) and gets the outcome only.
func (s *Session) Finish(final bool) (*Outcome, error) {
	var failure error
	// Read the visit's CPU time while its processes are still there: the
	// timer has just sent its final report and does nothing more.
	cpu, wall := treeCPU(s.cmd.Process.Pid), time.Since(s.start)
	if final {
		if left := s.leftovers(); left != "" {
			failure = fail("left_processes: %s still running at the final report", left)
		}
	}
	// Closing fd 3 lets the timer exit: it waits for that, so the scan
	// above saw the visit whole.
	unix.Close(s.cmdW)
	s.cmdW = -1
	if failure != nil || !final {
		s.kill()
	}
	select {
	case <-s.exited:
	case <-time.After(Grace):
		s.kill()
		<-s.exited
		if failure == nil {
			failure = fail("left_processes: the visit had not ended %s after its final report", Grace)
		}
	}
	s.watchdog.Stop()
	// Without a sandbox, what the timer left in its process group is found
	// (and killed) here; one that left the group too is not (the sandbox's
	// PID namespace is what catches that).
	if final && failure == nil && groupLeft(s.cmd.Process.Pid, Grace) {
		failure = fail("left_processes: processes of the visit's process group still running after the timer exited")
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	// The cgroup holds every process of the visit, those that left its
	// process group too (a daemon without a sandbox).
	if s.cgroup != nil {
		if n := s.cgroup.left(Grace); n > 0 && final && failure == nil {
			failure = fail("left_processes: %d process(es) of the visit's cgroup still running after the timer exited", n)
		}
	}
	if final && failure == nil {
		if f := s.exitFailure(); f != nil {
			failure = f
		} else if line, err := s.trailing(); err != nil {
			failure = err
		} else if line != "" {
			failure = fail("unexpected_report: %q after the final report", line)
		}
	}
	if held := s.drainPipes(); failure == nil {
		failure = held
	}
	unix.Close(s.repR)
	o := &Outcome{Exit: -1, Stdout: s.stdout.buf.Bytes(), Stderr: s.stderr.buf.Bytes(), CPU: cpu, Wall: wall}
	if s.cgroup != nil {
		n, err := s.cgroup.throttled()
		if err != nil {
			return o, err
		}
		o.Throttled = n
		if err := s.cgroup.remove(); err != nil {
			return o, fmt.Errorf("visit cgroup: %w", err)
		}
	}
	if st := s.cmd.ProcessState; st != nil {
		o.Exit = st.ExitCode()
	}
	if failure == nil && final {
		failure = s.judgeOutcome(o)
	}
	return o, failure
}

// judgeOutcome is what a visit that ended well did wrong, if anything:
// output on stdout, too much on stderr, or more CPU than its threads.
func (s *Session) judgeOutcome(o *Outcome) error {
	switch {
	case s.stdout.total > 0:
		return fail("unexpected_output: %d bytes on stdout (a timer reports only on fd 4)", s.stdout.total)
	case s.stderr.total > MaxStderr:
		return fail("output_too_large: stderr has more than %d bytes", MaxStderr)
	}
	// The quota first: where it throttled the visit it is what acted, and
	// under it the accounting can still come out a few ms over its limit
	// (CFS bandwidth is enforced per 100 ms period; a fresh-clone CI run
	// saw 1.820 s against 1.815 s).
	limit := time.Duration(float64(o.Wall)*float64(s.spec.Threads)*CPUFactor) + CPUSlack
	if o.Throttled > 0 {
		return fail("threads_exceeded: the visit's processes hit its CPU quota of %g CPUs (%d threads x %g) in %d periods of 100 ms",
			float64(s.spec.Threads)*CPUFactor, s.spec.Threads, CPUFactor, o.Throttled)
	}
	if o.CPU > limit {
		return fail("threads_exceeded: the visit's processes used %.3f s of CPU in %.3f s of wall time, more than %d threads allow (%.3f s)",
			o.CPU.Seconds(), o.Wall.Seconds(), s.spec.Threads, limit.Seconds())
	}
	return nil
}

// drainPipes waits up to Grace for stdout and stderr to close, then ends
// their drains; a pipe still held open is the visit's failure.
func (s *Session) drainPipes() error {
	var failure error
	pipes := time.NewTimer(Grace)
	for _, k := range []*sink{s.stdout, s.stderr} {
		select {
		case <-k.done:
			continue
		case <-pipes.C:
		}
		failure = fail("pipe_held_open: stdout or stderr still open %s after the visit's processes ended", Grace)
		break
	}
	pipes.Stop()
	s.stdout.r.Close() // ends a drain that a held pipe blocks
	s.stderr.r.Close()
	<-s.stdout.done
	<-s.stderr.done
	return failure
}

// Close ends the visit with Finish after driving it: err is the first
// error of driving it, final whether the final report arrived. It returns
// the reason of the first failure, driving's before Finish's ("" when the
// visit passed), the outcome, and an error only when the visit could not
// be run.
func (s *Session) Close(err error, final bool) (string, *Outcome, error) {
	out, ferr := s.Finish(final)
	for _, e := range []error{err, ferr} {
		var f *Failure
		switch {
		case errors.As(e, &f):
			return f.Reason, out, nil
		case e != nil:
			return "", out, e
		}
	}
	return "", out, nil
}

// groupLeft waits up to grace for process group pgid to empty by itself
// (a sandbox's processes die a moment after bubblewrap) and says whether
// any process of it is still there.
func groupLeft(pgid int, grace time.Duration) bool {
	for end := time.Now().Add(grace); syscall.Kill(-pgid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if !time.Now().Before(end) {
			return true
		}
	}
	return false
}

// trailing reads what is left on fd 4 once the timer has exited.
func (s *Session) trailing() (string, error) {
	if len(s.buf) > 0 {
		return string(s.buf), nil
	}
	fds := []unix.PollFd{{Fd: int32(s.repR), Events: unix.POLLIN}}
	if n, _ := unix.Poll(fds, 0); n == 0 {
		return "", nil
	}
	var b [256]byte
	m, _ := unix.Read(s.repR, b[:])
	if m > 0 {
		return string(b[:m]), nil
	}
	return "", nil
}

// leftovers lists the processes descended from the visit's top process
// other than the ones the visit is made of: the timer, and with a sandbox
// bwrap's init. Orphans inside the sandbox are re-parented to that init,
// so they are found too.
func (s *Session) leftovers() string {
	var kids []proc
	for _, p := range descendants(s.cmd.Process.Pid) {
		if !p.zombie {
			kids = append(kids, p)
		}
	}
	expect := 0 // the timer is the top process
	if s.spec.Sandbox != nil {
		expect = 2 // bwrap's init and the timer
	}
	if len(kids) <= expect {
		return ""
	}
	// The timer and init are the oldest descendants: list the others.
	extra := kids[expect:]
	return fmt.Sprintf("%d other process(es) (%s)", len(extra), comms(extra))
}
