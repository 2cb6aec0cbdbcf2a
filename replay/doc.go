// Package replay times exactly the prepared binaries.
//
// # Plan
//
// [Orders] gives the balanced route orders (every permutation for up to
// three routes, a Williams square beyond); [Plan] lists every visit: in
// round r the cases rotated by r, each with the routes in that round's
// order. One visit is one process.
//
// # Visit
//
// A visit writes a visit file (docs/protocol.md, visit protocol 2), starts
// the timer in its sandbox and CPU cgroup (internal/visit;
// docs/threat-model.md), and drives it on replay's own clock: warm-up,
// calibration, empty, batch and single samples, whose spans replay
// measures; the timer's own numbers are a cross-check. It then checks every
// output element against the capture's oracle packet and stores the
// outputs, the samples and the visit's CPU time. A failed check, a forged
// or unexpected report, a crash, a timeout, a process left behind or more
// CPU than the threads allow is a failed visit, kept; the replay goes on.
//
// # Closure
//
// Before and after every round every timer and every file of its closure
// is re-hashed; a change stops the replay and the prevented visits are
// recorded as not_run.
//
// # Journal
//
// Every finished visit, closure check and session start is appended and
// fsynced to journal.jsonl; --resume reloads it and continues the same
// plan without losing or duplicating a visit.
//
// # Summary
//
// [Summaries] gives per case and route the order statistics of per-op
// times and the paired ratio against the baseline; [Table] renders them.
package replay
