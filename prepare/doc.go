// Package prepare turns a verified capture into timers.
//
// # Object routes
//
// Prepare compiles the C harness (package prepare/harness) once, copies
// each build's captured objects out of the store, links them unchanged with
// the harness into one executable per (case, route), and checks after the
// link that the objects still hash to their captured digests.
//
// # Process routes
//
// Prepare checks that the interpreter still hashes to what capture recorded
// and pins the wrapper script by its captured digest.
//
// # Closure
//
// Every timer is run once with --closure; each regular file it maps is
// pinned by digest, for replay to re-hash around every round.
package prepare
