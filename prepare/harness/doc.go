// Package harness holds the C timer harness for object routes, embedded as
// [Source], and the tests that hold it to docs/protocol.md.
//
// The harness is linked with a route's objects, which define
// `int tilepipe_entry(void *const *buffers)`. It times that entry and
// nothing else: inputs are loaded and outputs allocated before the first
// call, and no check runs inside a timed batch.
//
// # Visit
//
// A visit is one run of `harness --visit VISIT.txt`: one process, one case,
// one route. The harness validates the entry with two calls, writes the
// first call's outputs, times it, re-checks, and prints one JSON report.
// A failed check is a report (status "failed", exit 0) naming the first
// failure; a malformed VISIT.txt or an unreadable input is exit 2. Among
// the report's checks, the failing one is "fail", those before it in the
// order guards, poison, inputs, repeat are "pass" and those after it
// "not_run". A failing call (entry_failed) fails no check: checks that have
// passed at least once are "pass", the rest "not_run".
//
// # Guard
//
// Every buffer sits between two 4096-byte guard regions filled with the
// canary (0xA5 ^ (i & 0xff)) at offset i of each region; the data start is
// 64-byte aligned. A changed canary byte is
// `guard_overwritten: NAME before|after byte OFFSET`, OFFSET counted from
// the start of that region, so a write just before the data shows as
// "before byte 4092" (for a 4-byte element). Guards are checked after each
// validation call and once after timing, not during it: an overrun that
// starts only during timing is reported after timing, not when it happened.
//
// # Poison
//
// Before each validation call every output element is set to a NaN bit
// pattern, 0x7FC0DEAD (f32) or 0x7FF8DEADDEADDEAD (i64) for the first call
// and 0x7FC0BEEF / 0x7FF8BEEFBEEFBEEF for the second. An element still
// bit-equal to the poison after the call was not written
// (`output_not_overwritten: NAME element I`); the second pattern catches an
// entry that writes only on its first call, as a result cache would.
// Inputs are compared with a private copy after each call
// (`input_mutated`), and the two calls' outputs byte by byte
// (`not_repeatable`).
//
// # Calibration
//
// After warming up for warmup_ms, the harness picks n, the calls per
// sample: 1, doubled until one batch of n calls takes at least sample_ms
// (n at most 2^30). It then records samples batch timings of n calls and
// singles timings of one call each with CLOCK_MONOTONIC. Each call goes
// through a volatile function pointer so none can be elided; return codes
// are OR-ed together and a non-zero result is reported after timing as
// `entry_failed: returned R (during timing)`.
//
// # Closure
//
// `harness --closure` prints, sorted, the absolute path of every regular
// file mapped into the process (from /proc/self/maps) plus the executable
// itself. Libraries the entry would load only when called (dlopen) are not
// in this list.
package harness
