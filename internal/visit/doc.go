// Package visit runs one timed visit (docs/protocol.md, "visit") and owns
// its clock: it starts a timer, inside a [Sandbox] or not, hands it the
// command and report pipes as file descriptors 3 and 4, drives warm-up,
// calibration and sampling with its own measurements, and accounts every
// process the visit started.
//
// # Terms
//
// A [Session] is one running timer. Replay writes a command ("run SEQ N",
// "end") and measures the span until the answer, a [Report], arrives: the
// span is the sample, the timer's own number is only a cross-check
// ([CheckClock]). Anything a visit does wrong is a [*Failure] whose Reason
// names it (timed_out, unexpected_report, clock_mismatch, left_processes,
// threads_exceeded, ...); other errors mean the visit could not be run.
//
// # Sandbox
//
// A [Sandbox] is a bubblewrap invocation: a new mount namespace holding
// only the timer's closure directories, the visit's inputs (read-only) and
// its output directory, a private /tmp, and every other namespace unshared.
// [Probe] finds bwrap and checks that it can make one on this machine.
package visit
