// Package prepare turns a verified capture into timers.
//
// # Object routes
//
// Prepare compiles the C harness (package prepare/harness) once, copies
// each build's captured objects out of the store, checks them against the
// link policy (policy.go: no symbol the timer or the C library provides,
// no load-time code, linker arguments from an allowlist only; a violation
// is the entry's failure), links them unchanged with the harness into one
// executable per (case, route), and checks after the link that the objects
// still hash to their captured digests.
//
// # Process routes
//
// Prepare checks that the interpreter still hashes to what capture recorded
// and pins the wrapper script by its captured digest.
//
// # Closure
//
// Every timer is run once with --closure, in the sandbox (route code runs
// there: the capture and this stage are hidden); each regular file it maps
// or imports is pinned by digest, for replay to re-hash around every round
// and to show, by directory, inside each visit's sandbox.
package prepare
