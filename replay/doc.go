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
// A visit writes a visit file (docs/protocol.md), runs the timer with the
// configured threads, parses its report, checks every output element
// against the capture's oracle packet, and stores the outputs and samples.
// A failed check, a crash or a timeout is a failed visit, kept.
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
